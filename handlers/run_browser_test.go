package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// browserApp is the whole program in-process: web, executor, simulated
// provider, one Listener, over a seeded database, watched by a real
// Chromium signed in as customer@example.com.
type browserApp struct {
	*streamApp
	ctx      context.Context // the browser
	approver *store.User
	narrator *gatedNarrator
	// offline makes the stream refuse connections (503), as a network
	// outage would; streams counts stream requests.
	offline atomic.Bool
	streams atomic.Int64
}

func newBrowserApp(t *testing.T, narrator *gatedNarrator, faults payments.Faults) *browserApp {
	t.Helper()
	b := &browserApp{narrator: narrator}
	a := newApp(t, handlers.Config{Stream: stream.Config{Retry: 200 * time.Millisecond}},
		withExecutor(narrator, faults), wrapHandler(b.outage))
	b.streamApp = &streamApp{app: a, customer: a.user(t, "customer@example.com")}
	b.approver = a.user(t, "approver@example.com")
	b.ctx = browsertest.New(t)
	if err := browsertest.Login(b.ctx, a.srv.URL, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	return b
}

// outage counts the run page's stream requests and, while offline, refuses
// them.
func (b *browserApp) outage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The page streams through its browser's shared /streams (tabs.js).
		if r.URL.Path == "/streams" || strings.HasSuffix(r.URL.Path, "/events") && strings.HasPrefix(r.URL.Path, "/runs/") {
			b.streams.Add(1)
			if b.offline.Load() {
				http.Error(w, "offline", http.StatusServiceUnavailable)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// gatedNarrator speaks its words one by one while planning, and waits at
// word gateAt until the gate opens, so a test can act mid-narration.
type gatedNarrator struct {
	words  []string
	gateAt int
	gate   chan struct{}
}

func newGatedNarrator(n, gateAt int) *gatedNarrator {
	g := &gatedNarrator{gateAt: gateAt, gate: make(chan struct{})}
	for i := 1; i <= n; i++ {
		g.words = append(g.words, fmt.Sprintf("word%02d ", i))
	}
	return g
}

func (g *gatedNarrator) open() { close(g.gate) }

func (g *gatedNarrator) Narrate(ctx context.Context, f agent.Facts, emit func(string) error) error {
	if f.Stage != "planning" {
		return agent.Builtin{Words: views.Answers{}}.Narrate(ctx, f, emit)
	}
	for i, w := range g.words {
		if i == g.gateAt {
			select {
			case <-g.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := emit(w); err != nil {
			return err
		}
		// A model's pace: most words become deltas of their own.
		select {
		case <-time.After(3 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// pageState is what the run page shows.
type pageState struct {
	State       string  `json:"state"`
	Applied     int64   `json:"applied"`
	Narration   *string `json:"narration"`
	Timeline    []int64 `json:"timeline"`
	Outcome     string  `json:"outcome"`
	OutcomeText string  `json:"outcomeText"`
	Step        string  `json:"step"`
	Banner      string  `json:"banner"`
	Indicator   string  `json:"indicator"`
	StreamEnd   string  `json:"streamEnd"`
	Connect     string  `json:"connect"`
	BodyHTML    string  `json:"bodyHTML"`
	Trimmed     bool    `json:"trimmed"`
	NarrSpans   int     `json:"narrSpans"`
	StatusOnly  bool    `json:"statusOnly"`
}

const pageStateJS = `(() => {
  const q = s => document.querySelector(s);
  const banner = q('#reset-banner');
  const narr = q('#narration');
  return {
    state: q('#run-status') ? q('#run-status').dataset.state : '',
    applied: +q('#run').dataset.applied,
    narration: narr ? narr.textContent : null,
    narrSpans: narr ? narr.children.length : 0,
    timeline: [...document.querySelectorAll('#timeline li')].map(li => +li.dataset.seq),
    outcome: q('#outcome') ? q('#outcome').dataset.outcome : '',
    outcomeText: q('#outcome') ? q('#outcome').textContent : '',
    step: q('#run-progress [aria-current="step"]') ? q('#run-progress [aria-current="step"]').textContent.trim() : '',
    banner: banner && !banner.hidden ? banner.textContent.trim() : '',
    indicator: q('#stream-indicator').dataset.state,
    streamEnd: q('#stream-end') ? q('#stream-end').textContent : '',
    connect: q('#run').getAttribute('sse-connect') || '',
    // The step timer counts on by itself: the body is compared without it.
    bodyHTML: q('#run-body') ? (b => { const c = b.cloneNode(true), tm = c.querySelector('#step-timer');
      if (tm) tm.textContent = ''; return c.outerHTML; })(q('#run-body')) : '',
    trimmed: !!q('#narration-trimmed'),
    statusOnly: !!q('#status-only'),
  };
})()`

func (b *browserApp) page(t *testing.T) pageState {
	t.Helper()
	p, err := chromedp.Run(b.ctx, chromedp.Evaluate[pageState](pageStateJS))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitPage waits until the JavaScript condition holds on the page.
func (b *browserApp) waitPage(t *testing.T, what, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatalf("waiting for %s: %v\npage: %+v", what, err, b.page(t))
	}
}

func (b *browserApp) open(t *testing.T, runID uuid.UUID) {
	t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(b.srv.URL+"/runs/"+runID.String()),
		chromedp.WaitVisible(chromedp.CSS("#run-status"))); err != nil {
		t.Fatal(err)
	}
}

func (b *browserApp) waitLive(t *testing.T) {
	t.Helper()
	b.waitPage(t, "the stream to be live", `document.querySelector('#stream-indicator').dataset.state === 'live'`)
}

func (b *browserApp) waitState(t *testing.T, runID uuid.UUID, state string) {
	t.Helper()
	testkit.WaitRunState(t, b.store, runID, state, 20*time.Second)
}

func (b *browserApp) approve(t *testing.T, runID uuid.UUID) {
	t.Helper()
	b.waitState(t, runID, store.StateAwaitingApproval)
	if _, err := b.store.Approve(context.Background(), runID, b.approver.ID, ""); err != nil {
		t.Fatal(err)
	}
}

// dbState is what PostgreSQL holds about the run.
type dbState struct {
	state     string
	lastSeq   int64
	narration string // the current attempt's
	business  []int64
	outcome   string
	ops       []store.Operation
}

func (b *browserApp) stored(t *testing.T, runID uuid.UUID) dbState {
	t.Helper()
	ctx := context.Background()
	snap, err := b.store.Snapshot(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	d := dbState{state: snap.Run.State, lastSeq: snap.CoveringSeq, ops: snap.Operations}
	var texts []string
	prog := store.ProgressOf(snap)
	for _, ev := range snap.Events {
		switch {
		case ev.Type == store.EventNarrationDelta && prog.ShowsNarration(ev):
			p, _ := store.PayloadOf[store.NarrationDelta](ev)
			texts = append(texts, p.Text)
		case ev.Class == store.ClassBusiness:
			d.business = append(d.business, ev.Seq)
		}
	}
	d.narration = strings.Join(texts, "")
	d.outcome = prog.Outcome()
	return d
}

// wantPageMatchesDB waits for the finished run on the page, then compares
// every part of it with the rows in PostgreSQL.
func (b *browserApp) wantPageMatchesDB(t *testing.T, runID uuid.UUID) (pageState, dbState) {
	t.Helper()
	d := b.stored(t, runID)
	if !store.Terminal(d.state) {
		t.Fatalf("run is %s; compare only finished runs", d.state)
	}
	b.waitPage(t, "the finished run", fmt.Sprintf(
		`+document.querySelector('#run').dataset.applied === %d && document.querySelector('#stream-indicator').dataset.state === 'closed'`, d.lastSeq))
	p := b.page(t)
	if p.State != d.state {
		t.Errorf("page state = %q, database %q", p.State, d.state)
	}
	if p.Narration == nil || *p.Narration != d.narration {
		t.Errorf("page narration = %q\ndatabase narration = %q", deref(p.Narration), d.narration)
	}
	if !slices.Equal(p.Timeline, d.business) {
		t.Errorf("page timeline seqs = %v, database business events %v", p.Timeline, d.business)
	}
	if p.Outcome != d.outcome || d.outcome == "" {
		t.Errorf("page outcome = %q, database %q", p.Outcome, d.outcome)
	}
	for _, op := range d.ops {
		if op.ProviderRef.Valid && !strings.Contains(p.OutcomeText, op.ProviderRef.String) {
			t.Errorf("the outcome %q does not give the provider's reference %q", p.OutcomeText, op.ProviderRef.String)
		}
	}
	if p.StreamEnd != "The run has finished." {
		t.Errorf("stream end = %q, want it to say the run finished", p.StreamEnd)
	}
	return p, d
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

func TestBrowser_WatchRunLive(t *testing.T) {
	t.Parallel()
	g := newGatedNarrator(20, 0)
	b := newBrowserApp(t, g, payments.Faults{})
	run := b.startRun(t)
	b.open(t, run.ID)
	b.waitLive(t)
	if p := b.page(t); p.Narration == nil || *p.Narration != "" {
		t.Fatalf("narration before the agent spoke = %q, want empty", deref(p.Narration))
	}
	g.open()
	b.waitPage(t, "the approval request", `document.querySelector('#run-status').dataset.state === 'awaiting_approval'`)
	b.approve(t, run.ID)
	b.waitState(t, run.ID, store.StateCompleted)
	p, _ := b.wantPageMatchesDB(t, run.ID)
	if !strings.Contains(*p.Narration, "word01 word02") || !strings.Contains(*p.Narration, "payment provider") {
		t.Errorf("narration = %q, want the planning and the submitting narration", *p.Narration)
	}
	if p.NarrSpans < 10 {
		t.Errorf("%d narration pieces, want them to have arrived one by one", p.NarrSpans)
	}
}

func TestBrowser_StreamDroppedMidNarration(t *testing.T) {
	t.Parallel()
	g := newGatedNarrator(40, 15)
	b := newBrowserApp(t, g, payments.Faults{})
	run := b.startRun(t)
	b.open(t, run.ID)
	b.waitPage(t, "15 words", `document.querySelector('#narration').textContent.includes('word15 ')`)
	b.waitLive(t)
	// The server drops the stream; the agent goes on speaking meanwhile.
	b.conns.closeAll()
	g.open()
	b.waitPage(t, "the approval request", `document.querySelector('#run-status').dataset.state === 'awaiting_approval'`)
	b.approve(t, run.ID)
	b.waitState(t, run.ID, store.StateCompleted)
	b.wantPageMatchesDB(t, run.ID)
	if n := b.streams.Load(); n < 2 {
		t.Errorf("%d stream requests, want a reconnect after the drop", n)
	}
}

func TestBrowser_ReloadMidRun(t *testing.T) {
	t.Parallel()
	g := newGatedNarrator(30, 10)
	b := newBrowserApp(t, g, payments.Faults{})
	run := b.startRun(t)
	b.open(t, run.ID)
	b.waitPage(t, "10 words", `document.querySelector('#narration').textContent.includes('word10 ')`)
	g.open()
	if err := chromedp.Do(b.ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#run-status"))); err != nil {
		t.Fatal(err)
	}
	b.waitPage(t, "the approval request", `document.querySelector('#run-status').dataset.state === 'awaiting_approval'`)
	b.approve(t, run.ID)
	b.waitState(t, run.ID, store.StateCompleted)
	b.wantPageMatchesDB(t, run.ID)
}

// TestBrowser_ReconnectAfterSubmission: the stream drops right after the
// refund reached the provider; the page comes back with the verified result.
func TestBrowser_ReconnectAfterSubmission(t *testing.T) {
	t.Parallel()
	b := newBrowserApp(t, newGatedNarrator(5, -1), payments.Faults{HoldAfterCommit: true})
	run := b.startRun(t)
	b.open(t, run.ID)
	b.approve(t, run.ID)
	b.waitPage(t, "the submitted refund", `document.querySelector('#run-status').dataset.state === 'submitting' && !!document.querySelector('#cancel-gone')`)
	if p := b.page(t); p.Step != "Sending to the payment provider" {
		t.Errorf("a submitted refund's step reads %q, want it still sending", p.Step)
	}
	// Released only once the provider holds the committed refund: a
	// release before it arrives would let nothing go.
	testkit.WaitUntil(t, "the provider to commit the refund", 20*time.Second, func() bool {
		return b.count(t, `SELECT count(*) FROM provider_refunds WHERE key IN (SELECT id::text FROM operations WHERE run_id = $1)`, run.ID) == 1
	})
	b.conns.closeAll()
	b.sim.Release()
	b.waitState(t, run.ID, store.StateCompleted)
	_, d := b.wantPageMatchesDB(t, run.ID)
	if len(d.ops) != 1 || d.ops[0].State != store.OpSucceeded {
		t.Errorf("ledger = %+v, want one succeeded refund", d.ops)
	}
}

// TestBrowser_DuplicateDeliveryIgnored delivers events the page already
// applied again, as an at-least-once stream may: the page does not change.
func TestBrowser_DuplicateDeliveryIgnored(t *testing.T) {
	t.Parallel()
	b := newBrowserApp(t, newGatedNarrator(12, -1), payments.Faults{})
	run := b.startRun(t)
	b.waitState(t, run.ID, store.StateAwaitingApproval)
	b.open(t, run.ID)
	b.waitLive(t)
	last := b.stored(t, run.ID).lastSeq
	before := b.page(t)

	// The stream's own messages for seq 3 (narration) and the last one.
	c := b.customerClient(t)
	for _, seq := range []int64{3, last} {
		msg := b.streamApp.open(t, c, htmlStreamPath(run.ID, fmt.Sprint(seq-1)), "").next(t)
		if msg.ID != fmt.Sprint(seq) {
			t.Fatalf("got message %s, want %d", msg.ID, seq)
		}
		data, _ := json.Marshal(msg.Data)
		js := fmt.Sprintf(`document.getElementById('run')['htmx-internal-data'].sseEventSource.dispatchEvent(
			new MessageEvent('message', {data: %s, lastEventId: %q})); true`, data, msg.ID)
		if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](js)); err != nil {
			t.Fatal(err)
		}
	}
	after := b.page(t)
	if after.BodyHTML != before.BodyHTML || after.Applied != before.Applied || after.Connect != before.Connect {
		t.Errorf("the page changed when events were delivered again:\nbefore %+v\nafter  %+v", before, after)
	}
	// A new event still applies, once.
	b.approve(t, run.ID)
	b.waitState(t, run.ID, store.StateCompleted)
	b.wantPageMatchesDB(t, run.ID)
}

// TestBrowser_OfflinePastReplayWindow: the page is away while the run
// finishes and its narration is pruned; it comes back to the banner and
// the verified result, never to narration the store no longer has.
func TestBrowser_OfflinePastReplayWindow(t *testing.T) {
	t.Parallel()
	g := newGatedNarrator(20, 8)
	b := newBrowserApp(t, g, payments.Faults{})
	run := b.startRun(t)
	b.open(t, run.ID)
	b.waitPage(t, "8 words", `document.querySelector('#narration').textContent.includes('word08 ')`)
	b.waitLive(t)

	b.offline.Store(true)
	b.conns.closeAll()
	b.waitPage(t, "reconnecting", `document.querySelector('#stream-indicator').dataset.state === 'reconnecting'`)
	g.open()
	b.approve(t, run.ID)
	b.waitState(t, run.ID, store.StateCompleted)
	b.streamApp.run = run
	b.expire(t) // the replay window passes: narration is pruned
	b.offline.Store(false)

	d := b.stored(t, run.ID)
	if d.narration != "" {
		t.Fatalf("narration left after pruning: %q", d.narration)
	}
	p, _ := b.wantPageMatchesDB(t, run.ID)
	if p.Banner != "The run continued while you were offline. This is where it stands now." {
		t.Errorf("banner = %q", p.Banner)
	}
	if !p.Trimmed || strings.Contains(deref(p.Narration), "word") {
		t.Errorf("narration = %q (trimmed note %v), want none of the pruned narration", deref(p.Narration), p.Trimmed)
	}
}

// TestBrowser_ReconnectRightAfterStart: the customer submits the refund
// form, lands on the run page, and the stream drops at once; the run goes
// on regardless and the page catches up with no gap and no repeat.
func TestBrowser_ReconnectRightAfterStart(t *testing.T) {
	t.Parallel()
	g := newGatedNarrator(20, 5)
	b := newBrowserApp(t, g, payments.Faults{})
	orders, err := b.store.OrdersByCustomer(context.Background(), b.customer.ID)
	if err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(b.ctx,
		chromedp.Navigate(b.srv.URL+"/"),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#start-form input[name="order_id"][value="%d"]`, orders[0].ID))),
		chromedp.SendKeys(chromedp.CSS(fmt.Sprintf(`#start-form input[name="amount_%d"]`, orders[0].ID)), "5.00"),
		chromedp.SendKeys(chromedp.CSS(`#start-form textarea[name="reason"]`), "arrived broken"),
		chromedp.Submit(chromedp.CSS(`#start-form`)),
		chromedp.WaitVisible(chromedp.CSS("#run-status")),
	)
	if err != nil {
		t.Fatal(err)
	}
	b.conns.closeAll()
	runs, err := b.store.RunsByOwner(context.Background(), b.customer.ID, 10)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs = %v, %v; want the one the form started", runs, err)
	}
	g.open()
	b.approve(t, runs[0].ID)
	b.waitState(t, runs[0].ID, store.StateCompleted)
	b.wantPageMatchesDB(t, runs[0].ID)
}

// runText is what the run page says, as a person reads it.
func (b *browserApp) runText(t *testing.T) string {
	t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('#run').innerText`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wantFinishedPage checks the live page of a finished run: one outcome
// with these words, none left over from while it ran, none contradicting.
func (b *browserApp) wantFinishedPage(t *testing.T, outcome, words string) {
	t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-outcome="`+outcome+`"]').length +
		100 * document.querySelectorAll('[data-outcome]:not([data-outcome="`+outcome+`"])').length`))
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("outcomes on the page: %d of %s and %d others, want one %s", n%100, outcome, n/100, outcome)
	}
	text := b.runText(t)
	if !strings.Contains(text, words) {
		t.Errorf("page does not say %q:\n%s", words, text)
	}
	for _, w := range append(append([]string(nil), stillRunningWords...), contradicts[outcome]...) {
		if strings.Contains(text, w) {
			t.Errorf("the %s run's page says %q:\n%s", outcome, w, text)
		}
	}
	for _, id := range []string{"#cancel", "#approve", "#cancel-note", "#cancel-gone"} {
		if ok, _ := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`!!document.querySelector('`+id+`')`)); ok {
			t.Errorf("the finished run's page has %s", id)
		}
	}
}

func (b *browserApp) reload(t *testing.T) {
	t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#run-status"))); err != nil {
		t.Fatal(err)
	}
}

// TestBrowser_CancelConfirmThenOutcome: the customer's cancel asks
// for confirmation, answers next to the button, and once the run has
// ended the page holds the outcome only, live and after a reload.
func TestBrowser_CancelConfirmThenOutcome(t *testing.T) {
	t.Parallel()
	g := newGatedNarrator(6, 3) // holds the run in planning until the gate opens
	b := newBrowserApp(t, g, payments.Faults{})
	run := b.startRun(t)
	b.open(t, run.ID)
	b.waitLive(t)
	b.waitPage(t, "the progress line at checking", `document.querySelector('#run-progress [aria-current="step"]').textContent.trim() === 'Checking the order…'`)
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS("#cancel"))); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = $2`, run.ID, store.EventCancelRequested); n != 0 {
		t.Fatalf("opening the cancel recorded %d cancels, want it to ask first", n)
	}
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS("#cancel-confirm"))); err != nil {
		t.Fatal(err)
	}
	b.waitPage(t, "the answer next to the button and the pending cancel", `document.querySelector('#decision-result').textContent === 'You asked to cancel this run.' &&
		(document.querySelector('#cancel-note') || {}).textContent === 'Cancel requested by you: the agent stops before any money moves.' &&
		!document.querySelector('#cancel')`)
	g.open()
	b.waitState(t, run.ID, store.StateCanceled)
	b.waitPage(t, "the outcome", `document.querySelector('#stream-indicator').dataset.state === 'closed' && !!document.querySelector('#outcome')`)
	b.wantFinishedPage(t, store.OutcomeCanceled, "Canceled by you.")
	if got := b.page(t); strings.TrimSpace(got.BodyHTML) == "" {
		t.Fatal("no run body")
	}
	if s, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('#decision-result').textContent`)); s != "" {
		t.Errorf("the answer %q stayed under the outcome", s)
	}
	b.reload(t)
	b.wantFinishedPage(t, store.OutcomeCanceled, "Canceled by you.")
}

// TestBrowser_CanceledByApproverLive: the customer watches while an
// approver cancels; the page says so in the customer's words as the
// stream delivers it, and again after a reload.
func TestBrowser_CanceledByApproverLive(t *testing.T) {
	t.Parallel()
	b := newBrowserApp(t, newGatedNarrator(5, -1), payments.Faults{})
	run := b.startRun(t)
	b.open(t, run.ID)
	b.waitLive(t)
	b.waitPage(t, "the approval request", `document.querySelector('#run-status').dataset.state === 'awaiting_approval' &&
		document.querySelector('#run-progress [aria-current="step"]').textContent.trim() === 'Waiting for an approver'`)
	b.waitState(t, run.ID, store.StateAwaitingApproval)
	if _, err := b.store.RequestCancelBecause(context.Background(), run.ID, b.approver.ID, "customer called"); err != nil {
		t.Fatal(err)
	}
	b.waitState(t, run.ID, store.StateCanceled)
	b.wantPageMatchesDB(t, run.ID)
	b.wantFinishedPage(t, store.OutcomeCanceled, "Canceled by an approver.")
	if text := b.runText(t); !strings.Contains(text, "Reason given: “customer called”") || !strings.Contains(text, "Cancel requested by an approver") {
		t.Errorf("the customer does not read who canceled and why:\n%s", text)
	}
	b.reload(t)
	b.wantFinishedPage(t, store.OutcomeCanceled, "Canceled by an approver.")
}

// TestBrowser_WorkerDiesMidNarration: the worker dies while it narrates;
// another takes the run over when the lease runs out and narrates the step
// again. The live page, the server-rendered page and the reloaded page all
// show the new attempt's narration exactly once, with the restart noted.
func TestBrowser_WorkerDiesMidNarration(t *testing.T) {
	t.Parallel()
	b := &browserApp{}
	a := newApp(t, handlers.Config{Stream: stream.Config{Retry: 200 * time.Millisecond}}, withListener(), wrapHandler(b.outage))
	b.streamApp = &streamApp{app: a, customer: a.user(t, "customer@example.com")}
	b.ctx = browsertest.New(t)
	if err := browsertest.Login(b.ctx, a.srv.URL, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	provider := testkit.StartProvider(t, a.db, payments.Faults{}, 10*time.Second)
	// The doomed worker has a pool of its own: closing it cuts the worker
	// off from the database as a killed process is, with no release.
	pool, err := store.Open(context.Background(), a.store.URL(), store.WithAnswers(views.Answers{}))
	if err != nil {
		t.Fatal(err)
	}
	testkit.StartExecutor(t, pool, nil, provider.Client, &testkit.ChattyNarrator{}, agent.Config{WorkerID: "doomed", Concurrency: 1, ChunkEvery: time.Millisecond})
	run := b.startRun(t)
	b.open(t, run.ID)
	b.waitPage(t, "the doomed worker's words", `document.querySelector('#narration').textContent.includes('old old ')`)
	pool.Close()

	testkit.StartExecutor(t, a.store, nil, provider.Client, testkit.FreshNarrator{}, agent.Config{WorkerID: "survivor", ChunkEvery: time.Millisecond})
	b.waitState(t, run.ID, store.StateAwaitingApproval)
	wantFresh := func(where string) {
		t.Helper()
		b.waitPage(t, where+": the approval request", `document.querySelector('#run-status').dataset.state === 'awaiting_approval'`)
		p := b.page(t)
		if deref(p.Narration) != testkit.FreshWords {
			t.Errorf("%s: narration = %q, want %q once", where, deref(p.Narration), testkit.FreshWords)
		}
		note, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(n => n.hidden ? '' : n.textContent)(document.querySelector('#narration-restarted'))`))
		if err != nil || note != "The agent restarted this step." {
			t.Errorf("%s: restart note = %q (%v)", where, note, err)
		}
	}
	wantFresh("live")
	if d := b.stored(t, run.ID); d.narration != testkit.FreshWords {
		t.Errorf("the current attempt's narration in the database = %q", d.narration)
	}
	doc := a.get(t, b.customerClient(t), "/runs/"+run.ID.String()).doc(t)
	if got := doc.Find("#narration").Text(); got != testkit.FreshWords {
		t.Errorf("server-rendered narration = %q, want %q", got, testkit.FreshWords)
	}
	b.reload(t)
	wantFresh("reloaded")
}

// TestBrowser_StepTimerCountsInTheBrowser: while the run waits for an
// approver, the page says for how long, counting from the step's start as
// the server recorded it, on its own: no event arrives, no request is made.
func TestBrowser_StepTimerCountsInTheBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowserApp(t, newGatedNarrator(2, -1), payments.Faults{})
	run := b.startRun(t)
	b.waitState(t, run.ID, store.StateAwaitingApproval)
	b.open(t, run.ID)
	b.waitLive(t)
	var asked time.Time
	if err := b.db.GetContext(context.Background(), &asked, `SELECT created_at FROM run_events WHERE run_id = $1 AND type = $2`,
		run.ID, store.EventApprovalRequested); err != nil {
		t.Fatal(err)
	}
	type timer struct {
		Since   string `json:"since"`
		Text    string `json:"text"`
		Applied int64  `json:"applied"`
		Next    string `json:"next"`
	}
	read := func() timer {
		t.Helper()
		got, err := chromedp.Run(b.ctx, chromedp.Evaluate[timer](`(() => { const el = document.querySelector('#step-timer');
			return {since: el ? el.dataset.since : '', text: el ? el.textContent : '', applied: +document.querySelector('#run').dataset.applied,
				next: (document.querySelector('#next-step') || {}).textContent || ''}; })()`))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first, streams := read(), b.streams.Load()
	if first.Since != strconv.FormatInt(asked.UnixMilli(), 10) {
		t.Errorf("timer counts from %q, want approval.requested's %d", first.Since, asked.UnixMilli())
	}
	if !strings.HasPrefix(first.Next, "Next: an approver approves or cancels it.") {
		t.Errorf("next step = %q, want what happens next", first.Next)
	}
	b.waitPage(t, "the timer to move on", `document.querySelector('#step-timer').textContent !== `+strconv.Quote(first.Text))
	if now := read(); now.Applied != first.Applied || b.streams.Load() != streams {
		t.Errorf("the timer moved with events or requests: applied %d → %d, stream requests %d → %d",
			first.Applied, now.Applied, streams, b.streams.Load())
	}
}
