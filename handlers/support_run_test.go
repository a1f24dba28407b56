package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

// TestSupportRuns_Pages: the search shows 25 runs a page with a count, and
// links to the pages before and after that keep the query.
func TestSupportRuns_Pages(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	for range 27 {
		a.startRun(t, "customer@example.com", 1)
	}
	a.startRun(t, "customer2@example.com", 1)
	c := a.client(t)
	a.login(t, c, "support@example.com")

	page := func(t *testing.T, path string, status int) *goquery.Document {
		t.Helper()
		r := a.get(t, c, path)
		wantStatus(t, r, status)
		return r.doc(t)
	}
	first := page(t, "/support/runs?q=customer%40", http.StatusOK)
	if n := first.Find("#support-runs tbody tr").Length(); n != 25 {
		t.Errorf("page 1 rows = %d, want 25", n)
	}
	if got := first.Find(".pager p.muted").First().Text(); !strings.Contains(got, "Runs 1–25 of 27") {
		t.Errorf("count = %q, want Runs 1–25 of 27", got)
	}
	if first.Find(`.pager a[rel="prev"]`).Length() != 0 {
		t.Error("page 1 links to a previous page")
	}
	next := first.Find(`.pager a[rel="next"]`).First().AttrOr("href", "")
	if next != "/support/runs?page=2&q=customer%40" {
		t.Fatalf("next = %q, want page 2 of the same query", next)
	}
	second := page(t, next, http.StatusOK)
	if n := second.Find("#support-runs tbody tr").Length(); n != 2 {
		t.Errorf("page 2 rows = %d, want 2", n)
	}
	if got := second.Find(".pager p.muted").First().Text(); !strings.Contains(got, "Runs 26–27 of 27") {
		t.Errorf("count = %q, want Runs 26–27 of 27", got)
	}
	if second.Find(`.pager a[rel="next"]`).Length() != 0 || second.Find(`.pager a[rel="prev"]`).First().AttrOr("href", "") != "/support/runs?q=customer%40" {
		t.Error("page 2 should link back to page 1 and to no next page")
	}

	t.Run("past the end shows the last page", func(t *testing.T) {
		if n := page(t, "/support/runs?q=customer%40&page=9", http.StatusOK).Find("#support-runs tbody tr").Length(); n != 2 {
			t.Errorf("rows = %d, want the last page's 2", n)
		}
	})
	t.Run("not a page number", func(t *testing.T) {
		for _, p := range []string{"0", "-1", "two"} {
			doc := page(t, "/support/runs?page="+p, http.StatusUnprocessableEntity)
			if !strings.Contains(doc.Find("#search-error").Text(), "There is no page") {
				t.Errorf("page=%s: error = %q", p, doc.Find("#search-error").Text())
			}
		}
	})
	t.Run("a page number past any integer", func(t *testing.T) {
		page(t, "/support/runs?page=99999999999999999999", http.StatusBadRequest)
	})
}

// supportRun makes a run that went through an approver, a lost provider
// answer, verification and a confirmed refund, with narration.
func (a *app) supportRun(t *testing.T) *store.Run {
	t.Helper()
	ctx := context.Background()
	run := a.startRun(t, "customer@example.com", 500)
	if _, err := a.store.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{Text: "Looking at order. "}),
		store.EventOf(store.NarrationDelta{Text: "Asking an approver."})); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.RequestApproval(ctx, run.ID, store.ActionProposed{Amount: 500, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.Approve(ctx, run.ID, a.user(t, "approver@example.com").ID, ""); err != nil {
		t.Fatal(err)
	}
	op, err := a.store.SubmitOperation(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpReconciling, Reason: "no answer within 5s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpSucceeded, ProviderRef: "re_123"}); err != nil {
		t.Fatal(err)
	}
	return run
}

// TestSupportRun_Page: support's page of a run shows each event with date,
// time and zone, seq, class and who acted; the ledger with its calls and
// every verification step; and what is stored.
func TestSupportRun_Page(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.supportRun(t)
	c := a.client(t)
	a.login(t, c, "support@example.com")
	r := a.get(t, c, "/support/runs/"+run.ID.String())
	wantStatus(t, r, http.StatusOK)
	doc := r.doc(t)

	row := func(typ string) *goquery.Selection { return doc.Find(`#support-timeline tr[data-type="` + typ + `"]`) }
	created := row(store.EventRunCreated)
	if got := created.Find(".at").Text(); !strings.HasSuffix(got, " UTC") || len(got) != len("2006-01-02 15:04:05.000 UTC") {
		t.Errorf("time = %q, want a date, a time and the zone", got)
	}
	if got := created.Find(".seq").Text(); got != "1" {
		t.Errorf("run.created seq = %q, want 1", got)
	}
	if got := created.Find(".actor").Text(); got != "Casey Customer (customer)" {
		t.Errorf("run.created actor = %q", got)
	}
	if got := row(store.EventApprovalGranted).Find(".actor").Text(); got != "Avery Approver (approver)" {
		t.Errorf("approval actor = %q, want the approver by name", got)
	}
	if got := row(store.EventOperationSucceeded).Find(".actor").Text(); got != "the payment provider" {
		t.Errorf("succeeded actor = %q", got)
	}
	narr := row(store.EventNarrationDelta)
	if narr.Length() != 1 || narr.Find(".seq").Text() != "2–3" || narr.Find(".class").Text() != store.ClassPresentation ||
		!strings.Contains(narr.Text(), "Looking at order. Asking an approver.") {
		t.Errorf("narration row = %q, want one row for seq 2–3", narr.Text())
	}
	if got := created.Find(".class").Text(); got != store.ClassBusiness {
		t.Errorf("class = %q", got)
	}

	steps := doc.Find(".ledger-op .ledger-steps li").Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("data-type", "") })
	if want := []string{store.EventOperationSubmitted, store.EventOperationReconciling, store.EventOperationSucceeded}; strings.Join(steps, ",") != strings.Join(want, ",") {
		t.Errorf("ledger steps = %v, want %v", steps, want)
	}
	if got := doc.Find(".ledger-op .attempts").Text(); got != "2" {
		t.Errorf("calls = %q, want 2", got)
	}
	if got := doc.Find("#coverage-pruned").Text(); !strings.Contains(got, "Nothing has been pruned") {
		t.Errorf("coverage = %q", got)
	}
	if got := doc.Find("#download-json").AttrOr("href", ""); got != "/support/runs/"+run.ID.String()+"/export" {
		t.Errorf("download = %q", got)
	}

	t.Run("after the replay window", func(t *testing.T) {
		if _, err := a.db.Exec(`UPDATE run_events SET created_at = now() - interval '2 hours' WHERE run_id = $1 AND class = 'presentation'`, run.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := a.store.Prune(context.Background(), store.Retention{Presentation: time.Hour}); err != nil {
			t.Fatal(err)
		}
		doc := a.get(t, c, "/support/runs/"+run.ID.String()).doc(t)
		if got := doc.Find("#coverage-pruned").Text(); !strings.Contains(got, "Narration up to seq 3 was pruned") {
			t.Errorf("coverage = %q, want the pruned boundary", got)
		}
		if n := doc.Find(`#support-timeline tr[data-class="presentation"]`).Length(); n != 0 {
			t.Errorf("%d narration rows after pruning", n)
		}
	})
}

// TestSupportRun_Export: "Download JSON" is an attachment holding the run,
// its ledger and its stored log, for support only; everyone else gets what
// a run they may not see gets.
func TestSupportRun_Export(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.supportRun(t)
	path := "/support/runs/" + run.ID.String() + "/export"

	c := a.client(t)
	a.login(t, c, "support@example.com")
	r := a.get(t, c, path)
	wantStatus(t, r, http.StatusOK)
	if got, want := r.header.Get("Content-Disposition"), `attachment; filename="run-`+run.ID.String()+`.json"`; got != want {
		t.Errorf("Content-Disposition = %q, want %q", got, want)
	}
	if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Errorf("Content-Type = %q", r.header.Get("Content-Type"))
	}
	var got struct {
		Run struct {
			ID    uuid.UUID `json:"id"`
			State string    `json:"state"`
		} `json:"run"`
		CoveringSeq int64 `json:"covering_seq"`
		Ledger      []struct {
			Attempts  int    `json:"attempts"`
			LastError string `json:"last_error"`
		} `json:"ledger"`
		Events []store.Event `json:"events"`
	}
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatalf("not JSON: %v\n%.400s", err, r.body)
	}
	if got.Run.ID != run.ID {
		t.Errorf("run.id = %s, want %s", got.Run.ID, run.ID)
	}
	if int64(len(got.Events)) != got.CoveringSeq || got.Events[len(got.Events)-1].Seq != got.CoveringSeq {
		t.Errorf("%d events, covering seq %d: want every event up to it", len(got.Events), got.CoveringSeq)
	}
	if len(got.Ledger) != 1 || got.Ledger[0].Attempts != 2 {
		t.Errorf("ledger = %+v, want one operation with 2 calls", got.Ledger)
	}

	for _, tc := range []struct {
		email  string
		status int
	}{
		{"customer@example.com", http.StatusForbidden}, // the owner
		{"customer2@example.com", http.StatusForbidden},
		{"approver@example.com", http.StatusForbidden},
		{"admin@example.com", http.StatusNotFound}, // admins do not read runs
	} {
		t.Run(tc.email, func(t *testing.T) {
			c := a.client(t)
			a.login(t, c, tc.email)
			r := a.get(t, c, path)
			wantStatus(t, r, tc.status)
			if r.header.Get("Content-Disposition") != "" || strings.Contains(r.body, "Looking at order") || strings.Contains(r.body, `"events"`) {
				t.Errorf("refused, but the answer carries the run:\n%.400s", r.body)
			}
		})
	}
	t.Run("signed out", func(t *testing.T) {
		wantRedirect(t, a.get(t, a.client(t), path), "/login?next="+strings.ReplaceAll(path, "/", "%2F"))
	})
}
