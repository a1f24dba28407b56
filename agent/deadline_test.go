package agent_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// deadlineWorkers starts two workers (two processes, as far as the
// database can tell) that give approvers window to decide. Their poll is a
// minute: only the deadline itself can wake them in time.
func (e *env) deadlineWorkers(window time.Duration) {
	e.t.Helper()
	for _, id := range []string{"worker-a", "worker-b"} {
		e.executor(agent.Config{WorkerID: id, ApprovalDeadline: window, Poll: time.Minute}, nil)
	}
}

// approval reads the run's approval request.
func (e *env) approval(runID uuid.UUID) store.Approval {
	e.t.Helper()
	var a store.Approval
	if err := e.db.Get(&a, `SELECT id, run_id, requested_at, decision, decided_by, decided_at, deadline
        FROM approvals WHERE run_id = $1`, runID); err != nil {
		e.t.Fatal(err)
	}
	return a
}

func (e *env) finishedAt(runID uuid.UUID) time.Time {
	e.t.Helper()
	var at sql.NullTime
	if err := e.db.Get(&at, `SELECT finished_at FROM runs WHERE id = $1`, runID); err != nil || !at.Valid {
		e.t.Fatalf("finished_at of %s: %v, %v", runID, at, err)
	}
	return at.Time
}

// TestExecutor_DeadlineEndsTheDecisionOnTime: a run nobody decides ends
// canceled by the system when its deadline passes, woken by the deadline
// (not the minute-long poll), once although two workers watch it, in words
// that say nothing was refunded and why; an approve and a cancel after it
// are refused with the state it left.
func TestExecutor_DeadlineEndsTheDecisionOnTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	const window = 2 * time.Second
	e.deadlineWorkers(window)
	run := e.start(700)
	e.waitState(run.ID, store.StateAwaitingApproval)
	asked := e.approval(run.ID)
	if !asked.Deadline.Valid || asked.Deadline.Time.Sub(asked.RequestedAt) != window {
		t.Fatalf("deadline = %v, asked at %v; want %v later", asked.Deadline, asked.RequestedAt, window)
	}

	e.waitState(run.ID, store.StateCanceled)
	if late := e.finishedAt(run.ID).Sub(asked.Deadline.Time); late < 0 || late > time.Second {
		t.Errorf("expired %v after the deadline, want within a second (the deadline wakes the workers, not their poll)", late)
	}
	types := e.types(run.ID)
	if got, want := types[len(types)-3:], []string{store.EventApprovalExpired, store.EventMessageFinal, store.EventRunCanceled}; !slices.Equal(got, want) {
		t.Errorf("log ends %v, want %v", got, want)
	}
	if n := countOf(types, store.EventApprovalExpired); n != 1 {
		t.Errorf("approval.expired events = %d, want 1", n)
	}
	snap, err := e.s.Snapshot(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := snap.FinalMessage.Body, "No approver decided within 2 seconds, so the system canceled this refund request. Nothing was refunded and no money moved."; got != want {
		t.Errorf("final message = %q, want %q", got, want)
	}
	if a := e.approval(run.ID); a.Decision.String != store.DecidedExpired || a.DecidedBy.Valid {
		t.Errorf("approval = %+v, want expired, decided by no one", a)
	}
	e.wantWordsForEveryReader(run.ID)

	d, err := e.s.Approve(context.Background(), run.ID, e.approver.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != store.DecisionNotAllowed || store.ErrorCode(d.Why) != store.CodeConflict || d.Run.State != store.StateCanceled {
		t.Errorf("approve after the deadline = %+v (%v), want a conflict with the state canceled", d, d.Why)
	}
	d, err = e.s.RequestCancel(context.Background(), run.ID, e.customer.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != store.DecisionRunFinished || d.Run.State != store.StateCanceled {
		t.Errorf("cancel after the deadline = %+v, want the run finished, canceled", d)
	}
	if l := e.ledger(); len(l) != 0 {
		t.Errorf("provider ledger = %+v, want nothing", l)
	}
	e.verify()
}

func countOf(types []string, typ string) int {
	n := 0
	for _, x := range types {
		if x == typ {
			n++
		}
	}
	return n
}

// TestExecutor_ChildExpiresAlone: in a request for several refunds, each
// child's decision has its own deadline: the one approved in time is
// refunded, the one nobody decided ends canceled by the system with its
// child.finished committed in the parent's log with it, and the request
// ends as its children did: completed when one refunded, canceled when
// every child expired.
func TestExecutor_ChildExpiresAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	ctx := context.Background()
	family := func() *store.Family {
		t.Helper()
		var refunds []store.RefundItem
		for range 2 {
			o, err := e.s.CreateOrder(ctx, e.customer.ID, "Lamp", 900, "EUR")
			if err != nil {
				t.Fatal(err)
			}
			refunds = append(refunds, store.RefundItem{OrderID: o.ID, Amount: 400})
		}
		fam, _, err := e.s.StartFamily(ctx, store.FamilyRequest{OwnerID: e.customer.ID, ClientRequestID: uuid.NewString(),
			Refunds: refunds, Reason: "both arrived broken"})
		if err != nil {
			t.Fatal(err)
		}
		return fam
	}
	partly, none := family(), family()
	e.deadlineWorkers(3 * time.Second)
	for _, fam := range []*store.Family{partly, none} {
		for _, c := range fam.Children {
			e.waitState(c.ID, store.StateAwaitingApproval)
		}
	}
	if d, err := e.s.Approve(ctx, partly.Children[0].ID, e.approver.ID, ""); err != nil || d.Outcome != store.DecisionAccepted {
		t.Fatalf("approve in time = %+v, %v", d, err)
	}

	e.waitState(partly.Children[0].ID, store.StateCompleted)
	e.waitState(partly.Children[1].ID, store.StateCanceled)
	e.waitState(partly.Parent.ID, store.StateCompleted)
	for _, c := range none.Children {
		e.waitState(c.ID, store.StateCanceled)
	}
	e.waitState(none.Parent.ID, store.StateCanceled)

	for _, c := range []store.Run{partly.Children[1], none.Children[0], none.Children[1]} {
		if n := countOf(e.types(c.ID), store.EventApprovalExpired); n != 1 {
			t.Errorf("child %d: approval.expired events = %d, want 1", c.Position, n)
		}
		// One transaction, one now(): the child's end and its parent's
		// child.finished carry the same moment.
		var same bool
		if err := e.db.Get(&same, `SELECT (SELECT created_at FROM run_events WHERE run_id = $1 AND type = 'run.canceled') =
            (SELECT created_at FROM run_events WHERE run_id = $2 AND type = 'child.finished' AND payload->>'child_run_id' = $1::text)`,
			c.ID, c.ParentRunID.UUID); err != nil || !same {
			t.Errorf("child %d: run.canceled and its child.finished committed apart (%v)", c.Position, err)
		}
	}
	for _, fam := range []*store.Family{partly, none} {
		snap, err := e.s.Snapshot(ctx, fam.Parent.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("order #%d canceled (no approver decided in time)", fam.Children[1].OrderID); !strings.Contains(snap.FinalMessage.Body, want) {
			t.Errorf("request's final answer %q does not say %q", snap.FinalMessage.Body, want)
		}
	}
	if n := countOf(e.types(partly.Children[0].ID), store.EventApprovalExpired); n != 0 {
		t.Errorf("the child approved in time has %d approval.expired events", n)
	}
	if l := e.ledger(); len(l) != 1 || l[0].Amount != 400 {
		t.Errorf("provider ledger = %+v, want the one refund approved in time", l)
	}
	e.verify()
}
