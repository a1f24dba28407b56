package agent_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// keyCalls is a Provider that notes, for each key, when each refund call
// about it began and how many lookups asked about it. A refund call takes
// delay longer on its way to the provider.
type keyCalls struct {
	payments.Provider
	delay   time.Duration
	mu      sync.Mutex
	refunds map[string][]time.Time
	lookups map[string]int
}

func newKeyCalls(p payments.Provider) *keyCalls {
	return &keyCalls{Provider: p, refunds: map[string][]time.Time{}, lookups: map[string]int{}}
}

func (c *keyCalls) Refund(ctx context.Context, req payments.RefundRequest) (payments.Receipt, error) {
	c.mu.Lock()
	c.refunds[req.Key] = append(c.refunds[req.Key], time.Now())
	c.mu.Unlock()
	select {
	case <-ctx.Done():
		return payments.Receipt{}, ctx.Err()
	case <-time.After(c.delay):
	}
	return c.Provider.Refund(ctx, req)
}

func (c *keyCalls) Lookup(ctx context.Context, key string) (payments.Receipt, error) {
	c.mu.Lock()
	c.lookups[key]++
	c.mu.Unlock()
	return c.Provider.Lookup(ctx, key)
}

// refundsSince is how many refund calls about key began at or after t.
func (c *keyCalls) refundsSince(key string, t time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, at := range c.refunds[key] {
		if !at.Before(t) {
			n++
		}
	}
	return n
}

func (c *keyCalls) lookupsOf(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookups[key]
}

// unreachable is a Provider whose connections are refused (a closed port)
// until it is brought up; then it is the provider behind it.
type unreachable struct {
	up       atomic.Bool
	down, at payments.Provider
}

func newUnreachable(t *testing.T, at payments.Provider) *unreachable {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	down := payments.NewClient("http://"+addr, time.Second)
	t.Cleanup(down.Close)
	return &unreachable{down: down, at: at}
}

func (u *unreachable) now() payments.Provider {
	if u.up.Load() {
		return u.at
	}
	return u.down
}

func (u *unreachable) Refund(ctx context.Context, req payments.RefundRequest) (payments.Receipt, error) {
	return u.now().Refund(ctx, req)
}

func (u *unreachable) Lookup(ctx context.Context, key string) (payments.Receipt, error) {
	return u.now().Lookup(ctx, key)
}

// waitBackingOff waits until the run's refund has been refused at least
// refusals times and the run waits, released, at least 300 ms before its
// next try: a cancel now comes between two calls, while every call so far
// was refused. It returns the operation.
func (e *env) waitBackingOff(runID uuid.UUID, refusals int) store.Operation {
	e.t.Helper()
	testkit.WaitUntil(e.t, "the refund refused and the run backing off", 30*time.Second, func() bool {
		var ok bool
		err := e.db.Get(&ok, `SELECT EXISTS (SELECT 1 FROM runs r JOIN operations o ON o.run_id = r.id
            WHERE r.id = $1 AND o.refusals >= $2 AND r.lease_owner IS NULL
              AND r.next_attempt_at > now() + interval '300 milliseconds')`, runID, refusals)
		if err != nil {
			e.t.Fatal(err)
		}
		return ok
	})
	ops, err := e.s.OperationsByRun(context.Background(), runID)
	if err != nil || len(ops) != 1 {
		e.t.Fatalf("operations = %+v, %v; want one", ops, err)
	}
	return ops[0]
}

// wantNoRefundAt fails unless the provider's own ledger holds no refund
// under key.
func (e *env) wantNoRefundAt(key string) {
	e.t.Helper()
	for _, rc := range e.ledger() {
		if rc.Key == key {
			e.t.Errorf("the provider holds refund %s (%s) under key %s, want none", rc.Ref, rc.Status, key)
		}
	}
}

// verifyLedger checks our ledger against the provider's.
func (e *env) verifyLedger() {
	e.t.Helper()
	problems, err := agent.VerifyLedger(context.Background(), e.s, e.client)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(problems) > 0 {
		e.t.Errorf("ledgers disagree: %s", strings.Join(problems, "\n"))
	}
}

// The reproduction: the provider answers every refund with a 503
// before committing anything (fail_before_commit); the run is approved and
// a cancel comes during the submit backoff. It used to be answered
// too_late, the worker went on resubmitting after it, and once the fault
// was cleared the refund committed and the run ended "the refund had
// already reached the payment provider", which was not true when the
// cancel came. Now the cancel is in time: no refund call after it, a
// lookup confirms the provider has nothing, and the run ends canceled,
// saying so.
func TestCancel_DuringOutageBeforeCommitEndsCanceled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{FailBeforeCommit: true})
	calls := newKeyCalls(e.client)
	testkit.StartExecutor(t, e.s, nil, calls, nil, agent.Config{ProviderTimeout: 2 * time.Second,
		RetryBase: time.Second, RetryMax: 2 * time.Second})
	ctx := context.Background()
	run := e.start(300)
	e.waitState(run.ID, store.StateAwaitingApproval)
	if _, err := e.s.Approve(ctx, run.ID, e.approver.ID, ""); err != nil {
		t.Fatal(err)
	}
	op := e.waitBackingOff(run.ID, 2)
	key := op.ID.String()

	d, err := e.s.RequestCancel(ctx, run.ID, e.customer.ID)
	answered := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != store.DecisionAccepted {
		t.Fatalf("cancel during the backoff answered %v, want accepted: every call so far was refused before commit", d.Outcome)
	}
	e.waitState(run.ID, store.StateCanceled)
	if err := e.sim.SetFaults(payments.Faults{}); err != nil {
		t.Fatal(err)
	}

	t.Run("no refund call after the cancel, and none at the provider", func(t *testing.T) {
		if n := calls.refundsSince(key, answered); n != 0 {
			t.Errorf("%d refund calls after the cancel was answered, want none", n)
		}
		if calls.lookupsOf(key) == 0 {
			t.Error("the run ended canceled without asking the provider about its key")
		}
		e.wantNoRefundAt(key)
		e.verify()
		e.verifyLedger()
	})
	t.Run("the words say the cancel stopped it", func(t *testing.T) {
		snap, err := e.s.Snapshot(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := "Canceled before the refund reached the payment provider"; !strings.Contains(snap.FinalMessage.Body, want) {
			t.Errorf("final message = %q, want it to say %q", snap.FinalMessage.Body, want)
		}
		for _, late := range []string{"too late", "already reached"} {
			if strings.Contains(snap.FinalMessage.Body, late) {
				t.Errorf("final message = %q says %q", snap.FinalMessage.Body, late)
			}
		}
		types := strings.Join(e.types(run.ID), ",")
		if !strings.HasSuffix(types, "cancel.requested,operation.failed,message.final,run.canceled") || strings.Contains(types, store.EventCancelTooLate) {
			t.Errorf("business events = %s, want them to end cancel.requested, operation.failed, message.final, run.canceled", types)
		}
		if snap.Operations[0].State != store.OpFailed {
			t.Errorf("operation = %s, want failed (closed: it never reached the provider)", snap.Operations[0].State)
		}
		e.wantWordsForEveryReader(run.ID)
	})
}

// A cancel while the provider cannot be reached at all (connection
// refused, for refunds and lookups alike) is in time: the worker never
// submits again, asks the provider about the key until it answers,
// backing off, and then ends the run canceled.
func TestCancel_DuringOutageBeforeCommitAsksUntilTheProviderAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	provider := newUnreachable(t, e.client)
	calls := newKeyCalls(provider)
	testkit.StartExecutor(t, e.s, nil, calls, nil, agent.Config{ApprovalThreshold: 1 << 40,
		ProviderTimeout: 2 * time.Second, RetryBase: time.Second, RetryMax: 2 * time.Second})
	ctx := context.Background()
	run := e.start(300)
	op := e.waitBackingOff(run.ID, 1)
	key := op.ID.String()
	if !strings.Contains(op.LastError, "provider unavailable") {
		t.Fatalf("the refusal = %q, want the provider unavailable (connection refused)", op.LastError)
	}

	d, err := e.s.RequestCancel(ctx, run.ID, e.customer.ID)
	answered := time.Now()
	if err != nil || d.Outcome != store.DecisionAccepted {
		t.Fatalf("cancel = %v, %v; want accepted: no call reached the provider", d.Outcome, err)
	}
	testkit.WaitUntil(t, "two lookups the provider did not answer", 20*time.Second, func() bool {
		return calls.lookupsOf(key) >= 2
	})
	if r, err := e.s.RunByID(ctx, run.ID); err != nil || store.Terminal(r.State) {
		t.Fatalf("run = %+v, %v; want it still going: the provider never confirmed anything", r, err)
	}
	provider.up.Store(true)
	e.waitState(run.ID, store.StateCanceled)
	if n := calls.refundsSince(key, answered); n != 0 {
		t.Errorf("%d refund calls after the cancel was answered, want none", n)
	}
	e.wantNoRefundAt(key)
	e.verify()
	e.verifyLedger()
}

// TestCancel_DuringOutageBeforeCommitRacingCancelsAgree: 40 runs under
// fail_before_commit, each canceled at a random moment of the outage (in a
// backoff, or while a call, 40 ms on its way, may be reaching the
// provider), then the fault is cleared. For every run the cancel's answer
// and the run's end agree: answered in time, it ends canceled, no refund
// call begins after the answer and the provider's ledger holds no refund
// under its key; answered too_late, it never ends canceled. Cancels that
// came between calls are in time, so most are (every one was too late
// before: the operation existed).
func TestCancel_DuringOutageBeforeCommitRacingCancelsAgree(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{FailBeforeCommit: true})
	calls := newKeyCalls(e.client)
	calls.delay = 40 * time.Millisecond
	testkit.StartExecutor(t, e.s, nil, calls, nil, agent.Config{ApprovalThreshold: 1 << 40, Concurrency: 8,
		ProviderTimeout: 2 * time.Second, RetryBase: 200 * time.Millisecond, RetryMax: time.Second})
	const n = 40
	cancels := make([]outageCancel, n)
	var wg sync.WaitGroup
	for i := range cancels {
		cancels[i].run = e.start(100)
		wg.Go(func() { e.cancelDuringOutage(&cancels[i]) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if err := e.sim.SetFaults(payments.Faults{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range cancels {
		testkit.WaitUntil(t, "every run to finish", 60*time.Second, func() bool {
			r, err := e.s.RunByID(context.Background(), c.run.ID)
			return err == nil && store.Terminal(r.State)
		})
	}
	ledger := e.ledger()
	counts := map[store.DecisionOutcome]int{}
	for i, c := range cancels {
		counts[c.answer]++
		if problem := e.disagreement(c, calls, ledger); problem != "" {
			t.Errorf("run %d: %s", i, problem)
		}
	}
	t.Logf("answers: %d in time, %d too late", counts[store.DecisionAccepted], counts[store.DecisionTooLate])
	// A cancel is too late only when it lands while a call is on its way,
	// some 40 ms of each try, about one every 300 ms.
	if got := counts[store.DecisionAccepted]; got < n/2 {
		t.Errorf("%d of %d cancels during the outage answered in time, want at least %d: between calls, every call so far was refused before commit", got, n, n/2)
	}
	e.verify()
	e.verifyLedger()
}

// outageCancel is one run's cancel during an outage: its answer, and when
// it came.
type outageCancel struct {
	run      *store.Run
	answer   store.DecisionOutcome
	answered time.Time
}

// cancelDuringOutage cancels c's run at a random moment of the outage, once
// its first refusal is on record. It runs on its own goroutine: it reports
// with Error, never Fatal.
func (e *env) cancelDuringOutage(c *outageCancel) {
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ops, err := e.s.OperationsByRun(ctx, c.run.ID)
		if err != nil {
			e.t.Error(err)
			return
		}
		if len(ops) == 1 && ops[0].Attempts > 0 {
			break
		}
		if time.Now().After(deadline) {
			e.t.Errorf("run %s: no refusal within 30 s", c.run.ID)
			return
		}
		time.Sleep(25*time.Millisecond + rand.N(25*time.Millisecond))
	}
	time.Sleep(rand.N(1500 * time.Millisecond))
	d, err := e.s.RequestCancel(ctx, c.run.ID, e.customer.ID)
	c.answered = time.Now()
	if err != nil {
		e.t.Error(err)
	}
	c.answer = d.Outcome
}

// disagreement says how c's finished run contradicts its cancel's answer,
// "" if it does not: answered in time, the run ended canceled with nothing
// refunded, no refund call after the answer and nothing under its key in
// the provider's ledger; answered too_late, it did not end canceled.
func (e *env) disagreement(c outageCancel, calls *keyCalls, ledger []payments.Receipt) string {
	e.t.Helper()
	ctx := context.Background()
	r, err := e.s.RunByID(ctx, c.run.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	ops, err := e.s.OperationsByRun(ctx, c.run.ID)
	if err != nil || len(ops) != 1 {
		e.t.Fatalf("operations = %+v, %v; want one", ops, err)
	}
	key := ops[0].ID.String()
	atProvider := slices.ContainsFunc(ledger, func(rc payments.Receipt) bool { return rc.Key == key })
	switch c.answer {
	case store.DecisionAccepted:
		if r.State != store.StateCanceled || ops[0].State == store.OpSucceeded || atProvider {
			return fmt.Sprintf("cancel answered in time, run ended %s, operation %s, refund at the provider %v; want canceled, nothing refunded",
				r.State, ops[0].State, atProvider)
		}
		if k := calls.refundsSince(key, c.answered); k != 0 {
			return fmt.Sprintf("%d refund calls after the cancel was answered in time, want none", k)
		}
	case store.DecisionTooLate:
		if r.State == store.StateCanceled {
			return "cancel answered too_late, run ended canceled"
		}
	default:
		return fmt.Sprintf("cancel answered %v", c.answer)
	}
	return ""
}
