package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

type runsPageJSON struct {
	Runs  []json.RawMessage `json:"runs"`
	Next  *string           `json:"next"`
	Limit int               `json:"limit"`
}

// listRuns reads every page of GET /api/runs with this limit and returns
// the run IDs in the order they came, and the pages' sizes.
func (a *app) listRuns(t *testing.T, c *http.Client, limit string) (ids []uuid.UUID, pages []int) {
	t.Helper()
	after := ""
	for range 100 {
		path := "/api/runs?limit=" + limit
		if after != "" {
			path += "&after=" + after
		}
		r := a.get(t, c, path)
		wantStatus(t, r, http.StatusOK)
		p := decode[runsPageJSON](t, r)
		for _, raw := range p.Runs {
			var run runJSON
			if err := json.Unmarshal(raw, &run); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, run.ID)
		}
		pages = append(pages, len(p.Runs))
		if p.Next == nil {
			return ids, pages
		}
		after = *p.Next
	}
	t.Fatal("GET /api/runs never gave next: null")
	return nil, nil
}

func TestAPIListRuns_ByRole(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	mine := a.startRun(t, "customer@example.com", 100)
	pending := a.awaitingApproval(t, "customer@example.com")
	theirs := a.startRun(t, "customer2@example.com", 100)
	theirsPending := a.awaitingApproval(t, "customer2@example.com")

	for _, tc := range []struct {
		email string
		want  []uuid.UUID // newest first
	}{
		{"customer@example.com", []uuid.UUID{pending.ID, mine.ID}},
		{"customer2@example.com", []uuid.UUID{theirsPending.ID, theirs.ID}},
		// Approvers see the runs that asked for a decision, as on their pages.
		{"approver@example.com", []uuid.UUID{theirsPending.ID, pending.ID}},
		{"support@example.com", []uuid.UUID{theirsPending.ID, theirs.ID, pending.ID, mine.ID}},
		{"admin@example.com", nil},
	} {
		t.Run(tc.email, func(t *testing.T) {
			got, _ := a.listRuns(t, a.signedIn(t, tc.email), "10")
			if !slices.Equal(got, tc.want) {
				t.Errorf("runs = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAPIListRuns_Pages(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{APIPageLimit: 3})
	var want []uuid.UUID
	for range 7 {
		want = slices.Insert(want, 0, a.startRun(t, "customer@example.com", 100).ID)
	}
	c := a.signedIn(t, "customer@example.com")

	got, pages := a.listRuns(t, c, "2")
	if !slices.Equal(got, want) || !slices.Equal(pages, []int{2, 2, 2, 1}) {
		t.Errorf("runs = %v in pages %v, want %v in pages [2 2 2 1]", got, pages, want)
	}
	// A limit above API_PAGE_LIMIT is lowered to it, and the page says so.
	r := a.get(t, c, "/api/runs?limit=1000")
	wantStatus(t, r, http.StatusOK)
	if p := decode[runsPageJSON](t, r); len(p.Runs) != 3 || p.Limit != 3 || p.Next == nil {
		t.Errorf("limit=1000: %d runs, limit %d, next %v; want 3, 3 and a next", len(p.Runs), p.Limit, p.Next)
	}
	// The last page's next is null, not absent.
	r = a.get(t, c, "/api/runs?after="+want[5].String())
	if !strings.Contains(r.body, `"next":null`) {
		t.Errorf("last page = %s, want \"next\":null", r.body)
	}
}

func TestAPIListRuns_BadQuery(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	a.startRun(t, "customer@example.com", 100)
	c := a.signedIn(t, "customer@example.com")
	for _, q := range []string{"after=nope", "after=42", "after=" + strings.Repeat("a", 40)} {
		wantAPIError(t, a.get(t, c, "/api/runs?"+q), http.StatusBadRequest, store.CodeCursorInvalid)
	}
	for _, q := range []string{"limit=0", "limit=-1", "limit=ten", "limit=1.5"} {
		wantAPIError(t, a.get(t, c, "/api/runs?"+q), http.StatusBadRequest, "invalid_limit")
	}
	wantAPIError(t, a.get(t, a.client(t), "/api/runs"), http.StatusUnauthorized, "unauthorized")
}

// TestAPIListRuns_StatusOnly: a customer who lost refund_access still sees
// their runs' state, and nothing else, as on their run pages.
func TestAPIListRuns_StatusOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		cfg      handlers.Config
		wantRuns int
	}{
		{"status", handlers.Config{}, 1},
		{"none", handlers.Config{RevokedSeeNothing: true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newApp(t, tc.cfg)
			run := a.startRun(t, "customer@example.com", 100)
			if err := a.store.SetGrant(context.Background(), run.OwnerID, store.GrantRefundAccess, false); err != nil {
				t.Fatal(err)
			}
			r := a.get(t, a.signedIn(t, "customer@example.com"), "/api/runs")
			wantStatus(t, r, http.StatusOK)
			p := decode[runsPageJSON](t, r)
			if len(p.Runs) != tc.wantRuns {
				t.Fatalf("runs = %s, want %d", r.body, tc.wantRuns)
			}
			if tc.wantRuns == 1 {
				var fields map[string]any
				if err := json.Unmarshal(p.Runs[0], &fields); err != nil {
					t.Fatal(err)
				}
				if len(fields) != 2 || fields["id"] != run.ID.String() || fields["state"] != store.StateCreated {
					t.Errorf("status-only run = %s, want its id and state alone", p.Runs[0])
				}
			}
		})
	}
}

// TestAPI_BadTokenIsJSON: a program that sends a bad token reads why in
// JSON, with the bearer challenge, on every kind of API route.
func TestAPI_BadTokenIsJSON(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.startRun(t, "customer@example.com", 100)
	for _, path := range []string{"/api/runs", "/api/orders", "/api/runs/" + run.ID.String() + "/stream"} {
		for _, auth := range []string{"Bearer rfd_nope", "Bearer ", "Basic dXNlcjpwYXNz", "rfd_nope"} {
			r := a.send(t, http.DefaultClient, http.MethodGet, path, map[string]string{"Authorization": auth}, "")
			e := wantAPIError(t, r, http.StatusUnauthorized, "unauthorized")
			if !strings.Contains(e.Error.Message, "bearer token") {
				t.Errorf("%s with %q: message %q, want it to name the bearer token", path, auth, e.Error.Message)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("%s: Content-Type = %q, want JSON", path, ct)
			}
			if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer ") {
				t.Errorf("%s: WWW-Authenticate = %q, want a Bearer challenge", path, got)
			}
		}
	}
}
