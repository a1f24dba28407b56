package handlers

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
)

// sessionMaxAge bounds how long a login lasts; the cookie's signed timestamp
// enforces it even if the browser keeps the cookie longer.
const sessionMaxAge = 7 * 24 * 60 * 60

const (
	keySessionID = "sid"  // session value: the server-side session's ID (store.CreateSession)
	ctxUser      = "user" // echo context key: the *store.User loaded for this request
)

// newSessionStore derives separate signing and encryption keys from the one
// secret, so the cookie is both tamper-proof and unreadable.
func newSessionStore(secret string, secure bool) (*sessions.CookieStore, error) {
	hashKey, err := hkdf.Key(sha256.New, []byte(secret), nil, "refundd session cookie: hmac", 64)
	if err != nil {
		return nil, fmt.Errorf("handlers: session key: %w", err)
	}
	blockKey, err := hkdf.Key(sha256.New, []byte(secret), nil, "refundd session cookie: aes", 32)
	if err != nil {
		return nil, fmt.Errorf("handlers: session key: %w", err)
	}
	s := sessions.NewCookieStore(hashKey, blockKey)
	s.MaxAge(sessionMaxAge)
	s.Options = &sessions.Options{
		Path:     "/",
		MaxAge:   sessionMaxAge,
		HttpOnly: true,
		Secure:   secure,
		SameSite: http.SameSiteLaxMode,
	}
	return s, nil
}

// sessionCookieName uses the __Host- prefix when the cookie is Secure: the
// browser then refuses it from any other host or path.
func sessionCookieName(secure bool) string {
	if secure {
		return "__Host-refundd_session"
	}
	return "refundd_session"
}

// session returns the request's session; a cookie that does not verify
// (old key, tampering, expiry) yields a fresh, empty one.
func (h *Handler) session(c echo.Context) *sessions.Session {
	s, _ := h.sessions.Get(c.Request(), h.cookie)
	return s
}

// loadUser reloads the signed-in user from the database on every request,
// so a disabled account or a changed grant takes effect at once. A user who
// no longer exists or is disabled is logged out.
func (h *Handler) loadUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		s := h.session(c)
		sid, ok := s.Values[keySessionID].(string)
		if !ok {
			return next(c)
		}
		u, err := h.store.UserBySession(c.Request().Context(), sid)
		switch {
		case errors.Is(err, store.ErrNotFound) || (err == nil && u.Disabled()):
			if err := h.endSession(c); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			setUser(c, u)
		}
		return next(c)
	}
}

// requireUser sends visitors who are not signed in to the login page (or a
// 401 for the API).
func (h *Handler) requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if currentUser(c) != nil {
			return next(c)
		}
		if isAPI(c.Request()) {
			return echo.NewHTTPError(http.StatusUnauthorized)
		}
		return redirect(c, loginPath(c.Request()))
	}
}

// currentUser is the signed-in user of this request, or nil.
func currentUser(c echo.Context) *store.User {
	u, _ := c.Get(ctxUser).(*store.User)
	return u
}

// startSession starts a new server-side session at every login and ends
// the one the browser held before, if any, so a session ID planted or
// copied before login is never the one that is signed in.
func (h *Handler) startSession(c echo.Context, u *store.User) error {
	s := h.session(c)
	ctx := c.Request().Context()
	if old, ok := s.Values[keySessionID].(string); ok {
		if err := h.store.EndSession(ctx, old); err != nil {
			return err
		}
	}
	sid, err := h.store.CreateSession(ctx, u.ID, sessionMaxAge*time.Second)
	if err != nil {
		return err
	}
	s.Values = map[any]any{keySessionID: sid}
	if err := s.Save(c.Request(), c.Response()); err != nil {
		return fmt.Errorf("handlers: save session: %w", err)
	}
	return nil
}

// endSession ends the server-side session, so a copy of the cookie is
// worth nothing, and deletes the cookie.
func (h *Handler) endSession(c echo.Context) error {
	s := h.session(c)
	if sid, ok := s.Values[keySessionID].(string); ok {
		if err := h.store.EndSession(c.Request().Context(), sid); err != nil {
			return err
		}
	}
	s.Values = map[any]any{}
	s.Options.MaxAge = -1
	if err := s.Save(c.Request(), c.Response()); err != nil {
		return fmt.Errorf("handlers: end session: %w", err)
	}
	return nil
}
