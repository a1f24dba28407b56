package handlers

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// TestReloadUser_FollowsTheCredential: a long-lived request re-checks
// through the credential it came with, so revoking a token ends what the
// token opened even though its user is still fine.
func TestReloadUser_FollowsTheCredential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.MustOpen(t)
	u, err := st.CreateUser(ctx, "c@example.com", "C", store.RoleCustomer, "pw", store.GrantRefundAccess)
	if err != nil {
		t.Fatal(err)
	}
	tok, secret, err := st.CreateToken(ctx, u.ID, "stream")
	if err != nil {
		t.Fatal(err)
	}
	sess, err := newSessionStore("test-session-key-0123456789abcdef", false)
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{store: st, sessions: sess, cookie: sessionCookieName(false)}
	e := echo.New()
	// A browser's cookie, from a real login.
	login := httptest.NewRecorder()
	if err := h.startSession(e.NewContext(httptest.NewRequest("POST", "/login", nil), login), u); err != nil {
		t.Fatal(err)
	}
	request := func(token string) echo.Context {
		req := httptest.NewRequest("GET", "/api/runs/x/stream", nil)
		if token == "" {
			for _, ck := range login.Result().Cookies() {
				req.AddCookie(ck)
			}
		}
		c := e.NewContext(req, httptest.NewRecorder())
		setUser(c, u)
		if token != "" {
			c.Set(ctxToken, token)
		}
		return c
	}
	bySession, byToken := request(""), request(secret)
	for name, c := range map[string]echo.Context{"session": bySession, "token": byToken} {
		if got, err := h.reloadUser(c); err != nil || got.ID != u.ID {
			t.Errorf("%s: reloadUser = %v, %v; want the user", name, got, err)
		}
	}
	if err := st.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.reloadUser(byToken); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoked token: err = %v, want ErrNotFound", err)
	}
	if _, err := h.reloadUser(bySession); err != nil {
		t.Errorf("session after the token's revocation: %v", err)
	}
	if err := st.SetDisabled(ctx, u.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := h.reloadUser(bySession); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("disabled user's session: err = %v, want ErrNotFound", err)
	}
	if err := st.SetDisabled(ctx, u.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := h.reloadUser(request("")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("session after being enabled again: err = %v, want ErrNotFound (disabling ended it)", err)
	}
	if _, err := h.reloadUser(e.NewContext(httptest.NewRequest("GET", "/", nil), httptest.NewRecorder())); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("no credential: err = %v, want ErrNotFound", err)
	}
}
