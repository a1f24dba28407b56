package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// walk takes a run through the whole happy path, with narration between the
// steps, the way the executor will.
func (f *fixture) walk(t *testing.T, runID uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	narrate := func() {
		if _, err := f.s.Append(ctx, runID, store.EventOf(store.NarrationDelta{Text: "thinking "})); err != nil {
			t.Error(err)
		}
	}
	narrate()
	if _, err := f.s.RequestApproval(ctx, runID, store.ActionProposed{Amount: 100}); err != nil {
		t.Error(err)
		return
	}
	narrate()
	if _, err := f.s.Approve(ctx, runID, f.approver.ID, ""); err != nil {
		t.Error(err)
		return
	}
	op, err := f.s.SubmitOperation(ctx, runID)
	if err != nil {
		t.Error(err)
		return
	}
	narrate()
	if _, err := f.s.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpReconciling, Reason: "timeout"}); err != nil {
		t.Error(err)
		return
	}
	if _, err := f.s.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpSucceeded, ProviderRef: "re_" + op.ID.String()[:8]}); err != nil {
		t.Error(err)
		return
	}
	if _, err := f.s.FinishRun(ctx, runID, store.StateCompleted, store.Say("Refunded.")); err != nil {
		t.Error(err)
	}
}

// replay folds a snapshot's whole log from nothing: what the events alone
// say about the run.
func replay(snap *store.Snapshot) store.Progress {
	p := store.Progress{Run: snap.Run}
	for _, e := range snap.Events {
		p.Apply(e)
	}
	return p
}

func TestSnapshot_ConsistentWithCoveringSeqUnderAppends(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const runs = 10
	ids := make([]uuid.UUID, runs)
	for i := range runs {
		ids[i] = f.start(t, uuid.NewString(), 100).ID
	}
	var (
		done    atomic.Bool
		checked atomic.Int64
		wg      sync.WaitGroup
	)
	for range 3 {
		wg.Go(func() {
			for !done.Load() {
				for _, id := range ids {
					snap, err := f.s.Snapshot(ctx, id)
					if err != nil {
						t.Error(err)
						return
					}
					checked.Add(1)
					if n := len(snap.Events); n > 0 && snap.Events[n-1].Seq != snap.CoveringSeq {
						t.Errorf("run %s: last event seq %d, covering seq %d", id, snap.Events[n-1].Seq, snap.CoveringSeq)
					}
					told := replay(snap)
					if got, want := snap.Run.State, told.State; got != want {
						t.Errorf("run %s at seq %d: state %q, events say %q", id, snap.CoveringSeq, got, want)
					}
					if len(told.Operations) != len(snap.Operations) {
						t.Errorf("run %s at seq %d: events tell of %d operations, the ledger has %d", id, snap.CoveringSeq, len(told.Operations), len(snap.Operations))
					}
					for i := range min(len(told.Operations), len(snap.Operations)) {
						if got, want := snap.Operations[i].State, told.Operations[i].State; got != want {
							t.Errorf("run %s at seq %d: operation %s, events say %s", id, snap.CoveringSeq, got, want)
						}
					}
					if snap.FinalMessage != nil && told.FinalMessage != snap.FinalMessage.Body {
						t.Errorf("run %s at seq %d: final message %q, events say %q", id, snap.CoveringSeq, snap.FinalMessage.Body, told.FinalMessage)
					}
					if (snap.FinalMessage != nil) != (snap.Run.State == store.StateCompleted) {
						t.Errorf("run %s at seq %d: state %s with final message %v", id, snap.CoveringSeq, snap.Run.State, snap.FinalMessage)
					}
				}
			}
		})
	}
	var writers sync.WaitGroup
	for _, id := range ids {
		writers.Go(func() { f.walk(t, id) })
	}
	writers.Wait()
	done.Store(true)
	wg.Wait()
	if checked.Load() < runs {
		t.Errorf("only %d snapshots checked", checked.Load())
	}
	problems, err := f.s.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("verify after the walk: %v", problems)
	}
}

func TestEventsAfter(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "k", 100)
	for range 9 {
		if _, err := f.s.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{})); err != nil {
			t.Fatal(err)
		}
	}
	seqs := func(evs []store.Event) []int64 {
		out := []int64{}
		for _, e := range evs {
			out = append(out, e.Seq)
		}
		return out
	}
	t.Run("pages strictly after the cursor", func(t *testing.T) {
		evs, err := f.s.EventsAfter(ctx, run.ID, 3, 4)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := seqs(evs), []int64{4, 5, 6, 7}; !equal(got, want) {
			t.Errorf("seqs = %v, want %v", got, want)
		}
	})
	t.Run("at the end is empty", func(t *testing.T) {
		evs, err := f.s.EventsAfter(ctx, run.ID, 10, 100)
		if err != nil || len(evs) != 0 {
			t.Errorf("EventsAfter(10) = %v, %v; want none", seqs(evs), err)
		}
	})
	for name, cursor := range map[string]int64{"negative": -1, "from the future": 11} {
		t.Run("cursor "+name, func(t *testing.T) {
			_, err := f.s.EventsAfter(ctx, run.ID, cursor, 100)
			if !errors.Is(err, store.ErrCursorInvalid) {
				t.Errorf("err = %v, want ErrCursorInvalid", err)
			}
		})
	}
	t.Run("unknown run", func(t *testing.T) {
		_, err := f.s.EventsAfter(ctx, uuid.New(), 0, 100)
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
	})
}

func TestPrune_CursorExpired(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "k", 100) // seq 1
	for range 5 {               // seqs 2..6: narration
		if _, err := f.s.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.s.RequestApproval(ctx, run.ID, store.ActionProposed{}); err != nil { // seqs 7, 8
		t.Fatal(err)
	}
	if _, err := f.s.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{})); err != nil { // seq 9
		t.Fatal(err)
	}
	// Age everything up to seq 8 past the replay window.
	if _, err := storetest.DB(t, f.s).ExecContext(ctx, `UPDATE run_events SET created_at = now() - interval '1 hour'
        WHERE run_id = $1 AND seq <= 8`, run.ID); err != nil {
		t.Fatal(err)
	}
	before, err := f.s.EventsAfter(ctx, run.ID, 2, 100)
	if err != nil || len(before) != 7 {
		t.Fatalf("before pruning, EventsAfter(2) = %d events, %v; want 7", len(before), err)
	}
	n, err := f.s.Prune(ctx, store.Retention{Presentation: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("pruned %d events, want 5", n)
	}
	r, err := f.s.RunByID(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.ReplayFloor != 6 {
		t.Errorf("replay_floor = %d, want 6", r.ReplayFloor)
	}
	if _, err := f.s.EventsAfter(ctx, run.ID, 2, 100); !errors.Is(err, store.ErrCursorExpired) {
		t.Errorf("EventsAfter(2) after pruning: err = %v, want ErrCursorExpired", err)
	}
	after, err := f.s.EventsAfter(ctx, run.ID, 6, 100)
	if err != nil {
		t.Fatalf("EventsAfter(6) at the floor: %v", err)
	}
	if len(after) != 3 || after[0].Seq != 7 {
		t.Errorf("EventsAfter(6) = %d events from seq %d, want 3 from 7", len(after), after[0].Seq)
	}
	if got := count(t, f.s, `SELECT count(*) FROM run_events WHERE run_id = $1 AND class = 'business'`, run.ID); got != 3 {
		t.Errorf("business events = %d, want all 3 kept", got)
	}
	if problems, err := f.s.Verify(ctx); err != nil || len(problems) > 0 {
		t.Errorf("verify after pruning: %v %v", problems, err)
	}
}

func TestFinishRun_ExactlyOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "k", 100)
	var (
		wg  sync.WaitGroup
		ok  atomic.Int64
		dup atomic.Int64
	)
	for range 10 {
		wg.Go(func() {
			_, err := f.s.FinishRun(ctx, run.ID, store.StateCompleted, store.Say("Refunded."))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, store.ErrAlreadyDone):
				dup.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || dup.Load() != 9 {
		t.Errorf("finished %d times, already done %d; want 1 and 9", ok.Load(), dup.Load())
	}
	if got := count(t, f.s, `SELECT count(*) FROM final_messages WHERE run_id = $1`, run.ID); got != 1 {
		t.Errorf("final messages = %d, want 1", got)
	}
	if got := count(t, f.s, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type IN ('run.completed', 'message.final')`, run.ID); got != 2 {
		t.Errorf("completion events = %d, want 2 (message.final, run.completed)", got)
	}
	if _, err := f.s.FinishRun(ctx, run.ID, store.StateFailed, store.Say("oops")); !errors.Is(err, store.ErrAlreadyDone) {
		t.Errorf("failing a completed run: err = %v, want ErrAlreadyDone", err)
	}
}

// TestApprove_TwiceAtOnce: racing approvals of one request record one
// approval; the others are told it was already made.
func TestApprove_TwiceAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "a", 100)
	if _, err := f.s.RequestApproval(ctx, run.ID, store.ActionProposed{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var ok, dup atomic.Int64
	for range 8 {
		wg.Go(func() {
			d, err := f.s.Approve(ctx, run.ID, f.approver.ID, "")
			switch {
			case err != nil:
				t.Error(err)
			case d.Outcome == store.DecisionAccepted:
				ok.Add(1)
			case d.Outcome == store.DecisionAlreadyMade:
				dup.Add(1)
			default:
				t.Errorf("outcome %d (%v)", d.Outcome, d.Why)
			}
			if err == nil && d.Run.State != store.StateSubmitting {
				t.Errorf("run after the decision = %s, want submitting", d.Run.State)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || dup.Load() != 7 {
		t.Errorf("approved %d, already %d; want 1 and 7", ok.Load(), dup.Load())
	}
	if got := count(t, f.s, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'approval.granted'`, run.ID); got != 1 {
		t.Errorf("approval.granted events = %d, want 1", got)
	}
	snap, err := f.s.Snapshot(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a := snap.Approval; a == nil || a.DecidedBy.Int64 != f.approver.ID || !a.DecidedAt.Valid {
		t.Errorf("approval = %+v; want decided by %d with a time", a, f.approver.ID)
	}
}

func TestApprove(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	t.Run("own request is forbidden", func(t *testing.T) {
		run := f.start(t, "own", 100)
		if _, err := f.s.RequestApproval(ctx, run.ID, store.ActionProposed{}); err != nil {
			t.Fatal(err)
		}
		wantNotAllowed(t, f, run.ID, f.customer.ID, store.ErrForbidden)
	})
	t.Run("canceled run is a conflict", func(t *testing.T) {
		run := f.start(t, "c", 100)
		if _, err := f.s.RequestApproval(ctx, run.ID, store.ActionProposed{}); err != nil {
			t.Fatal(err)
		}
		if d, err := f.s.RequestCancel(ctx, run.ID, f.customer.ID); err != nil || d.Outcome != store.DecisionAccepted || !d.Run.CancelRequested() {
			t.Fatalf("cancel = %+v, %v; want accepted, the run marked", d, err)
		}
		if d, err := f.s.RequestCancel(ctx, run.ID, f.customer.ID); err != nil || d.Outcome != store.DecisionAlreadyMade {
			t.Errorf("second cancel = %+v, %v; want already made", d, err)
		}
		wantNotAllowed(t, f, run.ID, f.approver.ID, store.ErrConflict)
	})
	t.Run("no pending request is a conflict", func(t *testing.T) {
		run := f.start(t, "none", 100)
		wantNotAllowed(t, f, run.ID, f.approver.ID, store.ErrConflict)
	})
	t.Run("finished run", func(t *testing.T) {
		run := f.start(t, "done", 100)
		if _, err := f.s.RequestApproval(ctx, run.ID, store.ActionProposed{}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.FinishRun(ctx, run.ID, store.StateFailed, store.Say("Policy refused.")); err != nil {
			t.Fatal(err)
		}
		if d, err := f.s.Approve(ctx, run.ID, f.approver.ID, ""); err != nil || d.Outcome != store.DecisionRunFinished {
			t.Errorf("approve = %+v, %v; want run finished", d, err)
		}
		if d, err := f.s.RequestCancel(ctx, run.ID, f.customer.ID); err != nil || d.Outcome != store.DecisionRunFinished {
			t.Errorf("cancel = %+v, %v; want run finished", d, err)
		}
		if got := count(t, f.s, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type IN ('approval.granted', 'cancel.requested')`, run.ID); got != 0 {
			t.Errorf("decision events on a finished run = %d, want none", got)
		}
	})
}

// wantNotAllowed checks that byUserID's approval of the run is refused with
// a reason of kind want, and recorded nowhere.
func wantNotAllowed(t *testing.T, f *fixture, runID uuid.UUID, byUserID int64, want error) {
	t.Helper()
	d, err := f.s.Approve(context.Background(), runID, byUserID, "")
	if err != nil || d.Outcome != store.DecisionNotAllowed || !errors.Is(d.Why, want) {
		t.Errorf("approve = %+v, %v; want not allowed because %v", d, err, want)
	}
	if got := count(t, f.s, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'approval.granted'`, runID); got != 0 {
		t.Errorf("approval.granted events = %d, want none", got)
	}
}

// TestRequestCancel_TooLate: once a call about the operation may have
// reached the provider, the cancel is still recorded (the executor
// reconciles before it ends the run), but the outcome says the refund may
// already be on its way, however often it is asked.
func TestRequestCancel_TooLate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "late", 100)
	op, err := f.s.SubmitOperation(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.BeginSubmit(ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		d, err := f.s.RequestCancel(ctx, run.ID, f.customer.ID)
		if err != nil || d.Outcome != store.DecisionTooLate || !d.Run.CancelRequested() {
			t.Errorf("cancel %d = %+v, %v; want too late, with the cancel recorded", i+1, d, err)
		}
	}
	if got := count(t, f.s, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'cancel.requested'`, run.ID); got != 1 {
		t.Errorf("cancel.requested events = %d, want 1", got)
	}
}

func TestRecordOutcome_ExactlyOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "k", 100)
	op, err := f.s.SubmitOperation(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.s.SubmitOperation(ctx, run.ID)
	if !errors.Is(err, store.ErrAlreadyDone) || again.ID != op.ID {
		t.Errorf("second submit = %v, %v; want the same operation and ErrAlreadyDone", again.ID, err)
	}
	for range 2 {
		if _, err := f.s.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpReconciling, Reason: "timeout"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range 5 {
		wg.Go(func() {
			_, err := f.s.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpSucceeded, ProviderRef: "re_1"})
			if err == nil {
				ok.Add(1)
			} else if !errors.Is(err, store.ErrAlreadyDone) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 {
		t.Errorf("succeeded recorded %d times, want 1", ok.Load())
	}
	if _, err := f.s.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpFailed, Reason: "x"}); !errors.Is(err, store.ErrAlreadyDone) {
		t.Errorf("failing a succeeded operation: err = %v, want ErrAlreadyDone", err)
	}
	var types []string
	if err := storetest.DB(t, f.s).SelectContext(ctx, &types, `SELECT type FROM run_events WHERE run_id = $1 AND type LIKE 'operation.%' ORDER BY seq`, run.ID); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(types, ","), "operation.submitted,operation.reconciling,operation.succeeded"; got != want {
		t.Errorf("operation events = %s, want %s", got, want)
	}
}

// TestRecordOutcome_RefundedEndsTheRunWithItsCall: a success recorded with
// the call that brought it and the run's words (Outcome.Call, .Refunded)
// answers the call, records the refund and ends the run completed in one
// transaction: its events are one append, the words are chosen as the run
// stands under its lock (a cancel that came meanwhile is too late), and a
// second recording changes nothing.
func TestRecordOutcome_RefundedEndsTheRunWithItsCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	db := storetest.DB(t, f.s)
	run := f.start(t, "k", 100)
	op, err := f.s.SubmitOperation(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	call, err := f.s.BeginSubmit(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := f.s.RequestCancel(ctx, run.ID, f.customer.ID); err != nil || d.Outcome != store.DecisionTooLate {
		t.Fatalf("cancel = %+v, %v; want too late", d, err)
	}
	var sawCancel bool
	out := store.Outcome{State: store.OpSucceeded, ProviderRef: "re_1",
		Call: &store.EndedCall{ID: call, FoundCall: store.FoundCall{HTTPStatus: 201, Took: 3 * time.Millisecond, Result: "refunded (reference re_1)"}},
		Refunded: func(r *store.Run) (store.Answer, []store.NewEvent) {
			sawCancel = r.CancelRequested()
			return store.Say("Refunded, too late to cancel."), []store.NewEvent{store.EventOf(store.CancelTooLatePayload{OperationID: op.ID})}
		}}
	got, err := f.s.RecordOutcome(ctx, op.ID, out)
	if err != nil || got.State != store.OpSucceeded {
		t.Fatalf("RecordOutcome = %+v, %v; want succeeded", got, err)
	}
	if !sawCancel {
		t.Error("the words were chosen without the cancel the run had")
	}
	r, err := f.s.RunByID(ctx, run.ID)
	if err != nil || r.State != store.StateCompleted || !r.FinishedAt.Valid {
		t.Fatalf("run = %+v, %v; want completed, finished", r, err)
	}
	var body string
	if err := db.GetContext(ctx, &body, `SELECT body FROM final_messages WHERE run_id = $1`, run.ID); err != nil || body != "Refunded, too late to cancel." {
		t.Errorf("final message = %q, %v", body, err)
	}
	var c struct {
		Answered bool   `db:"answered"`
		Status   int    `db:"http_status"`
		Result   string `db:"result"`
	}
	if err := db.GetContext(ctx, &c, `SELECT answered, http_status, result FROM provider_calls WHERE id = $1`, call); err != nil ||
		!c.Answered || c.Status != 201 || c.Result != "refunded (reference re_1)" {
		t.Errorf("provider call = %+v, %v; want answered 201, refunded", c, err)
	}
	var evs []struct {
		Seq  int64  `db:"seq"`
		Type string `db:"type"`
	}
	if err := db.SelectContext(ctx, &evs, `SELECT seq, type FROM run_events WHERE run_id = $1 AND class = 'business' ORDER BY seq DESC LIMIT 4`, run.ID); err != nil {
		t.Fatal(err)
	}
	var types []string
	for i, e := range evs {
		types = append([]string{e.Type}, types...)
		if i > 0 && e.Seq != evs[i-1].Seq-1 {
			t.Errorf("events %v are not one append", evs)
		}
	}
	if got, want := strings.Join(types, ","), "operation.succeeded,cancel.too_late,message.final,run.completed"; got != want {
		t.Errorf("last events = %s, want %s", got, want)
	}
	if _, err := f.s.RecordOutcome(ctx, op.ID, out); !errors.Is(err, store.ErrAlreadyDone) {
		t.Errorf("recording again: err = %v, want ErrAlreadyDone", err)
	}
}

func TestSubmitOperation_RacingRunsNeverExceedPaid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	t.Run("racing starts", func(t *testing.T) {
		var wg sync.WaitGroup
		var ok atomic.Int64
		for range 10 {
			wg.Go(func() {
				// 60.00 of the 100.00 paid: only one can fit.
				_, _, err := f.s.StartRun(ctx, store.StartRequest{OwnerID: f.customer.ID, ClientRequestID: uuid.NewString(),
					OrderID: f.order.ID, Amount: 6000, Reason: "half"})
				if err == nil {
					ok.Add(1)
				} else if store.ErrorCode(err) != store.CodeInvalid {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if ok.Load() != 1 {
			t.Errorf("%d starts of 60.00 on a 100.00 order succeeded, want 1", ok.Load())
		}
	})
	t.Run("racing operations", func(t *testing.T) {
		// Runs that slipped past the start check (say, written by an older
		// version): the ledger still refuses to overspend.
		o, err := f.s.CreateOrder(ctx, f.customer.ID, "Tent", 10000, "EUR")
		if err != nil {
			t.Fatal(err)
		}
		var ids []uuid.UUID
		for range 4 {
			id := uuid.New()
			if _, err := storetest.DB(t, f.s).ExecContext(ctx, `INSERT INTO runs (id, correlation_id, owner_id, order_id, amount, currency, reason, client_request_id)
                VALUES ($1, $1, $2, $3, 4000, 'EUR', 'x', $4)`, id, f.customer.ID, o.ID, id.String()); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				if _, err := f.s.SubmitOperation(ctx, id); err != nil && !errors.Is(err, store.ErrConflict) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		var sum int64
		if err := storetest.DB(t, f.s).GetContext(ctx, &sum, `SELECT COALESCE(sum(amount), 0) FROM operations WHERE order_id = $1`, o.ID); err != nil {
			t.Fatal(err)
		}
		if sum != 8000 {
			t.Errorf("operations total %d, want 8000 (two of four 40.00 refunds on 100.00)", sum)
		}
	})
}

func TestVerify_FindsBrokenLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "k", 100)
	f.walk(t, run.ID)
	if problems, err := f.s.Verify(ctx); err != nil || len(problems) != 0 {
		t.Fatalf("verify of a clean database = %v, %v; want nothing", problems, err)
	}
	if _, err := storetest.DB(t, f.s).ExecContext(ctx, `DELETE FROM run_events WHERE run_id = $1 AND seq = 3`, run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := storetest.DB(t, f.s).ExecContext(ctx, `DELETE FROM final_messages WHERE run_id = $1`, run.ID); err != nil {
		t.Fatal(err)
	}
	problems, err := f.s.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(problems, "\n")
	for _, want := range []string{"contiguous seqs", "final message"} {
		if !strings.Contains(joined, want) {
			t.Errorf("verify = %q, want a %q violation", joined, want)
		}
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
