package store_test

import (
	"context"
	"strings"
	"testing"

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

// TestSnapshot_StateSinceIsTheStateEvent: both snapshots say when the
// event that set the run's state committed, however much narration came
// after it, so a page's step timer starts at the step, not at the last word.
func TestSnapshot_StateSinceIsTheStateEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "since", 1)
	if _, err := f.s.Transition(ctx, run.ID, store.StateCreated, store.StatePlanning, store.EventOf(store.RunPlanning{})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{Text: "later "}), store.EventOf(store.NarrationDelta{Text: "words"})); err != nil {
		t.Fatal(err)
	}
	full, err := f.s.Snapshot(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var planning store.Event
	for _, ev := range full.Events {
		if ev.Type == store.EventRunPlanning {
			planning = ev
		}
	}
	head, err := f.s.SnapshotHead(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for name, snap := range map[string]*store.Snapshot{"snapshot": full, "head": head} {
		if !snap.StateSince.Equal(planning.CreatedAt) {
			t.Errorf("%s: state since %v, want run.planning's %v", name, snap.StateSince, planning.CreatedAt)
		}
	}
}
