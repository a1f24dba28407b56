package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

// TestToken_PostRedirectGet: making a token redirects to the page that
// shows it; the token is in no URL and no header in clear, is shown once,
// and a reload makes no second token.
func TestToken_PostRedirectGet(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	admin := a.signedIn(t, "admin@example.com")
	cust := a.user(t, "customer@example.com")
	tokens := func() int {
		return a.count(t, `SELECT count(*) FROM api_tokens WHERE user_id = $1`, cust.ID)
	}

	made := a.post(t, admin, fmt.Sprintf("/admin/users/%d/tokens", cust.ID), url.Values{"name": {"billing script"}})
	wantRedirect(t, made, "/admin/tokens/new")
	shown := a.get(t, admin, "/admin/tokens/new")
	wantStatus(t, shown, http.StatusOK)
	token := strings.TrimSpace(shown.doc(t).Find("#new-token").Text())
	if !strings.HasPrefix(token, store.TokenPrefix) {
		t.Fatalf("#new-token = %q, want a token", token)
	}
	if cc := shown.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
	for name, values := range made.header {
		if strings.Contains(strings.Join(values, " "), token) {
			t.Errorf("the POST's %s header carries the token in clear", name)
		}
	}
	if btn := shown.doc(t).Find(`#copy-token[data-copy="#new-token"]`); btn.Length() != 1 || btn.AttrOr("hidden", "no") == "no" {
		t.Error("want a copy button, hidden until copy.js shows it")
	}
	wantStatus(t, a.bearer(t, http.MethodGet, "/api/orders", token, ""), http.StatusOK)

	t.Run("reload", func(t *testing.T) {
		again := a.get(t, admin, "/admin/tokens/new")
		wantRedirect(t, again, "/admin/users")
		if strings.Contains(again.body, token) {
			t.Error("the reload shows the token again")
		}
		users := a.get(t, admin, "/admin/users")
		if strings.Contains(users.body, token) {
			t.Error("the users page shows the token")
		}
		if got := users.doc(t).Find(".flash").Text(); !strings.Contains(got, "shown only once") {
			t.Errorf("flash = %q, want it to say the token is shown once", got)
		}
		if got := tokens(); got != 1 {
			t.Errorf("tokens = %d, want 1", got)
		}
	})
	t.Run("a refused name makes nothing", func(t *testing.T) {
		wantStatus(t, a.post(t, admin, fmt.Sprintf("/admin/users/%d/tokens", cust.ID), url.Values{"name": {"  "}}), http.StatusUnprocessableEntity)
		wantRedirect(t, a.get(t, admin, "/admin/tokens/new"), "/admin/users")
		if got := tokens(); got != 1 {
			t.Errorf("tokens = %d, want 1", got)
		}
	})
}
