package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
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
	// Made through the store alone: no call reached a provider.
	if got := doc.Find(".ledger-op .attempts").Text(); got != "none on record" || doc.Find(".ledger-call").Length() != 0 {
		t.Errorf("calls = %q, want none on record (TestSupportRun_EveryProviderCall makes some)", got)
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
		if got := strings.Join(strings.Fields(doc.Find("#coverage-pruned").Text()), " "); !strings.Contains(got, "removed narration up to seq 3") ||
			!strings.Contains(got, "no longer kept") || !strings.Contains(got, "whole from seq 4") {
			t.Errorf("coverage = %q, want the pruned boundary and where the history is whole", got)
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
			Calls     []any  `json:"calls"`
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
	if len(got.Ledger) != 1 || got.Ledger[0].Calls == nil || len(got.Ledger[0].Calls) != 0 {
		t.Errorf("ledger = %+v, want one operation with its (no) calls", got.Ledger)
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

// providerCallRow is one row of support's table of provider calls.
type providerCallRow struct{ kind, status, when, took string }

// TestSupportRun_EveryProviderCall: the provider refuses two submits, drops
// the third after committing it, and refuses two lookups before the third
// finds the refund. Support's ledger lists all six calls, failed ones too,
// each with its time, HTTP status and duration, and counts six; the
// approver's reason is on the timeline and in the audit log; "Download
// JSON" holds the same calls. The provider's own ledger has one refund.
func TestSupportRun_EveryProviderCall(t *testing.T) {
	t.Parallel()
	// The third submit's answer never comes: the executor gives up after
	// its 5 s timeout. (A connection closed early would not do: Go's
	// transport resends a POST that carries an Idempotency-Key by itself.)
	// The first refused lookup is the new run's provider check (which goes
	// on without an answer, and has no ledger row to be listed under); the
	// reconciliation's two follow.
	a := newApp(t, handlers.Config{}, withExecutor(nil, payments.Faults{Error5xxNext: 2, CommitThenDrop: true,
		LookupError5xxNext: 3}))
	run := a.startRun(t, "customer@example.com", 500)
	testkit.WaitRunState(t, a.store, run.ID, store.StateAwaitingApproval, time.Minute)
	approver := a.client(t)
	a.login(t, approver, "approver@example.com")
	wantRedirect(t, a.post(t, approver, "/runs/"+run.ID.String()+"/approve", url.Values{"reason": {"photos checked"}}), "/runs/"+run.ID.String())
	testkit.WaitRunState(t, a.store, run.ID, store.StateCompleted, time.Minute)
	if n := a.count(t, `SELECT count(*) FROM provider_refunds WHERE key IN (SELECT id::text FROM operations WHERE run_id = $1)`, run.ID); n != 1 {
		t.Fatalf("the provider's ledger holds %d refunds for the run, want 1", n)
	}

	c := a.client(t)
	a.login(t, c, "support@example.com")
	doc := a.get(t, c, "/support/runs/"+run.ID.String()).doc(t)
	var rows []providerCallRow
	doc.Find(".ledger-call").Each(func(_ int, s *goquery.Selection) {
		rows = append(rows, providerCallRow{s.AttrOr("data-kind", ""), s.AttrOr("data-status", ""),
			s.Find("time").AttrOr("datetime", ""), strings.TrimSpace(s.Find(".took").Text())})
	})
	want := []providerCallRow{{kind: "submit", status: "503"}, {kind: "submit", status: "503"}, {kind: "submit", status: "none"},
		{kind: "lookup", status: "503"}, {kind: "lookup", status: "503"}, {kind: "lookup", status: "200"}}
	if len(rows) != len(want) {
		t.Fatalf("provider calls listed = %+v, want %d", rows, len(want))
	}
	for i, r := range rows {
		if r.kind != want[i].kind || r.status != want[i].status || r.when == "" || !strings.HasSuffix(r.took, "s") {
			t.Errorf("call %d = %+v, want %s answered %s with a time and a duration", i+1, r, want[i].kind, want[i].status)
		}
	}
	if got := doc.Find(".ledger-op .attempts").Text(); got != "6" {
		t.Errorf("the ledger counts %q calls, lists %d", got, len(rows))
	}
	approval := doc.Find(`#support-timeline tr[data-type="approval.granted"]`)
	if got := approval.Text(); !strings.Contains(got, "Avery Approver (approver)") || !strings.Contains(got, "“photos checked”") {
		t.Errorf("approval row = %q, want the approver and the reason", got)
	}
	audit := a.get(t, c, "/support/audit?action="+store.AuditRunApproved).doc(t).Text()
	if !strings.Contains(audit, "Avery Approver (approver)") || !strings.Contains(audit, "“photos checked”") {
		t.Errorf("audit log lacks the approver's reason:\n%s", audit)
	}

	var export struct {
		Ledger []struct {
			Calls []struct {
				Kind       string   `json:"kind"`
				HTTPStatus *int     `json:"http_status"`
				DurationMS *float64 `json:"duration_ms"`
			} `json:"calls"`
		} `json:"ledger"`
	}
	if err := json.Unmarshal([]byte(a.get(t, c, "/support/runs/"+run.ID.String()+"/export").body), &export); err != nil {
		t.Fatal(err)
	}
	if len(export.Ledger) != 1 || len(export.Ledger[0].Calls) != len(want) {
		t.Fatalf("export ledger = %+v, want the %d calls", export.Ledger, len(want))
	}
	for i, call := range export.Ledger[0].Calls {
		status := "none"
		if call.HTTPStatus != nil {
			status = strconv.Itoa(*call.HTTPStatus)
		}
		if call.Kind != want[i].kind || status != want[i].status || call.DurationMS == nil {
			t.Errorf("exported call %d = %+v (status %s), want %s answered %s", i+1, call, status, want[i].kind, want[i].status)
		}
	}
}
