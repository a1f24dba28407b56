package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

const msgBadCredentials = "You entered a wrong email or password."

// loginForm is the login form as posted.
type loginForm struct {
	Email    string
	Password string
}

// Validate normalises the form and rejects what cannot be a login attempt.
func (f *loginForm) Validate() error {
	f.Email = strings.TrimSpace(f.Email)
	switch {
	case f.Email == "" || f.Password == "":
		return store.Errorf(store.CodeInvalid, "Enter your email and password.")
	case len(f.Email) > 254 || len(f.Password) > 1024:
		return store.Errorf(store.CodeInvalid, "That email or password is too long.")
	case !storableEmail(f.Email):
		return store.Errorf(store.CodeInvalid, "That email contains characters no email address has.")
	}
	return nil
}

// storableEmail reports whether s is text PostgreSQL can hold (valid
// UTF-8 without NUL): anything else it refuses with an error, which must
// not surface as a 500.
func storableEmail(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

func (h *Handler) showLoginPage(c echo.Context) error {
	if currentUser(c) != nil {
		return redirect(c, "/")
	}
	return render(c, http.StatusOK, views.LoginPage(h.loginPage("", "")))
}

func (h *Handler) login(c echo.Context) error {
	f := loginForm{Email: c.FormValue("email"), Password: c.FormValue("password")}
	if err := f.Validate(); err != nil {
		email := f.Email
		if !storableEmail(email) {
			email = "" // bytes not worth echoing into the page
		}
		return render(c, http.StatusUnprocessableEntity, views.LoginPage(h.loginPage(email, err.Error())))
	}
	u, err := h.store.Authenticate(c.Request().Context(), f.Email, f.Password)
	if errors.Is(err, store.ErrTooManyAttempts) {
		h.log.InfoContext(c.Request().Context(), "login throttled", "ip", c.RealIP())
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(store.LoginWindow.Seconds())))
		return render(c, http.StatusTooManyRequests, views.LoginPage(h.loginPage(f.Email, store.ErrTooManyAttempts.Message)))
	}
	if errors.Is(err, store.ErrBadCredentials) {
		h.log.InfoContext(c.Request().Context(), "login failed", "ip", c.RealIP())
		return render(c, http.StatusUnauthorized, views.LoginPage(h.loginPage(f.Email, msgBadCredentials)))
	}
	if err != nil {
		return err
	}
	if err := h.startSession(c, u); err != nil {
		return err
	}
	h.log.InfoContext(c.Request().Context(), "login", "user_id", u.ID, "role", u.Role)
	return redirect(c, "/")
}

func (h *Handler) logout(c echo.Context) error {
	if err := h.endSession(c); err != nil {
		return err
	}
	return redirect(c, "/login")
}

func (h *Handler) loginPage(email, problem string) views.LoginForm {
	f := views.LoginForm{Email: email, Error: problem}
	if h.cfg.DemoLogins {
		f.DemoLogins = store.DemoUsers
	}
	return f
}
