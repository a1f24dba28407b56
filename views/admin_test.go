package views_test

import (
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

func TestAdminUsersPage(t *testing.T) {
	t.Parallel()
	me := &store.User{ID: 1, Email: "ada@example.com", Role: store.RoleAdmin}
	casey := store.User{ID: 2, Email: "casey@example.com", Role: store.RoleCustomer, Grants: []string{store.GrantRefundAccess}}
	cam := store.User{ID: 3, Email: "cam@example.com", Role: store.RoleCustomer, DisabledAt: sql.NullTime{Time: time.Now(), Valid: true}}
	doc := render(t, views.AdminUsersPage(me, views.AdminUsers{
		Users: []store.User{*me, casey, cam},
		Tokens: []store.Token{
			{ID: 9, UserID: 2, Name: "billing", RevokedAt: sql.NullTime{Time: time.Now(), Valid: true}},
			{ID: 8, UserID: 2, Name: "ci"},
		},
		Flash: []string{"Done."},
	}))

	t.Run("own row offers no way to lock oneself out", func(t *testing.T) {
		row := doc.Find("#user-1")
		if n := row.Find(`form[action="/admin/users/1/role"], form[action="/admin/users/1/disable"]`).Length(); n != 0 {
			t.Errorf("own row has %d role/disable forms, want 0", n)
		}
	})
	t.Run("grant held offers revoke", func(t *testing.T) {
		f := doc.Find(`#user-2 form[action="/admin/users/2/grants"]`)
		if v, _ := f.Find(`input[name="on"]`).Attr("value"); v != "false" || !strings.Contains(f.Find("button").Text(), "Revoke") {
			t.Errorf("grant form on=%q button=%q, want a revoke", v, f.Find("button").Text())
		}
		f = doc.Find(`#user-3 form[action="/admin/users/3/grants"]`)
		if v, _ := f.Find(`input[name="on"]`).Attr("value"); v != "true" {
			t.Errorf("missing grant form on=%q, want a grant", v)
		}
	})
	t.Run("disabled user offers enable", func(t *testing.T) {
		if doc.Find(`#user-3 form[action="/admin/users/3/enable"]`).Length() != 1 || doc.Find(`#user-2 form[action="/admin/users/2/disable"]`).Length() != 1 {
			t.Error("want enable for the disabled user and disable for the active one")
		}
	})
	t.Run("tokens", func(t *testing.T) {
		if doc.Find(`#token-9 form`).Length() != 0 || doc.Find(`#token-9 .revoked`).Length() != 1 {
			t.Error("a revoked token offers revoke again or is not marked revoked")
		}
		if doc.Find(`#token-8 form[action="/admin/tokens/8/revoke"]`).Length() != 1 {
			t.Error("a live token has no revoke form")
		}
		if got := doc.Find(`#user-3 .tokens li`).Length(); got != 0 {
			t.Errorf("cam's row lists %d tokens of others", got)
		}
	})
	if got := doc.Find(".flash").Text(); got != "Done." {
		t.Errorf("flash = %q", got)
	}
}

func TestAuditPage(t *testing.T) {
	t.Parallel()
	u := &store.User{ID: 4, Email: "sam@example.com", Role: store.RoleSupport}
	doc := render(t, views.AuditPage(u, store.AuditLogin, []store.AuditEntry{
		{ID: 2, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ActorEmail: sql.NullString{String: "casey@example.com", Valid: true},
			ActorIP: "192.0.2.1", Action: store.AuditLogin, Subject: "user:2", Details: json.RawMessage(`{}`)},
		{ID: 1, ActorIP: "192.0.2.9", Action: store.AuditLoginFailed, Details: json.RawMessage(`{"reason":"<b>x</b>"}`)},
	}))
	rows := doc.Find("#audit tbody tr")
	if rows.Length() != 2 {
		t.Fatalf("rows = %d, want 2", rows.Length())
	}
	if got := rows.First().Find(".at").Text(); got != "2026-01-02 03:04:05 UTC" {
		t.Errorf("time = %q", got)
	}
	if got := rows.Eq(1).Find(".actor").Text(); !strings.Contains(got, "nobody signed in") {
		t.Errorf("anonymous actor = %q", got)
	}
	if doc.Find("#audit b").Length() != 0 {
		t.Error("details are not escaped")
	}
	if v, _ := doc.Find(`select[name="action"] option[selected]`).Attr("value"); v != store.AuditLogin {
		t.Errorf("selected filter = %q, want %q", v, store.AuditLogin)
	}
}
