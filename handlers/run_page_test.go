package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

func TestRunPage(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	c := a.customerClient(t)
	a.narrate(t, 1, 3) // seq 2..4
	if _, err := a.store.RequestCancel(context.Background(), a.run.ID, a.customer.ID); err != nil {
		t.Fatal(err)
	}
	r := a.get(t, c, "/runs/"+a.run.ID.String())
	wantStatus(t, r, http.StatusOK)
	doc := r.doc(t)
	run := doc.Find("#run")
	if got, _ := run.Attr("data-covering-seq"); got != "5" {
		t.Errorf("data-covering-seq = %q, want 5", got)
	}
	if got, _ := run.Attr("sse-connect"); got != "/runs/"+a.run.ID.String()+"/events?after=5" {
		t.Errorf("sse-connect = %q, want the stream after the covering seq", got)
	}
	if got, _ := run.Attr("sse-close"); got != "close" {
		t.Errorf("sse-close = %q, want close", got)
	}
	if got := doc.Find("#narration").Text(); got != "w1 w2 w3 " {
		t.Errorf("narration = %q, want the stored deltas in order", got)
	}
	if got := doc.Find("#timeline li").Length(); got != 2 {
		t.Errorf("timeline has %d items, want 2 (run.created, cancel.requested)", got)
	}
	if doc.Find("#cancel-note").Length() != 1 || doc.Find("#cancel").Length() != 0 {
		t.Error("a run with a cancel request should say so and offer no second cancel")
	}
	if doc.Find("#decision-result").Length() != 1 {
		t.Error("no #decision-result target for the decision forms")
	}

	t.Run("status only", func(t *testing.T) {
		if err := a.store.SetGrant(context.Background(), a.customer.ID, store.GrantRefundAccess, false); err != nil {
			t.Fatal(err)
		}
		defer a.store.SetGrant(context.Background(), a.customer.ID, store.GrantRefundAccess, true)
		doc := a.get(t, c, "/runs/"+a.run.ID.String()).doc(t)
		if doc.Find("#narration").Length() != 0 || doc.Find("#timeline").Length() != 0 || strings.Contains(doc.Text(), "w1") {
			t.Error("a status-only viewer sees narration or the timeline")
		}
		if doc.Find("#run-status").Length() != 1 {
			t.Error("no status panel")
		}
	})
	t.Run("approver sees the approve button while it waits", func(t *testing.T) {
		b := a.startRun(t)
		if _, err := a.store.RequestApproval(context.Background(), b.ID, proposalFor(b)); err != nil {
			t.Fatal(err)
		}
		ap := a.client(t)
		a.login(t, ap, "approver@example.com")
		doc := a.get(t, ap, "/runs/"+b.ID.String()).doc(t)
		if got, _ := doc.Find(`#run-actions form[action$="/approve"]`).Attr("method"); got != "post" {
			t.Errorf("approve form method = %q, want post", got)
		}
		if doc.Find("#approve").Length() != 1 {
			t.Error("no approve button")
		}
	})
	t.Run("finished run: no stream", func(t *testing.T) { checkFinishedRunPage(t, a, c) })
	t.Run("someone else's run is 404", func(t *testing.T) {
		other := a.client(t)
		a.login(t, other, "customer2@example.com")
		wantStatus(t, a.get(t, other, "/runs/"+a.run.ID.String()), http.StatusNotFound)
	})
}

// checkFinishedRunPage: a finished run's page opens no stream, shows its
// outcome and says the run has finished, as the page that watched it end.
func checkFinishedRunPage(t *testing.T, a *streamApp, c *http.Client) {
	t.Helper()
	if _, err := a.store.FinishRun(context.Background(), a.run.ID, store.StateCanceled, store.Say("Canceled as requested.")); err != nil {
		t.Fatal(err)
	}
	doc := a.get(t, c, "/runs/"+a.run.ID.String()).doc(t)
	if _, ok := doc.Find("#run").Attr("sse-connect"); ok {
		t.Error("a finished run's page still opens a stream")
	}
	if got, _ := doc.Find("#outcome").Attr("data-outcome"); got != store.OutcomeCanceled {
		t.Errorf("outcome = %q, want canceled", got)
	}
	if got := doc.Find("#stream-end").Text(); got != "The run has finished." {
		t.Errorf("stream end = %q, want it to say the run finished on a fresh page", got)
	}
}

func TestEventsPage(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	c := a.customerClient(t)
	a.narrate(t, 1, 4) // seq 2..5
	path := "/api/runs/" + a.run.ID.String() + "/events"
	get := func(t *testing.T, query string, status int) (eventsPage, map[string]json.RawMessage) {
		t.Helper()
		return getEventsPage(t, a.app, c, path+query, status)
	}
	t.Run("pages", func(t *testing.T) {
		p, _ := get(t, "?after=1&limit=3", http.StatusOK)
		if len(p.Events) != 3 || p.Events[0].Seq != 2 || p.Next != 4 || !p.More {
			t.Errorf("page = %+v, want seq 2..4, next 4, more", p)
		}
		p, _ = get(t, "?after=4", http.StatusOK)
		if len(p.Events) != 1 || p.Events[0].Seq != 5 || p.Next != 5 || p.More {
			t.Errorf("page = %+v, want seq 5 only", p)
		}
		if p, _ = get(t, "?after=5", http.StatusOK); len(p.Events) != 0 || p.Next != 5 {
			t.Errorf("page = %+v, want empty at the end", p)
		}
	})
	for _, query := range []string{"?after=x", "?after=-1", "?after=1.5"} {
		t.Run("malformed "+query, func(t *testing.T) {
			r := a.get(t, c, path+query)
			wantAPIError(t, r, http.StatusBadRequest, store.CodeCursorInvalid)
		})
	}
	for _, tc := range []struct{ name, query, code string }{
		{"future", "?after=6", store.CodeCursorInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, raw := get(t, tc.query, http.StatusGone)
			var e struct{ Code string }
			json.Unmarshal(raw["error"], &e)
			if e.Code != tc.code || string(raw["covering_seq"]) != "5" || raw["run"] == nil || raw["operations"] == nil {
				t.Errorf("410 body = %v, want error %s and the snapshot", raw, tc.code)
			}
		})
	}
	t.Run("expired", func(t *testing.T) {
		a.expire(t)
		checkEventsExpired(t, a, get)
	})
	t.Run("status only: 403", func(t *testing.T) {
		if err := a.store.SetGrant(context.Background(), a.customer.ID, store.GrantRefundAccess, false); err != nil {
			t.Fatal(err)
		}
		defer a.store.SetGrant(context.Background(), a.customer.ID, store.GrantRefundAccess, true)
		wantStatus(t, a.get(t, c, path+"?after=5"), http.StatusForbidden)
	})
	t.Run("someone else's run: 404", func(t *testing.T) {
		other := a.client(t)
		a.login(t, other, "customer2@example.com")
		wantStatus(t, a.get(t, other, path+"?after="+strconv.Itoa(0)), http.StatusNotFound)
	})
}

// eventsPage is a page of GET /api/runs/{id}/events.
type eventsPage struct {
	After  int64         `json:"after"`
	Next   int64         `json:"next"`
	More   bool          `json:"more"`
	Events []store.Event `json:"events"`
}

// getEventsPage gets path as c, wants status, and returns the body both as
// a page and as its raw fields.
func getEventsPage(t *testing.T, a *app, c *http.Client, path string, status int) (eventsPage, map[string]json.RawMessage) {
	t.Helper()
	r := a.get(t, c, path)
	wantStatus(t, r, status)
	var p eventsPage
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal([]byte(r.body), &raw)
	return p, raw
}

// checkEventsExpired: once a's run's log has expired up to seq 5, a page
// after seq 1 is a 410 carrying the snapshot and cursor_expired, and a page
// after the covering seq is an empty page.
func checkEventsExpired(t *testing.T, a *streamApp, get func(t *testing.T, query string, status int) (eventsPage, map[string]json.RawMessage)) {
	t.Helper()
	_, raw := get(t, "?after=1", http.StatusGone)
	var snap struct {
		Run struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"run"`
		CoveringSeq  int64           `json:"covering_seq"`
		ReplayFloor  int64           `json:"replay_floor"`
		Operations   []any           `json:"operations"`
		FinalMessage *string         `json:"final_message"`
		Error        json.RawMessage `json:"error"`
	}
	b, _ := json.Marshal(raw)
	json.Unmarshal(b, &snap)
	if snap.Run.ID != a.run.ID.String() || snap.Run.State != store.StateCreated || snap.CoveringSeq != 5 || snap.ReplayFloor != 5 ||
		!strings.Contains(string(snap.Error), store.CodeCursorExpired) {
		t.Errorf("410 body = %s, want the snapshot (covering 5, floor 5) and cursor_expired", b)
	}
	if p, _ := get(t, "?after=5", http.StatusOK); p.Next != 5 {
		t.Errorf("after the covering seq: %+v, want an empty page", p)
	}
}

// TestRunPage_LongNarrationShowsTheLatest: a run with more narration than
// the page shows renders only the latest pieces, says how many earlier
// ones are kept, and links to a page with all of them.
func TestRunPage_LongNarrationShowsTheLatest(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{})
	c := a.customerClient(t)
	const extra = 7
	a.narrate(t, 1, views.NarrationShown+extra) // seq 2 …
	doc := a.get(t, c, "/runs/"+a.run.ID.String()).doc(t)
	chunks := doc.Find("#narration span")
	if got := chunks.Length(); got != views.NarrationShown {
		t.Errorf("the page shows %d pieces of narration, want the latest %d", got, views.NarrationShown)
	}
	if got, _ := chunks.First().Attr("data-seq"); got != strconv.Itoa(2+extra) {
		t.Errorf("the first piece shown is seq %s, want %d (the earliest of the latest)", got, 2+extra)
	}
	note := doc.Find("#narration-earlier").Text()
	if !strings.Contains(note, strconv.Itoa(extra)+" earlier ones are kept") {
		t.Errorf("the note says %q, want how many earlier pieces are kept", note)
	}
	href, _ := doc.Find("#narration-earlier a").Attr("href")
	if want := views.AllNarrationURL(a.run.ID); href != want {
		t.Fatalf("the link goes to %q, want %q", href, want)
	}
	all := a.get(t, c, href).doc(t)
	if got := all.Find("#narration span").Length(); got != views.NarrationShown+extra {
		t.Errorf("following the link shows %d pieces, want all %d", got, views.NarrationShown+extra)
	}
	if all.Find("#narration-earlier").Length() != 0 {
		t.Error("the page with all narration still says some is not shown")
	}
}
