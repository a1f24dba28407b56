package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// refusedOnce is a run whose refund's one call so far the provider refused
// before committing anything (a 503): its operation is unsent again.
func (f *fixture) refusedOnce(t *testing.T, key string) (*store.Run, *store.Operation) {
	t.Helper()
	ctx := context.Background()
	run := f.start(t, key, 100)
	op, err := f.s.SubmitOperation(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.BeginSubmit(ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.NoteRefusal(ctx, op.ID, "payments: refund: provider unavailable (HTTP 503)"); err != nil {
		t.Fatal(err)
	}
	return run, op
}

// operation reads the run's one operation.
func (f *fixture) operation(t *testing.T, runID uuid.UUID) store.Operation {
	t.Helper()
	ops, err := f.s.OperationsByRun(context.Background(), runID)
	if err != nil || len(ops) != 1 {
		t.Fatalf("operations = %+v, %v; want one", ops, err)
	}
	return ops[0]
}

// TestCancel_DuringOutageBeforeCommitIsInTime: while every call about the
// refund was refused before the provider committed anything, a cancel is
// in time: it is answered so, no call begins after it, the run cannot end
// any way but canceled, and ending it canceled closes the operation.
func TestCancel_DuringOutageBeforeCommitIsInTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run, op := f.refusedOnce(t, "outage")
	if got := f.operation(t, run.ID); !got.Unsent || !got.LastCallRefused {
		t.Fatalf("after a refused call: unsent %v, last call refused %v; want both", got.Unsent, got.LastCallRefused)
	}
	for i, want := range []store.DecisionOutcome{store.DecisionAccepted, store.DecisionAlreadyMade} {
		if d, err := f.s.RequestCancel(ctx, run.ID, f.customer.ID); err != nil || d.Outcome != want {
			t.Fatalf("cancel %d = %+v, %v; want %v", i+1, d, err, want)
		}
	}
	if _, err := f.s.BeginSubmit(ctx, op.ID); !errors.Is(err, store.ErrCancelRequested) {
		t.Errorf("a submit after the cancel began: %v, want ErrCancelRequested", err)
	}
	if n := count(t, f.s, `SELECT count(*) FROM provider_calls WHERE operation_id = $1`, op.ID); n != 1 {
		t.Errorf("provider calls = %d, want the one refused before the cancel", n)
	}
	if _, err := f.s.FinishRun(ctx, run.ID, store.StateFailed, store.Say("The payment provider could not take the refund.")); !errors.Is(err, store.ErrCancelRequested) {
		t.Errorf("ending the run failed: %v, want ErrCancelRequested", err)
	}
	if _, err := f.s.FinishCanceled(ctx, run.ID, "canceled before it reached the payment provider", store.Say("Canceled.")); err != nil {
		t.Fatal(err)
	}
	if got := f.operation(t, run.ID); got.State != store.OpFailed || !got.Unsent {
		t.Errorf("operation = %s, unsent %v; want failed, unsent", got.State, got.Unsent)
	}
	var types []string
	if err := storetest.DB(t, f.s).Select(&types, `SELECT type FROM run_events WHERE run_id = $1 AND class = 'business' ORDER BY seq`, run.ID); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(types, ","), "run.created,operation.submitted,cancel.requested,operation.failed,message.final,run.canceled"; got != want {
		t.Errorf("business events:\n got %s\nwant %s", got, want)
	}
	if problems, err := f.s.Verify(ctx); err != nil || len(problems) > 0 {
		t.Errorf("verify = %v, %v", problems, err)
	}
}

// TestCancel_WhileARetryIsInFlightIsTooLate: a cancel that comes while a
// call may be reaching the provider is too late, and stays so once that
// call turns out refused: the answer is kept (the run goes on to the
// provider's outcome), and the executor may call again.
func TestCancel_WhileARetryIsInFlightIsTooLate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run, op := f.refusedOnce(t, "in-flight")
	if _, err := f.s.BeginSubmit(ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	if d, err := f.s.RequestCancel(ctx, run.ID, f.customer.ID); err != nil || d.Outcome != store.DecisionTooLate {
		t.Fatalf("cancel = %+v, %v; want too late", d, err)
	}
	if _, err := f.s.NoteRefusal(ctx, op.ID, "503"); err != nil {
		t.Fatal(err)
	}
	if got := f.operation(t, run.ID); got.Unsent {
		t.Error("a refusal after a too-late cancel made the operation unsent again: the cancel's answer would change")
	}
	if d, err := f.s.RequestCancel(ctx, run.ID, f.customer.ID); err != nil || d.Outcome != store.DecisionTooLate {
		t.Errorf("cancel again = %+v, %v; want too late still", d, err)
	}
	if _, err := f.s.BeginSubmit(ctx, op.ID); err != nil {
		t.Errorf("a submit after a too-late cancel: %v, want it begun", err)
	}
	if _, err := f.s.FinishCanceled(ctx, run.ID, "", store.Say("Canceled.")); store.ErrorCode(err) != store.CodeConflict {
		t.Errorf("ending canceled after a too-late cancel: %v, want a conflict", err)
	}
}

// TestCancel_RacesTheSubmitsMark: 40 runs whose last call was refused,
// each with a cancel racing the executor's mark of its next call. Under the
// run's lock one of them goes first, so exactly one of two things happens:
// the call is begun and the cancel is too late, or the cancel is in time
// and no call is begun.
func TestCancel_RacesTheSubmitsMark(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const n = 40
	counts := map[bool]int{}
	for i := range n {
		run, op := f.refusedOnce(t, uuid.NewString())
		var (
			wg     sync.WaitGroup
			d      store.Decision
			cerr   error
			begErr error
		)
		wg.Go(func() { d, cerr = f.s.RequestCancel(ctx, run.ID, f.customer.ID) })
		wg.Go(func() { _, begErr = f.s.BeginSubmit(ctx, op.ID) })
		wg.Wait()
		if cerr != nil || (begErr != nil && !errors.Is(begErr, store.ErrCancelRequested)) {
			t.Fatalf("run %d: cancel %v, begin %v", i, cerr, begErr)
		}
		begun := begErr == nil
		counts[begun]++
		if tooLate := d.Outcome == store.DecisionTooLate; begun != tooLate || (!begun && d.Outcome != store.DecisionAccepted) {
			t.Errorf("run %d: call begun %v, cancel answered %v; want the call begun exactly when the cancel is too late", i, begun, d.Outcome)
		}
		calls := count(t, f.s, `SELECT count(*) FROM provider_calls WHERE operation_id = $1`, op.ID)
		if want := map[bool]int{true: 2, false: 1}[begun]; calls != want {
			t.Errorf("run %d: %d calls on record, want %d", i, calls, want)
		}
	}
	t.Logf("%d calls begun first, %d cancels first", counts[true], counts[false])
}
