package handlers

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/securecookie"
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
	decoded := &gobCache{m: map[string]map[any]any{}}
	for _, c := range s.Codecs {
		if sc, ok := c.(*securecookie.SecureCookie); ok {
			sc.SetSerializer(decoded)
		}
	}
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

// sessionID is the server-side session the request's cookie names, or ""
// when it names none or does not verify: what a stream needs of the
// session, read without gorilla's per-request registry (which copies the
// request and makes two maps, for every one of thousands of stream opens).
func (h *Handler) sessionID(c echo.Context) string {
	ck, err := c.Request().Cookie(h.cookie)
	if err != nil {
		return ""
	}
	if sid, ok := h.verified.get(ck.Value, time.Now()); ok {
		return sid
	}
	var values map[any]any
	if securecookie.DecodeMulti(h.cookie, ck.Value, &values, h.sessions.Codecs...) != nil {
		return ""
	}
	sid, _ := values[keySessionID].(string)
	h.verified.put(ck.Value, sid)
	return sid
}

// verifiedCookies remembers session cookies whose MAC and age were
// checked, with the session ID each names: a browser sends the same cookie
// with every stream it opens, and checking its MAC, decrypting it and
// decoding its gob was an eighth of the CPU of opening thousands of
// streams. The key is the whole cookie, MAC included, so only a cookie
// already verified hits; a hit is still refused once the cookie's own
// signed timestamp is older than sessionMaxAge. What the session ID is
// worth (logged out, disabled) is asked of the database every time.
type verifiedCookies struct {
	mu sync.Mutex
	m  map[string]verifiedCookie
}

type verifiedCookie struct {
	sid    string
	signed int64 // the cookie's signed timestamp, Unix seconds
}

const verifiedCookiesSize = 4096

func (v *verifiedCookies) get(cookie string, now time.Time) (string, bool) {
	v.mu.Lock()
	e, ok := v.m[cookie]
	v.mu.Unlock()
	if !ok || now.Unix()-e.signed > sessionMaxAge {
		return "", false
	}
	return e.sid, true
}

// put remembers a cookie just verified. Its value is base64 of
// "date|value|mac" (securecookie's format); a cookie whose date does not
// read is not remembered.
func (v *verifiedCookies) put(cookie, sid string) {
	raw, err := base64.URLEncoding.DecodeString(cookie)
	if err != nil {
		return
	}
	date, _, _ := bytes.Cut(raw, []byte("|"))
	signed, err := strconv.ParseInt(string(date), 10, 64)
	if err != nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil || len(v.m) >= verifiedCookiesSize {
		v.m = make(map[string]verifiedCookie, verifiedCookiesSize)
	}
	v.m[cookie] = verifiedCookie{sid: sid, signed: signed}
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

// gobCache is securecookie's gob serializer that remembers what it
// decoded: a browser sends the same cookie with every request and every
// stream it opens, and decoding gob compiles a decoder each time (an
// eighth of the CPU of opening thousands of streams). Only a cookie whose
// MAC and age were checked reaches Deserialize, and a hit is copied, so
// callers may change what they get. Values other than strings and
// integers (flash messages) are decoded every time.
type gobCache struct {
	mu sync.Mutex
	m  map[string]map[any]any
}

const gobCacheSize = 4096

func (g *gobCache) Serialize(src any) ([]byte, error) {
	return securecookie.GobEncoder{}.Serialize(src)
}

func (g *gobCache) Deserialize(src []byte, dst any) error {
	out, ok := dst.(*map[any]any)
	if !ok {
		return securecookie.GobEncoder{}.Deserialize(src, dst)
	}
	g.mu.Lock()
	cached, hit := g.m[string(src)]
	g.mu.Unlock()
	if hit {
		if *out == nil {
			*out = make(map[any]any, len(cached))
		}
		maps.Copy(*out, cached)
		return nil
	}
	if err := (securecookie.GobEncoder{}).Deserialize(src, dst); err != nil {
		return err
	}
	for _, v := range *out {
		switch v.(type) {
		case string, int, int64, bool:
		default:
			return nil
		}
	}
	g.mu.Lock()
	if len(g.m) >= gobCacheSize {
		clear(g.m)
	}
	g.m[string(src)] = maps.Clone(*out)
	g.mu.Unlock()
	return nil
}
