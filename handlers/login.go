package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

const keyBadCredentials = "login.bad_credentials"

// loginForm is the login form as posted.
type loginForm struct {
	Email    string
	Password string
	Next     string // the same-site page to land on (safeNext)
}

// Validate normalises the form and rejects what cannot be a login attempt.
func (f *loginForm) Validate() error {
	f.Email = strings.TrimSpace(f.Email)
	switch {
	case f.Email == "" || f.Password == "":
		return store.Refuse(store.CodeInvalid, "login.missing", nil)
	case len(f.Email) > maxEmailLen || len(f.Password) > 1024:
		return store.Refuse(store.CodeInvalid, "login.too_long", nil)
	case !storableEmail(f.Email):
		return store.Refuse(store.CodeInvalid, "login.bad_email", nil)
	}
	return nil
}

// maxEmailLen is the longest email address (RFC 5321's path limit).
const maxEmailLen = 254

// maxEchoedEmail is the longest refused email the login page shows again,
// for its typist to correct: a longer one is no typing mistake.
const maxEchoedEmail = 1024

// storableEmail reports whether s is text PostgreSQL can hold (valid
// UTF-8 without NUL): anything else it refuses with an error, which must
// not surface as a 500.
func storableEmail(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// maxNextLen bounds the page a login returns to; longer is no page of ours.
const maxNextLen = 2000

// safeNext is where a login may send the browser: next when it is a path on
// this site, else "/". A browser reads "//evil", "/\evil" (and the same with
// a tab or newline inside, which it drops) as another host, so only a single
// leading slash and no backslash or control character pass.
func safeNext(next string) string {
	if len(next) < 1 || len(next) > maxNextLen || next[0] != '/' || strings.HasPrefix(next, "/login") {
		return "/"
	}
	if len(next) > 1 && next[1] == '/' {
		return "/"
	}
	for _, r := range next {
		if r < 0x20 || r == 0x7f || r == '\\' || !unicode.IsPrint(r) {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

// loginPath is where requireUser sends a visitor: the login page, carrying
// the page they asked for when it is one a GET can return to.
func loginPath(r *http.Request) string {
	if r.Method != http.MethodGet {
		return "/login"
	}
	next := safeNext(r.URL.RequestURI())
	if next == "/" {
		return "/login"
	}
	return "/login?next=" + url.QueryEscape(next)
}

func (h *Handler) showLoginPage(c echo.Context) error {
	next := safeNext(c.QueryParam("next"))
	if currentUser(c) != nil {
		return redirect(c, next)
	}
	return render(c, http.StatusOK, views.LoginPage(h.loginPage("", "", next)))
}

func (h *Handler) login(c echo.Context) error {
	f := loginForm{Email: c.FormValue("email"), Password: c.FormValue("password"), Next: safeNext(c.FormValue("next"))}
	if err := f.Validate(); err != nil {
		email := f.Email
		if !storableEmail(email) || len(email) > maxEchoedEmail {
			email = "" // bytes not worth echoing into the page
		}
		return render(c, http.StatusUnprocessableEntity, views.LoginPage(h.loginPage(email, langOf(c).Refusal(err), f.Next)))
	}
	u, err := h.store.Authenticate(c.Request().Context(), f.Email, f.Password)
	if errors.Is(err, store.ErrTooManyAttempts) {
		h.log.InfoContext(c.Request().Context(), "login throttled", "ip", c.RealIP())
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(store.LoginWindow.Seconds())))
		return render(c, http.StatusTooManyRequests, views.LoginPage(h.loginPage(f.Email, langOf(c).Refusal(store.ErrTooManyAttempts), f.Next)))
	}
	if errors.Is(err, store.ErrBadCredentials) {
		h.log.InfoContext(c.Request().Context(), "login failed", "ip", c.RealIP())
		return render(c, http.StatusUnauthorized, views.LoginPage(h.loginPage(f.Email, langOf(c).T(keyBadCredentials), f.Next)))
	}
	if err != nil {
		return err
	}
	if err := h.startSession(c, u); err != nil {
		return err
	}
	h.log.InfoContext(c.Request().Context(), "login", "user_id", u.ID, "role", u.Role)
	return redirect(c, f.Next)
}

func (h *Handler) logout(c echo.Context) error {
	if err := h.endSession(c); err != nil {
		return err
	}
	return redirect(c, "/login")
}

func (h *Handler) loginPage(email, problem, next string) views.LoginForm {
	f := views.LoginForm{Email: email, Error: problem, Next: next}
	if h.cfg.DemoLogins {
		f.DemoLogins = devdb.DemoUsers
	}
	return f
}
