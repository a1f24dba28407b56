package views_test

import (
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

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
	t.Run("grant held offers revoke, behind a confirm step", func(t *testing.T) {
		f := doc.Find(`#user-2 details.confirm:not([open]) form[action="/admin/users/2/grants"]`)
		if v, _ := f.Find(`input[name="on"]`).Attr("value"); v != "false" || !strings.Contains(f.Find("button").Text(), "Yes, revoke") ||
			doc.Find("#user-2 .grant.held").Text() != "Has permission to request refunds" {
			t.Errorf("grant form on=%q button=%q, want a revoke to confirm", v, f.Find("button").Text())
		}
		f = doc.Find(`#user-3 form[action="/admin/users/3/grants"]`)
		if v, _ := f.Find(`input[name="on"]`).Attr("value"); v != "true" {
			t.Errorf("missing grant form on=%q, want a grant", v)
		}
	})
	t.Run("no destructive action on one click", func(t *testing.T) {
		forms := doc.Find(`form[action$="/disable"], form[action$="/revoke"], form:has(input[name="on"][value="false"])`)
		if forms.Length() != 3 {
			t.Fatalf("%d destructive forms, want 3 (disable, revoke a grant, revoke a token)", forms.Length())
		}
		forms.Each(func(_ int, f *goquery.Selection) {
			if f.ParentFiltered("details.confirm:not([open])").Length() != 1 || !f.Parent().Children().First().Is("summary") {
				t.Errorf("form %s is not behind a closed confirm step", f.AttrOr("action", ""))
			}
		})
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
		if doc.Find(`#token-8 details.confirm form[action="/admin/tokens/8/revoke"]`).Length() != 1 {
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
	runID := uuid.MustParse("01a23190-1108-7bcc-96ab-e219569e21eb")
	entries := []store.AuditEntry{
		{ID: 3, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ActorName: sql.NullString{String: "Ana", Valid: true},
			ActorRole: sql.NullString{String: store.RoleAdmin, Valid: true}, ActorIP: "192.0.2.1", Action: store.AuditGrantAdded,
			Subject: store.UserSubject(2), SubjectName: sql.NullString{String: "Bo", Valid: true}, SubjectEmail: sql.NullString{String: "bo@example.com", Valid: true},
			Details: json.RawMessage(`{"grant":"refund_access"}`)},
		{ID: 2, ActorName: sql.NullString{String: "Sam", Valid: true}, ActorRole: sql.NullString{String: store.RoleApprover, Valid: true},
			Action: store.AuditRunApproved, Subject: store.RunSubject(runID), Details: json.RawMessage(`{}`)},
		{ID: 1, ActorIP: "192.0.2.9", Action: store.AuditLoginFailed, Details: json.RawMessage(`{"reason":"<b>x</b>","email":"who@example.com"}`)},
	}
	sentences := func(doc *goquery.Document) []string {
		return doc.Find("#audit > li .sentence").Map(func(_ int, s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") })
	}
	want := []string{
		"Ana (admin) gave Bo (bo@example.com) permission to request refunds.",
		"Sam (approver) approved the refund of run …569e21eb.",
		"A login as who@example.com failed (<b>x</b>).",
	}

	t.Run("support", func(t *testing.T) {
		support := &store.User{ID: 4, Role: store.RoleSupport}
		doc := render(t, views.AuditPage(support, views.AuditView{Action: store.AuditGrantAdded, Entries: entries, More: true}))
		if got := sentences(doc); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("sentences =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if got := doc.Find("#audit-3 .at").Text(); got != "2026-01-02 03:04:05 UTC" {
			t.Errorf("time = %q", got)
		}
		if got := doc.Find("#audit-2 a.subject").AttrOr("href", ""); got != "/support/runs/"+runID.String() {
			t.Errorf("run link = %q, want support's page of the run", got)
		}
		if doc.Find("#audit-3 a.subject").Length() != 0 {
			t.Error("support gets a link to the admin page")
		}
		if doc.Find("#audit b").Length() != 0 {
			t.Error("details are not escaped")
		}
		if v, _ := doc.Find(`select[name="action"] option[selected]`).Attr("value"); v != store.AuditGrantAdded {
			t.Errorf("selected filter = %q, want %q", v, store.AuditGrantAdded)
		}
		if got := doc.Find(`.pager a[rel="next"]`).AttrOr("href", ""); got != "/support/audit?before=1&action=grant.added" {
			t.Errorf("older = %q", got)
		}
	})
	t.Run("admin", func(t *testing.T) {
		admin := &store.User{ID: 5, Role: store.RoleAdmin}
		doc := render(t, views.AuditPage(admin, views.AuditView{Entries: entries}))
		if got := doc.Find("#audit-3 a.subject").AttrOr("href", ""); got != "/admin/users#user-2" {
			t.Errorf("user link = %q, want the user's card", got)
		}
		if doc.Find("#audit-2 a.subject").Length() != 0 {
			t.Error("an admin, who cannot open runs, gets a link to one")
		}
		if doc.Find(`.pager a`).Length() != 0 {
			t.Error("the only page links to others")
		}
	})
}
