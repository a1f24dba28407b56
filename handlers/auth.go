package handlers

import (
	"context"
	"errors"

	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
)

// recordActor puts who makes the request (the client's address; the user
// too once setUser knows them) into the request's context, where store
// methods find it for the audit log.
func (h *Handler) recordActor(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		c.SetRequest(req.WithContext(store.WithActor(req.Context(), store.Actor{IP: c.RealIP()})))
		return next(c)
	}
}

// setUser makes u the request's user, for handlers and for the audit log.
func setUser(c echo.Context, u *store.User) {
	c.Set(ctxUser, u)
	req := c.Request()
	c.SetRequest(req.WithContext(store.WithActor(req.Context(), store.Actor{UserID: u.ID, IP: c.RealIP()})))
}

// loadAPIUser is loadUser for /api/ routes: a request with an
// `Authorization: Bearer` token is made by the token's user, reloaded with
// their current grants on every request; without the header the session
// decides. A bad, revoked or disabled user's token is a 401 whatever the
// cookie says: a client that sends a token means that token.
//
// Bearer requests need no exemption from crossOriginProtection: clients
// that send tokens (scripts, servers) send no Origin or Sec-Fetch-Site, and
// a browser cannot send the header cross-site without a CORS preflight we
// never answer.
func (h *Handler) loadAPIUser(next echo.HandlerFunc) echo.HandlerFunc {
	withSession := h.loadUser(next)
	return func(c echo.Context) error {
		token, sent := bearerToken(c)
		if !sent {
			return withSession(c)
		}
		if token == "" {
			return unauthorizedToken(c)
		}
		u, err := h.store.UserByToken(c.Request().Context(), token)
		if errors.Is(err, store.ErrNotFound) {
			return unauthorizedToken(c)
		}
		if err != nil {
			return err
		}
		setUser(c, u)
		c.Set(ctxToken, token)
		return next(c)
	}
}

// loadStreamUser is loadUser (api: loadAPIUser) for the stream of one
// run (:id), which reads the user and the run in one statement
// (store.StreamOpen) instead of one each: streams open by the thousand
// when a server restarts. The run is kept for loadRun, which still
// decides access. Anything that statement does not find (no credential, a
// bad one, a disabled user, no such run) goes the plain way, which says
// what is wrong in the plain words.
func (h *Handler) loadStreamUser(api bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		plain := h.loadUser(next)
		if api {
			plain = h.loadAPIUser(next)
		}
		return func(c echo.Context) error {
			switch found, err := h.openStreamUser(c, api); {
			case err != nil:
				return err
			case !found:
				return plain(c)
			}
			return next(c)
		}
	}
}

// openStreamUser is loadStreamUser's statement: found, the request has its
// user and its run. Its frame is gone before the stream's handler runs
// (see logRequest).
func (h *Handler) openStreamUser(c echo.Context, api bool) (found bool, err error) {
	var cred store.StreamCredential
	if !h.streamCredentialOf(c, api, &cred) {
		return false, nil
	}
	u, run, hasApproval, err := h.store.StreamOpen(c.Request().Context(), &cred)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	keepStreamUser(c, u, cred.Token, runForAccess{run, hasApproval, cred.SessionID})
	return true, nil
}

// keepStreamUser gives the request what openStreamUser read. A function of
// its own, as streamCredentialOf.
//
//go:noinline
func keepStreamUser(c echo.Context, u *store.User, token string, run runForAccess) {
	setUser(c, u)
	if token != "" {
		c.Set(ctxToken, token)
	}
	c.Set(ctxRunForAccess, run)
}

// streamCredentialOf fills cred with the credential a stream's open came
// with, and its run; false when it has none that could work. A function
// of its own, so that its frame is gone while the open waits for its
// statement.
//
//go:noinline
func (h *Handler) streamCredentialOf(c echo.Context, api bool, cred *store.StreamCredential) bool {
	runID, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return false
	}
	cred.RunID = runID
	if token, sent := bearerToken(c); api && sent {
		cred.Token = token
		return strings.HasPrefix(token, store.TokenPrefix)
	}
	cred.SessionID = h.sessionID(c)
	return cred.SessionID != ""
}

// ctxRunForAccess is the echo context key of the run loadStreamUser read
// with the user (a runForAccess), for loadRun.
const ctxRunForAccess = "run_for_access"

type runForAccess struct {
	run         *store.Run
	hasApproval bool
	sessionID   string // the session they were read with, for streamCredential
}

// ctxToken is the echo context key of the bearer token a request came
// with. It stays in memory: never logged, never rendered.
const ctxToken = "api_token"

// reloadUser loads the request's user afresh through the credential the
// request came with, for long-lived requests (streams) that re-check
// access: a bearer token is resolved again, so a revoked token stops a
// stream; a session is looked up again, so logging out (in any tab) or
// being disabled stops it. A credential that no longer works is
// store.ErrNotFound.
func (h *Handler) reloadUser(c echo.Context) (*store.User, error) {
	return h.userOf(c.Request().Context(), h.streamCredential(c, uuid.Nil))
}

// userOf loads the user a credential (a token, or else a session) belongs
// to, afresh. A credential that no longer works, or a disabled user, is
// ErrNotFound.
func (h *Handler) userOf(ctx context.Context, cred store.StreamCredential) (*store.User, error) {
	if cred.Token != "" {
		return h.store.UserByToken(ctx, cred.Token)
	}
	if cred.SessionID == "" {
		return nil, store.ErrNotFound
	}
	u, err := h.store.UserBySession(ctx, cred.SessionID)
	if err == nil && u.Disabled() {
		return nil, store.ErrNotFound
	}
	return u, err
}

// keyBadToken is the one answer to a token that does not work, whatever is
// wrong with it: saying which would help someone guessing tokens.
const keyBadToken = "api.bad_token"

// bearerToken is the token of the request's `Authorization: Bearer`
// header; sent says there is an Authorization header at all, and a token
// of "" that it is not a bearer token.
func bearerToken(c echo.Context) (token string, sent bool) {
	auth := c.Request().Header.Get(echo.HeaderAuthorization)
	if auth == "" {
		return "", false
	}
	scheme, token, _ := strings.Cut(auth, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(token), true
}

// unauthorizedToken answers a request whose Authorization header does not
// work: 401 with the error JSON (never the HTML login page, which a
// program cannot read) and the WWW-Authenticate challenge of RFC 6750.
func unauthorizedToken(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="refundd", error="invalid_token"`)
	return c.JSON(http.StatusUnauthorized, apiError{Error: apiErrorBody{Code: codeUnauthorized, Message: viewerLang(c).T(keyBadToken)}})
}

// requireRole refuses signed-in users whose role is not one of roles with a
// 403: these pages are listed in the design, so their existence is no
// secret. Use it after requireUser.
func (h *Handler) requireRole(roles ...string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if u := currentUser(c); u == nil || !slices.Contains(roles, u.Role) {
				return echo.NewHTTPError(http.StatusForbidden)
			}
			return next(c)
		}
	}
}
