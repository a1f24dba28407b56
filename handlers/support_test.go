package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

func TestSupportRuns(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	first := a.startRun(t, "customer@example.com", 100)
	second := a.startRun(t, "customer2@example.com", 100)
	if _, err := a.store.RequestApproval(context.Background(), second.ID, store.ActionProposed{}); err != nil {
		t.Fatal(err)
	}
	c := a.client(t)
	a.login(t, c, "support@example.com")

	listed := func(t *testing.T, query url.Values) []string {
		t.Helper()
		r := a.get(t, c, "/support/runs?"+query.Encode())
		wantStatus(t, r, http.StatusOK)
		return r.doc(t).Find("#support-runs tbody a").Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("href", "") })
	}
	href := func(r *store.Run) string { return "/support/runs/" + r.ID.String() }
	for _, tc := range []struct {
		name  string
		query url.Values
		want  []string
	}{
		{"all, newest first", url.Values{}, []string{href(second), href(first)}},
		{"by ID", url.Values{"q": {first.ID.String()}}, []string{href(first)}},
		{"by part of the email", url.Values{"q": {"CUSTOMER2@"}}, []string{href(second)}},
		{"by state", url.Values{"state": {store.StateAwaitingApproval}}, []string{href(second)}},
		{"no match", url.Values{"q": {"nobody"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := listed(t, tc.query)
			if len(got) != len(tc.want) {
				t.Fatalf("listed %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("listed %v, want %v", got, tc.want)
				}
			}
		})
	}

	t.Run("unknown state", func(t *testing.T) {
		r := a.get(t, c, "/support/runs?state=lost")
		wantStatus(t, r, http.StatusUnprocessableEntity)
		if r.doc(t).Find("#search-error").Length() != 1 {
			t.Error("no #search-error for an unknown state")
		}
	})
}

func TestSupportRuns_OnlySupport(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	for _, email := range []string{"customer@example.com", "approver@example.com", "admin@example.com"} {
		c := a.client(t)
		a.login(t, c, email)
		if got := a.get(t, c, "/support/runs").status; got != http.StatusForbidden {
			t.Errorf("%s: status = %d, want 403", email, got)
		}
	}
	wantRedirect(t, a.get(t, a.client(t), "/support/runs"), "/login?next=%2Fsupport%2Fruns")
}
