package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// TestSnapshotHead_ReadsOnlyTheMarks: a resuming stream's snapshot head
// reads the events that say who decided, through their partial index, not
// the whole log: on a run with 500 narration events the plan uses the
// index, and the head holds the marks and no events.
func TestSnapshotHead_ReadsOnlyTheMarks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "marks", 1)
	evs := make([]store.NewEvent, 500)
	for i := range evs {
		evs[i] = store.EventOf(store.NarrationDelta{Text: "word "})
	}
	if _, err := f.s.Append(ctx, run.ID, evs...); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Append(ctx, run.ID, store.EventOf(store.CancelRequested{DecidedBy: store.DecidedBy{By: store.DeciderRef{UserID: f.customer.ID}}})); err != nil {
		t.Fatal(err)
	}
	db := storetest.DB(t, f.s)
	if _, err := db.ExecContext(ctx, `ANALYZE run_events`); err != nil {
		t.Fatal(err)
	}
	var plan []string
	if err := db.SelectContext(ctx, &plan, `EXPLAIN `+store.MarksSQL, run.ID, 1000); err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(plan, "\n"); !strings.Contains(p, "run_events_marks_idx") {
		t.Errorf("the marks query does not use run_events_marks_idx:\n%s", p)
	}
	head, err := f.s.SnapshotHead(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(head.Events) != 0 || len(head.Marks) != 1 || head.Marks[0].Type != store.EventCancelRequested {
		t.Errorf("head: %d events, marks %+v; want none and the one cancel", len(head.Events), head.Marks)
	}
}

// TestSnapshot_StateSinceIsTheStateEvent: while a run waits (for an
// approver, for the provider, for a verification), both snapshots say when
// the event that set its state committed, whatever came after it, so a
// page's step timer starts at the step, not at the last word; a run that
// waits on no one has none.
func TestSnapshot_StateSinceIsTheStateEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "since", 1)
	var op *store.Operation
	for _, step := range []struct {
		state, event string
		do           func() error
	}{
		{store.StatePlanning, "", func() error {
			_, err := f.s.Transition(ctx, run.ID, store.StateCreated, store.StatePlanning, store.EventOf(store.RunPlanning{}))
			return err
		}},
		{store.StateAwaitingApproval, store.EventApprovalRequested, func() error {
			_, err := f.s.RequestApproval(ctx, run.ID, store.ActionProposed{Action: "refund", Amount: 1, Currency: "EUR"})
			return err
		}},
		{store.StateSubmitting, store.EventApprovalGranted, func() error {
			_, err := f.s.Approve(ctx, run.ID, f.approver.ID, "")
			return err
		}},
		{store.StateSubmitting, store.EventOperationSubmitted, func() (err error) {
			op, err = f.s.SubmitOperation(ctx, run.ID)
			return err
		}},
		{store.StateReconciling, store.EventOperationReconciling, func() error {
			_, err := f.s.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpReconciling, Reason: "timeout"})
			return err
		}},
	} {
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		// Words after the state change do not move its start.
		if _, err := f.s.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{Text: "later "})); err != nil {
			t.Fatal(err)
		}
		checkStateSince(t, f.s, run.ID, step.state, step.event)
	}
}

// checkStateSince: both snapshots of the run, in state, start its step at
// the latest event of type event (none for "").
func checkStateSince(t *testing.T, s *store.Store, runID uuid.UUID, state, event string) {
	t.Helper()
	ctx := context.Background()
	full, err := s.Snapshot(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	var want time.Time
	for _, ev := range full.Events {
		if ev.Type == event {
			want = ev.CreatedAt
		}
	}
	head, err := s.SnapshotHead(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	for name, snap := range map[string]*store.Snapshot{"snapshot": full, "head": head} {
		if snap.Run.State != state || !snap.StateSince.Equal(want) || (event != "" && want.IsZero()) {
			t.Errorf("%s in %s: state since %v, want %s's %v", name, snap.Run.State, snap.StateSince, event, want)
		}
	}
}

// TestSnapshotFamily_ChildTimedAsItsOwnPage: a family's child and the
// child's own snapshot start its step at the same moment at every step (a
// near-copy of the rule timed a child being verified from its operation's
// last change, so its card and its page disagreed).
func TestSnapshotFamily_ChildTimedAsItsOwnPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	fam, _ := f.family(t, "since-family")
	child := fam.Children[0].ID
	var op *store.Operation
	for _, step := range []func() error{
		func() error {
			_, err := f.s.Transition(ctx, child, store.StateCreated, store.StatePlanning, store.EventOf(store.RunPlanning{}))
			return err
		},
		func() error {
			_, err := f.s.RequestApproval(ctx, child, store.ActionProposed{Action: "refund", Amount: 1, Currency: "EUR"})
			return err
		},
		func() error { _, err := f.s.Approve(ctx, child, f.approver.ID, ""); return err },
		func() (err error) { op, err = f.s.SubmitOperation(ctx, child); return err },
		func() error {
			_, err := f.s.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpReconciling, Reason: "timeout"})
			return err
		},
		func() error {
			// A later change of the operation does not move the step.
			_, err := f.s.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpReconciling, Reason: "still no answer"})
			return err
		},
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
		own, err := f.s.Snapshot(ctx, child)
		if err != nil {
			t.Fatal(err)
		}
		fs, err := f.s.SnapshotFamily(ctx, fam.Parent.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := fs.Children[0].StateSince; !got.Equal(own.StateSince) {
			t.Errorf("in %s: the family's child since %v, its own snapshot %v", own.Run.State, got, own.StateSince)
		}
	}
}
