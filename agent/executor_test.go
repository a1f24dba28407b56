package agent_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
	"github.com/refundd/refundd/views"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// env is a database, a simulated provider on loopback, a customer with an
// order, and an approver.
type env struct {
	t        *testing.T
	s        *store.Store
	db       *sqlx.DB // the test's own pool, for reading rows
	sim      *payments.Sim
	client   *payments.Client
	customer *store.User
	approver *store.User
	order    *store.Order
}

func newEnv(t *testing.T, faults payments.Faults) *env {
	t.Helper()
	s := storetest.MustOpen(t)
	db := storetest.DB(t, s)
	p := testkit.StartProvider(t, db, faults, 10*time.Second)
	who := storetest.MustSeedParties(t, s, 1_000_000)
	return &env{t: t, s: s, db: db, sim: p.Sim, client: p.Client, customer: who.Customer, approver: who.Approver, order: who.Order}
}

// executor starts a worker with test-speed settings (and provider calls
// that time out after 2 s unless cfg says otherwise); it is stopped at the
// end of the test.
func (e *env) executor(cfg agent.Config, narrator agent.Narrator) *agent.Executor {
	e.t.Helper()
	cfg.ProviderTimeout = cmp.Or(cfg.ProviderTimeout, 2*time.Second)
	return testkit.StartExecutor(e.t, e.s, nil, e.client, narrator, cfg)
}

func (e *env) start(amount int64) *store.Run {
	e.t.Helper()
	r, _, err := e.s.StartRun(context.Background(), store.StartRequest{OwnerID: e.customer.ID,
		ClientRequestID: uuid.NewString(), OrderID: e.order.ID, Amount: amount, Reason: "arrived broken"})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// waitState waits until the run is in state, failing after 20 seconds.
func (e *env) waitState(runID uuid.UUID, state string) *store.Run {
	e.t.Helper()
	return testkit.WaitRunState(e.t, e.s, runID, state, 20*time.Second)
}

func (e *env) types(runID uuid.UUID) []string {
	e.t.Helper()
	var types []string
	if err := e.db.Select(&types, `SELECT type FROM run_events WHERE run_id = $1 AND class = 'business' ORDER BY seq`, runID); err != nil {
		e.t.Fatal(err)
	}
	return types
}

func (e *env) ledger() []payments.Receipt {
	e.t.Helper()
	l, err := e.client.Ledger(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

func (e *env) verify() {
	e.t.Helper()
	problems, err := e.s.Verify(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	if len(problems) > 0 {
		e.t.Errorf("verify: %s", strings.Join(problems, "\n"))
	}
}

// viewerWords are words that fit one reader only: the customer (asked
// to do something), or whoever canceled. A run's final message and
// narration are read by the customer and by staff alike, and say who
// acted nowhere.
var viewerWords = regexp.MustCompile(`(?i)\byour?\b|as requested|\bplease\b`)

// wantWordsForEveryReader checks the run's final message and narration
// against viewerWords.
func (e *env) wantWordsForEveryReader(runID uuid.UUID) {
	e.t.Helper()
	snap, err := e.s.Snapshot(context.Background(), runID)
	if err != nil {
		e.t.Fatal(err)
	}
	texts := []string{snap.FinalMessage.Body}
	for _, ev := range snap.Events {
		if p, err := store.PayloadOf[store.NarrationDelta](ev); err == nil {
			texts = append(texts, p.Text)
		}
	}
	if w := viewerWords.FindString(strings.Join(texts, " ")); w != "" {
		e.t.Errorf("the run's words say %q, which fits one reader only: %q", w, texts)
	}
}

func TestExecutor_HappyPathWithApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	e.executor(agent.Config{}, nil)
	run := e.start(4000)
	e.waitState(run.ID, store.StateAwaitingApproval)
	if got := len(e.ledger()); got != 0 {
		t.Fatalf("provider ledger has %d refunds before approval, want 0", got)
	}
	if _, err := e.s.Approve(context.Background(), run.ID, e.approver.ID, ""); err != nil {
		t.Fatal(err)
	}
	e.waitState(run.ID, store.StateCompleted)

	ledger := e.ledger()
	if len(ledger) != 1 {
		t.Fatalf("provider ledger = %d refunds, want 1", len(ledger))
	}
	snap, err := e.s.Snapshot(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	op := snap.Operations[0]
	if ledger[0].Key != op.ID.String() || ledger[0].Amount != 4000 || op.ProviderRef.String != ledger[0].Ref {
		t.Errorf("ledger %+v does not match operation %s (ref %q)", ledger[0], op.ID, op.ProviderRef.String)
	}
	if !strings.Contains(snap.FinalMessage.Body, ledger[0].Ref) {
		t.Errorf("final message %q does not name the provider reference %s", snap.FinalMessage.Body, ledger[0].Ref)
	}
	e.wantWordsForEveryReader(run.ID)
	want := "run.created,run.planning,action.proposed,approval.requested,approval.granted," +
		"operation.submitted,operation.succeeded,message.final,run.completed"
	if got := strings.Join(e.types(run.ID), ","); got != want {
		t.Errorf("business events:\n got %s\nwant %s", got, want)
	}
	var narration int
	if err := e.db.Get(&narration, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'narration.delta'`, run.ID); err != nil {
		t.Fatal(err)
	}
	if narration == 0 {
		t.Error("no narration was appended")
	}
	e.verify()
}

// watchNarrator records how often each run is narrated and fails if two
// workers narrate one run at the same time.
type watchNarrator struct {
	t      *testing.T
	mu     sync.Mutex
	active map[string]bool
	calls  map[string]int
}

func (w *watchNarrator) Narrate(ctx context.Context, f agent.Facts, emit func(string) error) error {
	key := fmt.Sprintf("%d/%s", f.OrderID, f.Stage)
	if f.Stage == "submitting" {
		key = f.Amount + "/submitting"
	}
	w.mu.Lock()
	if w.active[key] {
		w.t.Errorf("%s narrated by two workers at once", key)
	}
	w.active[key] = true
	w.calls[key]++
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.active[key] = false
		w.mu.Unlock()
	}()
	return agent.Builtin{Delay: time.Millisecond, Words: views.Answers{}}.Narrate(ctx, f, emit)
}

func TestExecutor_TwoWorkersManyRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	ctx := context.Background()
	w := &watchNarrator{t: t, active: map[string]bool{}, calls: map[string]int{}}
	// No approval needed: the runs go straight through, and both workers
	// compete for them.
	cfg := agent.Config{ApprovalThreshold: 1 << 40, Concurrency: 3}
	cfg.WorkerID = "w1"
	e.executor(cfg, w)
	cfg.WorkerID = "w2"
	e.executor(cfg, w)
	const n = 30
	var runs []uuid.UUID
	for i := range n {
		// One order per run, so the narrator can tell runs apart.
		o, err := e.s.CreateOrder(ctx, e.customer.ID, fmt.Sprintf("item %d", i), 1000, "EUR")
		if err != nil {
			t.Fatal(err)
		}
		r, _, err := e.s.StartRun(ctx, store.StartRequest{OwnerID: e.customer.ID, ClientRequestID: uuid.NewString(),
			OrderID: o.ID, Amount: int64(100 + i), Reason: "x"})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r.ID)
	}
	for _, id := range runs {
		e.waitState(id, store.StateCompleted)
	}
	if got := len(e.ledger()); got != n {
		t.Errorf("provider ledger = %d refunds, want %d", got, n)
	}
	var dup []string
	if err := e.db.Select(&dup, `SELECT run_id::text || ' ' || type FROM run_events WHERE class = 'business'
        GROUP BY run_id, type HAVING count(*) > 1`); err != nil {
		t.Fatal(err)
	}
	if len(dup) > 0 {
		t.Errorf("business events logged twice: %v", dup)
	}
	w.mu.Lock()
	for k, c := range w.calls {
		if c != 1 {
			t.Errorf("%s narrated %d times, want 1", k, c)
		}
	}
	w.mu.Unlock()
	// A worker gives its lease up just after it commits the run's end.
	var workers []string
	testkit.WaitUntil(t, "the workers to give up their leases after completion", 5*time.Second, func() bool {
		workers = nil
		if err := e.db.Select(&workers, `SELECT DISTINCT lease_owner FROM runs WHERE lease_owner IS NOT NULL`); err != nil {
			t.Fatal(err)
		}
		return len(workers) == 0
	})
	e.verify()
}

func TestExecutor_CancelBeforeProviderCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	e.executor(agent.Config{}, nil)
	run := e.start(500)
	e.waitState(run.ID, store.StateAwaitingApproval)
	if _, err := e.s.RequestCancel(context.Background(), run.ID, e.customer.ID); err != nil {
		t.Fatal(err)
	}
	e.waitState(run.ID, store.StateCanceled)
	if got := len(e.ledger()); got != 0 {
		t.Errorf("provider ledger = %d refunds, want 0", got)
	}
	if got, want := strings.Join(e.types(run.ID), ","), "run.created,run.planning,action.proposed,approval.requested,"+
		"cancel.requested,message.final,run.canceled"; got != want {
		t.Errorf("business events:\n got %s\nwant %s", got, want)
	}
	e.wantWordsForEveryReader(run.ID)
	e.verify()
}

func TestExecutor_CancelAfterProviderCommitIsTooLate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{HoldAfterCommit: true})
	e.executor(agent.Config{ProviderTimeout: 20 * time.Second}, nil)
	ctx := context.Background()
	run := e.start(700)
	e.waitState(run.ID, store.StateAwaitingApproval)
	if _, err := e.s.Approve(ctx, run.ID, e.approver.ID, ""); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the provider to commit the refund", 20*time.Second, func() bool { return len(e.ledger()) == 1 })
	if _, err := e.s.RequestCancel(ctx, run.ID, e.customer.ID); err != nil {
		t.Fatal(err)
	}
	e.sim.Release()
	r := e.waitState(run.ID, store.StateCompleted)
	types := strings.Join(e.types(r.ID), ",")
	if !strings.Contains(types, "cancel.requested") || !strings.Contains(types, "operation.succeeded,cancel.too_late,message.final,run.completed") {
		t.Errorf("business events = %s, want cancel.requested ... operation.succeeded,cancel.too_late,message.final,run.completed", types)
	}
	if got := len(e.ledger()); got != 1 {
		t.Errorf("provider ledger = %d refunds, want 1", got)
	}
	snap, err := e.s.Snapshot(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(snap.FinalMessage.Body, "too late") {
		t.Errorf("final message %q does not say the cancel was too late", snap.FinalMessage.Body)
	}
	e.wantWordsForEveryReader(run.ID)
	e.verify()
}

func TestExecutor_LostResponseIsReconciled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{CommitThenDrop: true})
	found := testutil.ToFloat64(metrics.Reconciliations.WithLabelValues("succeeded"))
	e.executor(agent.Config{ApprovalThreshold: 1 << 40, ProviderTimeout: time.Second}, nil)
	run := e.start(900)
	e.waitState(run.ID, store.StateCompleted)
	if got := testutil.ToFloat64(metrics.Reconciliations.WithLabelValues("succeeded")); got < found+1 {
		t.Errorf("refundd_reconciliations_total{outcome=succeeded} went from %v to %v, want this lookup counted", found, got)
	}
	types := strings.Join(e.types(run.ID), ",")
	if !strings.Contains(types, "operation.submitted,operation.reconciling,operation.succeeded") {
		t.Errorf("business events = %s, want operation.submitted,operation.reconciling,operation.succeeded", types)
	}
	if got := len(e.ledger()); got != 1 {
		t.Errorf("provider ledger = %d refunds, want 1", got)
	}
	e.verify()
}

func TestExecutor_UnknownOutcomeNeverCommittedIsSubmittedAgainWithSameKey(t *testing.T) {
	t.Parallel()
	// The provider is slow: the call times out before it commits, so the
	// outcome is unknown; the provider then says it never happened.
	// Lookups get the same timeout: a second, as a 200 ms one missed every
	// lookup for 20 s in CI with test-go niced beside the browser tests.
	e := newEnv(t, payments.Faults{Latency: 30 * time.Second})
	e.executor(agent.Config{ApprovalThreshold: 1 << 40, ProviderTimeout: time.Second}, nil)
	run := e.start(300)
	e.waitState(run.ID, store.StateReconciling)
	if err := e.sim.SetFaults(payments.Faults{}); err != nil {
		t.Fatal(err)
	}
	e.waitState(run.ID, store.StateCompleted)
	ledger := e.ledger()
	ops, err := e.s.OperationsByRun(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 1 || ledger[0].Key != ops[0].ID.String() {
		t.Errorf("provider ledger = %+v, want one refund under key %s", ledger, ops[0].ID)
	}
	e.verify()
}

func TestExecutor_Provider5xx(t *testing.T) {
	t.Parallel()
	t.Run("retries then succeeds", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, payments.Faults{Error5xxNext: 2})
		e.executor(agent.Config{ApprovalThreshold: 1 << 40}, nil)
		run := e.start(100)
		e.waitState(run.ID, store.StateCompleted)
		if got := len(e.ledger()); got != 1 {
			t.Errorf("provider ledger = %d refunds, want 1", got)
		}
		e.verify()
	})
	t.Run("gives up once the outage outlasts the budget and fails the run", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, payments.Faults{FailBeforeCommit: true})
		const budget = 300 * time.Millisecond
		e.executor(agent.Config{ApprovalThreshold: 1 << 40, OutageBudget: budget}, nil)
		run := e.start(100)
		e.waitState(run.ID, store.StateFailed)
		snap, err := e.s.Snapshot(context.Background(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if op := snap.Operations[0]; op.State != store.OpFailed {
			t.Errorf("operation %s, want failed", op.State)
		}
		var refusals int
		var refusedFor time.Duration
		if err := e.db.QueryRow(`SELECT o.refusals, (extract(epoch FROM r.finished_at - o.first_refused_at) * 1e6)::bigint
            FROM operations o JOIN runs r ON r.id = o.run_id WHERE o.run_id = $1`, run.ID).Scan(&refusals, &refusedFor); err != nil {
			t.Fatal(err)
		}
		// At least one retry: how many fit in the budget depends on how
		// busy the machine is (CI saw one take 325 ms of a 300 ms budget).
		if refusedFor *= time.Microsecond; refusedFor < budget || refusals < 2 {
			t.Errorf("run failed %v after the first of %d refusals, want at least %v and a retry", refusedFor, refusals, budget)
		}
		if !strings.Contains(snap.FinalMessage.Body, "Nothing was refunded") {
			t.Errorf("final message = %q, want it to say nothing was refunded", snap.FinalMessage.Body)
		}
		if got := len(e.ledger()); got != 0 {
			t.Errorf("provider ledger = %d refunds, want 0", got)
		}
		e.verify()
	})
}

func TestExecutor_DeclinedRefundFailsRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{DeclineNext: 1})
	e.executor(agent.Config{ApprovalThreshold: 1 << 40}, nil)
	run := e.start(100)
	e.waitState(run.ID, store.StateFailed)
	if got := strings.Join(e.types(run.ID), ","); !strings.Contains(got, "operation.failed,message.final,run.failed") {
		t.Errorf("business events = %s", got)
	}
	e.verify()
}

// panicky panics when narrating one order and behaves otherwise.
type panicky struct{ orderID int64 }

func (p panicky) Narrate(ctx context.Context, f agent.Facts, emit func(string) error) error {
	if f.OrderID == p.orderID {
		panic("narrator exploded")
	}
	return agent.Builtin{Words: views.Answers{}}.Narrate(ctx, f, emit)
}

func TestExecutor_PanicFailsStepNotWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	ctx := context.Background()
	bad, err := e.s.CreateOrder(ctx, e.customer.ID, "cursed", 1000, "EUR")
	if err != nil {
		t.Fatal(err)
	}
	e.executor(agent.Config{ApprovalThreshold: 1 << 40, Concurrency: 1}, panicky{orderID: bad.ID})
	badRun, _, err := e.s.StartRun(ctx, store.StartRequest{OwnerID: e.customer.ID, ClientRequestID: "bad", OrderID: bad.ID, Amount: 100, Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	good := e.start(100)
	e.waitState(good.ID, store.StateCompleted)
	r, err := e.s.RunByID(ctx, badRun.ID)
	if err != nil {
		t.Fatal(err)
	}
	if store.Terminal(r.State) {
		t.Errorf("panicking run is %s, want it left unfinished for a retry", r.State)
	}
}

func TestNarration_ChunkedNotPerToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	start := time.Now()
	e.executor(agent.Config{NarrationDelay: 5 * time.Millisecond}, nil)
	run := e.start(100)
	e.waitState(run.ID, store.StateAwaitingApproval)
	elapsed := time.Since(start)
	var payloads []json.RawMessage
	if err := e.db.Select(&payloads, `SELECT payload FROM run_events WHERE run_id = $1 AND type = 'narration.delta' ORDER BY seq`, run.ID); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, p := range payloads {
		var d store.NarrationDelta
		if err := json.Unmarshal(p, &d); err != nil {
			t.Fatal(err)
		}
		text.WriteString(d.Text)
	}
	words := len(strings.Fields(text.String()))
	if words < 20 {
		t.Fatalf("narration = %q, want a few sentences", text.String())
	}
	// At most ~10 rows a second (plus the final flush), far fewer than words.
	if max := int(elapsed/(100*time.Millisecond)) + 2; len(payloads) > max || len(payloads) >= words {
		t.Errorf("%d narration rows for %d words in %v, want at most %d", len(payloads), words, elapsed, max)
	}
	if !strings.Contains(text.String(), "arrived broken") {
		t.Errorf("narration %q does not mention the reason", text.String())
	}
}

func TestExecutor_PolicyRefusalFailsRunWithReadableMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	e.executor(agent.Config{MaxAmount: 50000}, nil)
	run := e.start(50001)
	e.waitState(run.ID, store.StateFailed)
	snap, err := e.s.Snapshot(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Refunds above €500.00 need a person"; !strings.Contains(snap.FinalMessage.Body, want) {
		t.Errorf("final message = %q, want it to contain %q", snap.FinalMessage.Body, want)
	}
	e.wantWordsForEveryReader(run.ID)
	if len(snap.Operations) != 0 || len(e.ledger()) != 0 {
		t.Errorf("operations %d, provider refunds %d; want none", len(snap.Operations), len(e.ledger()))
	}
	e.verify()
}

// A cancel that comes while the outcome is being verified comes after the
// operation exists: it is answered too_late, and so it is: the run does
// not end canceled even though the provider has nothing yet; once the
// provider answers again the refund goes through, under the same key, and
// the run says the cancel came too late.
func TestExecutor_CancelWhileReconcilingIsTooLate(t *testing.T) {
	t.Parallel()
	// The provider is too slow: every call times out before it commits, so
	// the outcome is unknown and the run reconciles.
	e := newEnv(t, payments.Faults{Latency: 30 * time.Second})
	e.executor(agent.Config{ApprovalThreshold: 1 << 40, ProviderTimeout: time.Second}, nil)
	run := e.start(300)
	e.waitState(run.ID, store.StateReconciling)
	d, err := e.s.RequestCancel(context.Background(), run.ID, e.customer.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != store.DecisionTooLate {
		t.Fatalf("cancel while reconciling answered %v, want DecisionTooLate", d.Outcome)
	}
	if err := e.sim.SetFaults(payments.Faults{}); err != nil {
		t.Fatal(err)
	}
	e.waitState(run.ID, store.StateCompleted)
	if got := len(e.ledger()); got != 1 {
		t.Errorf("provider ledger = %d refunds, want 1", got)
	}
	types := strings.Join(e.types(run.ID), ",")
	for _, want := range []string{"operation.reconciling", "cancel.requested", "operation.succeeded,cancel.too_late,message.final,run.completed"} {
		if !strings.Contains(types, want) {
			t.Errorf("business events = %s, want %s", types, want)
		}
	}
	e.wantWordsForEveryReader(run.ID)
	e.verify()
}
