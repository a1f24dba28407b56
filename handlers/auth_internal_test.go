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
	h := &Handler{store: st}
	request := func(token string) echo.Context {
		c := echo.New().NewContext(httptest.NewRequest("GET", "/api/runs/x/stream", nil), httptest.NewRecorder())
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
}
