package agent_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// callTimes is a Provider that records when each refund call was made.
type callTimes struct {
	payments.Provider
	mu    sync.Mutex
	calls []time.Time
}

func (c *callTimes) Refund(ctx context.Context, req payments.RefundRequest) (payments.Receipt, error) {
	c.mu.Lock()
	c.calls = append(c.calls, time.Now())
	c.mu.Unlock()
	return c.Provider.Refund(ctx, req)
}

// gaps are the pauses between consecutive refund calls.
func (c *callTimes) gaps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var gs []time.Duration
	for i := 1; i < len(c.calls); i++ {
		gs = append(gs, c.calls[i].Sub(c.calls[i-1]))
	}
	return gs
}

// The reproduction: the provider answers 503 to the next four
// calls. It used to be called at +0, +9 ms, +13 ms and +4.9 s and the run
// ended failed, because the step's own events made the run due again at
// once and every resume counted as an attempt.
func TestExecutor_ProviderOutageIsRiddenOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{Error5xxNext: 4})
	const base = 100 * time.Millisecond
	calls := &callTimes{Provider: e.client}
	testkit.StartExecutor(t, e.s, nil, calls, nil, agent.Config{ApprovalThreshold: 1 << 40,
		ProviderTimeout: 2 * time.Second, RetryBase: base})
	run := e.start(100)
	e.waitState(run.ID, store.StateCompleted)

	t.Run("one refund in the provider's ledger", func(t *testing.T) {
		ops, err := e.s.OperationsByRun(context.Background(), run.ID)
		if err != nil || len(ops) != 1 {
			t.Fatalf("operations = %+v, %v; want one", ops, err)
		}
		if l := e.ledger(); len(l) != 1 || l[0].Key != ops[0].ID.String() || l[0].Status != payments.StatusSucceeded {
			t.Errorf("provider ledger = %+v, want one refund under key %s", l, ops[0].ID)
		}
		e.verify()
	})
	t.Run("a refusal is not an unknown outcome", func(t *testing.T) {
		// The provider said it committed nothing: no "verifying" on the page.
		if got, want := strings.Join(e.types(run.ID), ","), "run.created,run.planning,action.proposed,approval.granted,"+
			"operation.submitted,operation.succeeded,message.final,run.completed"; got != want {
			t.Errorf("business events:\n got %s\nwant %s", got, want)
		}
	})
	t.Run("the calls' spacing grows", func(t *testing.T) {
		gaps := calls.gaps()
		if len(gaps) != 4 {
			t.Fatalf("%d refund calls, want 5 (four refused, one taken)", len(gaps)+1)
		}
		// The nth wait is drawn from [base·2ⁿ⁻¹/2, base·2ⁿ⁻¹]: the last
		// pause's floor (4·base) is above the first wait's ceiling (base),
		// so the floors say the spacing grows. A measured pause also holds
		// whatever else the worker did (the new run's provider check, a
		// loaded machine), so pauses are not compared with one another.
		for i, g := range gaps {
			if floor := base << i / 2; g < floor {
				t.Errorf("pause before call %d = %v, want at least %v (all pauses: %v)", i+2, g, floor, gaps)
			}
		}
	})
}

// The provider is down for refunds and lookups alike, longer than the
// budget. The run fails once the budget is spent, not before, saying nothing
// was refunded. No lookup is needed to get there (but the new run's provider
// check, which goes on without an answer): the worker knows its last call
// was refused, so nothing is unknown.
func TestExecutor_OutageBudgetCountsFromFirstRefusal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{Error5xxNext: 1000, LookupError5xxNext: 1000})
	const budget = 400 * time.Millisecond
	e.executor(agent.Config{ApprovalThreshold: 1 << 40, OutageBudget: budget, RetryBase: 50 * time.Millisecond}, nil)
	start := time.Now()
	run := e.start(100)
	r := e.waitState(run.ID, store.StateFailed)
	if took := time.Since(start); took < budget {
		t.Errorf("run failed after %v, want the %v budget ridden out first", took, budget)
	}
	snap, err := e.s.Snapshot(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(snap.FinalMessage.Body, "Nothing was refunded") {
		t.Errorf("final message = %q, want it to say nothing was refunded", snap.FinalMessage.Body)
	}
	if got := len(e.ledger()); got != 0 {
		t.Errorf("provider ledger = %d refunds, want 0", got)
	}
	// One lookup, the new run's provider check before its first step;
	// none after the refusals.
	if got := 1000 - e.sim.Faults().LookupError5xxNext; got != 1 {
		t.Errorf("the worker looked the refund up %d times, want once (the new run's provider check) and never after refusals", got)
	}
	e.verify()
}

// A worker that resumes an operation whose outcome is unknown asks the
// provider before anything else, however long that takes: reconciling
// spends none of the outage budget, and never fails the run.
func TestExecutor_ReconcileDoesNotSpendOutageBudget(t *testing.T) {
	t.Parallel()
	// The first call times out before the provider commits: unknown.
	e := newEnv(t, payments.Faults{Latency: 30 * time.Second})
	e.executor(agent.Config{ApprovalThreshold: 1 << 40, ProviderTimeout: time.Second,
		OutageBudget: time.Millisecond, RetryBase: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond}, nil)
	run := e.start(100)
	e.waitState(run.ID, store.StateReconciling)
	// Then lookups fail for a while, well past the budget.
	if err := e.sim.SetFaults(payments.Faults{LookupError5xxNext: 6}); err != nil {
		t.Fatal(err)
	}
	e.waitState(run.ID, store.StateCompleted)
	if got := len(e.ledger()); got != 1 {
		t.Errorf("provider ledger = %d refunds, want 1", got)
	}
	e.verify()
}

// TestExecutor_RecoveryTriedWithinTheCap: the provider's fault switch
// refuses the next six refunds, long enough that doubling from the
// default 500 ms would wait 8-16 s before the sixth try (after a 30 s
// outage the refund came 21-23 s after recovery). With the default
// settings no wait is longer than RetryMax (3 s), so with a poll the
// provider is tried again within 4 s of answering again; the run then
// completes after exactly seven calls, one refund.
func TestExecutor_RecoveryTriedWithinTheCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{Error5xxNext: 6})
	calls := &callTimes{Provider: e.client}
	logs := &records{}
	x := agent.New(agent.Config{Answers: views.Answers{}, ApprovalThreshold: 1 << 40, Concurrency: 1, ProviderTimeout: 2 * time.Second},
		e.s, calls, nil, nil, slog.New(logs))
	x.Start(context.Background())
	t.Cleanup(x.Stop)
	run := e.start(100)
	testkit.WaitRunState(t, e.s, run.ID, store.StateCompleted, 2*time.Minute)

	waits := logs.durations("will retry", "retry_in")
	if len(waits) != 6 || len(calls.gaps()) != 6 {
		t.Fatalf("%d waits decided, %d refund calls; want 6 refusals, each followed by a wait, then the 7th call taken", len(waits), len(calls.gaps())+1)
	}
	for i, w := range waits {
		// The default poll (1 s) finds a run once its wait is over.
		if w+time.Second >= 5*time.Second {
			t.Errorf("wait after refusal %d = %s, want it and a poll (1 s) under 5 s (waits: %v)", i+1, w, waits)
		}
	}
	if last := waits[5]; last < agent.DefaultRetryMax/2 {
		t.Errorf("the last wait = %s, want the cap's upper half: the backoff reached the cap (waits: %v)", last, waits)
	}
	if got := len(e.ledger()); got != 1 {
		t.Errorf("provider ledger = %d refunds, want 1", got)
	}
}

// lookupTimes is a Provider that records when each lookup was made.
type lookupTimes struct {
	payments.Provider
	mu    sync.Mutex
	calls []time.Time
}

func (c *lookupTimes) Lookup(ctx context.Context, key string) (payments.Receipt, error) {
	c.mu.Lock()
	c.calls = append(c.calls, time.Now())
	c.mu.Unlock()
	return c.Provider.Lookup(ctx, key)
}

// since is the lookups made at or after t.
func (c *lookupTimes) since(t time.Time) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Time
	for _, at := range c.calls {
		if !at.Before(t) {
			out = append(out, at)
		}
	}
	return out
}

// records keeps the log records an executor writes.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

// durations are the values of attribute key in the records that say what.
func (r *records) durations(what, key string) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ds []time.Duration
	for _, rec := range r.recs {
		if !strings.Contains(rec.Message, what) {
			continue
		}
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == key {
				ds = append(ds, a.Value.Duration())
			}
			return true
		})
	}
	return ds
}

// count is how many records at level say what.
func (r *records) count(level slog.Level, what string) int {
	return r.countSince(level, what, time.Time{})
}

// countSince is count over the records written from t on.
func (r *records) countSince(level slog.Level, what string, t time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		if rec.Level == level && strings.Contains(rec.Message, what) && !rec.Time.Before(t) {
			n++
		}
	}
	return n
}

// The reproduction: a cancel arrives while the refund's outcome is
// unknown (too late to stop it), and the provider does not answer
// lookups. The worker used to log an ERROR every second and ask again at
// once; it backs off, with one warning per try and no error.
func TestExecutor_PendingCancelReconcileBacksOffQuietly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{Latency: 10 * time.Second})
	const base = 100 * time.Millisecond
	lookups := &lookupTimes{Provider: e.client}
	logs := &records{}
	x := agent.New(agent.Config{Answers: views.Answers{}, Concurrency: 2, Poll: 20 * time.Millisecond, ApprovalThreshold: 1 << 40,
		ProviderTimeout: 200 * time.Millisecond, RetryBase: base, RetryMax: 800 * time.Millisecond},
		e.s, lookups, nil, nil, slog.New(logs))
	x.Start(context.Background())
	t.Cleanup(x.Stop)
	run := e.start(300)
	e.waitState(run.ID, store.StateReconciling)
	faulted := time.Now()
	if err := e.sim.SetFaults(payments.Faults{Latency: 10 * time.Second, LookupError5xxNext: 1000}); err != nil {
		t.Fatal(err)
	}
	canceled := time.Now()
	if _, err := e.s.RequestCancel(context.Background(), run.ID, e.customer.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the window whose lookups are counted
	calls := lookups.since(canceled)
	t.Logf("%d lookups in the 3 s after the cancel", len(calls))
	// Waits double from base to 800 ms, each drawn from its upper half:
	// about six lookups in three seconds; without backoff, dozens.
	if len(calls) < 2 || len(calls) > 10 {
		t.Errorf("%d lookups in 3 s after the cancel, want 2..10 (backing off)", len(calls))
	}
	// The cancel itself makes the run due at once (a new command), so the
	// first pause may be short; the later ones grow.
	if n := len(calls); n >= 3 {
		if gap := calls[n-1].Sub(calls[n-2]); gap < 2*base {
			t.Errorf("the last pause between lookups is %v, want at least %v (backing off)", gap, 2*base)
		}
	}
	if n := logs.count(slog.LevelError, ""); n != 0 {
		t.Errorf("%d ERROR records, want none for a lookup the provider did not answer", n)
	}
	// One warning per refused lookup, give or take the one at each edge:
	// a lookup sent before the switch that times out after it, and one
	// refused whose warning is not written yet.
	failed := e.sim.Faults().LookupError5xxNext
	if warns, tries := logs.countSince(slog.LevelWarn, "provider lookup failed", faulted), 1000-failed; warns < tries-1 || warns > tries+1 {
		t.Errorf("%d warnings for %d unanswered lookups, want one each", warns, tries)
	}
	// The provider answers again: it never had the refund, and the cancel
	// came too late to stop it, so it is sent again with the same key.
	if err := e.sim.SetFaults(payments.Faults{}); err != nil {
		t.Fatal(err)
	}
	e.waitState(run.ID, store.StateCompleted)
	if got := len(e.ledger()); got != 1 {
		t.Errorf("provider ledger = %d refunds, want 1", got)
	}
}

// A provider call that cannot be recorded first is not made: the run
// neither reaches the provider nor says it is verifying a result, and goes
// on once calls can be recorded again.
func TestExecutor_UnrecordableCallIsNotMade(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	for _, q := range []string{
		`CREATE FUNCTION refuse_call() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no calls today'; END $$`,
		`CREATE TRIGGER refuse_call BEFORE INSERT ON provider_calls FOR EACH ROW EXECUTE FUNCTION refuse_call()`,
	} {
		if _, err := e.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	e.executor(agent.Config{ApprovalThreshold: 1 << 40}, nil)
	run := e.start(100)
	e.waitState(run.ID, store.StateSubmitting)
	testkit.WaitUntil(t, "a few tries", 20*time.Second, func() bool {
		var n int
		return e.db.Get(&n, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'step.attempt' AND payload->>'step' = 'submitting'`, run.ID) == nil && n >= 1
	})
	time.Sleep(500 * time.Millisecond) // retries of the refused step
	if got := len(e.ledger()); got != 0 {
		t.Fatalf("provider ledger = %d refunds while no call could be recorded, want 0", got)
	}
	if types := strings.Join(e.types(run.ID), ","); strings.Contains(types, store.EventOperationReconciling) {
		t.Fatalf("business events %s: a call never made is being verified", types)
	}
	if _, err := e.db.Exec(`DROP TRIGGER refuse_call ON provider_calls`); err != nil {
		t.Fatal(err)
	}
	e.waitState(run.ID, store.StateCompleted)
	if got := len(e.ledger()); got != 1 {
		t.Errorf("provider ledger = %d refunds, want 1", got)
	}
}
