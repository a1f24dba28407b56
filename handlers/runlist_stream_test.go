package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/views"
)

// runListURL is the sse-connect URL of the run list on the home page c sees.
func (a *app) runListURL(t *testing.T, c *http.Client) string {
	t.Helper()
	r := a.get(t, c, "/")
	wantStatus(t, r, http.StatusOK)
	u, ok := r.doc(t).Find("#runs").Attr("sse-connect")
	if !ok {
		t.Fatalf("the home page has no live run list:\n%s", r.body)
	}
	return u
}

// TestRunListStream_Live: the customer's home list follows their runs
// without polling: a run whose state moves has its row replaced, with the
// list's new version as the id; a run started elsewhere joins the list
// (by the re-check, which no notification needs).
func TestRunListStream_Live(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{Stream: stream.Config{Recheck: 300 * time.Millisecond}}, withListener())
	run := a.queued(t, "customer@example.com", 100)
	sa := &streamApp{app: a}
	c := a.signedIn(t, "customer@example.com")
	url := a.runListURL(t, c)
	s := sa.open(t, c, url, "")

	approver := a.signedIn(t, "approver@example.com")
	wantStatus(t, a.decide(t, approver, "/runs/"+run.ID.String(), "approve", map[string]string{"HX-Request": "true"}), http.StatusOK)
	// The list's version moves with every event of its runs; an event that
	// moves no row's state sends the new id alone (nothing to swap).
	ev := s.next(t)
	for ev.Event == "" && ev.ID != "" && ev.Data == "" {
		ev = s.next(t)
	}
	row := `id="` + views.RunRowID(run.ID) + `"`
	if ev.Event != "" || ev.ID == "" || !strings.Contains(ev.Data, row) || !strings.Contains(ev.Data, `hx-swap-oob="true"`) ||
		strings.Contains(ev.Data, `data-state="awaiting_approval"`) {
		t.Fatalf("after the approval got %+v, want the run's row, moved on, swapped in place", ev)
	}

	other := a.startRun(t, "customer@example.com", 100)
	for {
		ev = s.next(t)
		if ev.Event == "reset" {
			break
		}
	}
	if !strings.Contains(ev.Data, `id="runs-body" hx-swap-oob="true"`) || !strings.Contains(ev.Data, views.RunRowID(other.ID)) ||
		!strings.Contains(ev.Data, views.RunRowID(run.ID)) {
		t.Fatalf("after a run started elsewhere got %+v, want the whole list with both runs", ev)
	}
}

// TestRunListStream_Cursor: the page's version resumes quietly; any other
// cursor gets the list as it is now.
func TestRunListStream_Cursor(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{}, withListener())
	run := a.queued(t, "customer@example.com", 100)
	sa := &streamApp{app: a}
	c := a.signedIn(t, "customer@example.com")
	url := a.runListURL(t, c)
	for _, tc := range []struct{ name, path, lastEventID string }{
		{"behind", "/runs/events?after=0", ""},
		{"future", "/runs/events?after=999999", ""},
		{"malformed", "/runs/events", "x1"},
		{"last-event-id wins", url, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := sa.open(t, c, tc.path, tc.lastEventID).next(t)
			if ev.Event != "reset" || ev.ID != strings.TrimPrefix(url, "/runs/events?after=") || !strings.Contains(ev.Data, views.RunRowID(run.ID)) {
				t.Errorf("got %+v, want a reset to the page's version with the run's row", ev)
			}
		})
	}
	t.Run("current", func(t *testing.T) {
		s := sa.open(t, c, url, "")
		if _, err := a.store.RequestCancel(context.Background(), run.ID, run.OwnerID); err != nil {
			t.Fatal(err)
		}
		// The first message is the cancel's (no row's state moved yet: it
		// says nothing), not a reset of what was shown.
		if ev := s.next(t); ev.Event != "" || ev.ID == strings.TrimPrefix(url, "/runs/events?after=") || strings.Contains(ev.Data, "run-row-") {
			t.Errorf("got %+v, want only the new version after the page's", ev)
		}
	})
}

// TestRunListStream_OnlyCustomers: the list is a customer's; anyone else,
// and a customer who logs out while watching, gets the close event.
func TestRunListStream_OnlyCustomers(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{}, withListener())
	a.queued(t, "customer@example.com", 100)
	sa := &streamApp{app: a}
	for _, tc := range []struct {
		name string
		c    *http.Client
		want string
	}{
		{"signed out", a.client(t), "Your session has ended"},
		{"approver", a.signedIn(t, "approver@example.com"), "it is for customers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sa.open(t, tc.c, "/runs/events?after=0", "")
			if ev := s.next(t); ev.Event != "close" || !strings.Contains(ev.Data, tc.want) || strings.Contains(ev.Data, "run-row-") {
				t.Errorf("got %+v, want only a close event saying %q", ev, tc.want)
			}
			s.wantEnd(t)
		})
	}
	t.Run("logged out while watching", func(t *testing.T) {
		c := a.signedIn(t, "customer@example.com")
		s := sa.open(t, c, a.runListURL(t, c), "")
		wantRedirect(t, a.post(t, c, "/logout", nil), "/login")
		if ev := s.next(t); ev.Event != "close" || !strings.Contains(ev.Data, "Your session has ended") {
			t.Errorf("got %+v, want the close event", ev)
		}
		s.wantEnd(t)
	})
}

// TestRunListStream_LeavesWhenTheClientGoes: a list's stream gives its
// place under the caps back as soon as its client goes.
func TestRunListStream_LeavesWhenTheClientGoes(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{Stream: stream.Config{MaxPerUser: 1}}, withListener())
	sa := &streamApp{app: a}
	run := a.queued(t, "customer@example.com", 100)
	c := a.signedIn(t, "customer@example.com")
	for i := range 3 {
		s := sa.open(t, c, "/runs/events?after=0", "")
		// A stream over the cap would be told it is busy; each one opens
		// (with the list: a reset) because the one before left.
		if ev := s.next(t); ev.Event != "reset" || !strings.Contains(ev.Data, views.RunRowID(run.ID)) {
			t.Fatalf("stream %d refused: the one before still holds its place: %+v", i+1, ev)
		}
		s.cancel()
	}
}
