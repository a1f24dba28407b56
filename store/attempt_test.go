package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// TestBeginAttempt_CountsPerStep: each step's attempts are numbered on
// their own, and the fold hides the narration of an abandoned attempt,
// from a full snapshot and from a head.
func TestBeginAttempt_CountsPerStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, uuid.NewString(), 100)
	say := func(text string) {
		t.Helper()
		if _, err := f.s.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{Text: text})); err != nil {
			t.Fatal(err)
		}
	}
	for i, step := range []string{"planning", "planning", "submitting", "planning"} {
		n, err := f.s.BeginAttempt(ctx, run.ID, step)
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{1, 2, 1, 3}[i]; n != want {
			t.Errorf("attempt %d of %s = %d, want %d", i, step, n, want)
		}
		say(step + " words ")
	}
	snap, err := f.s.Snapshot(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	head, err := f.s.SnapshotHead(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	full, fromHead := store.ProgressOf(snap), store.ProgressOf(head)
	if full.RestartSeq == 0 || fromHead.RestartSeq != full.RestartSeq {
		t.Fatalf("restart seq: snapshot %d, head %d; want the same, non-zero", full.RestartSeq, fromHead.RestartSeq)
	}
	var shown []string
	for _, ev := range snap.Events {
		if ev.Type == store.EventNarrationDelta && full.ShowsNarration(ev) {
			shown = append(shown, string(ev.Payload))
		}
	}
	if len(shown) != 1 || !strings.Contains(shown[0], "planning words") {
		t.Errorf("narration shown = %q, want the last attempt's only", shown)
	}
	if _, err := f.s.BeginAttempt(ctx, uuid.New(), "planning"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("attempt on no run: %v, want ErrNotFound", err)
	}
}

// TestDecisions_RecordWhoDecided: an approval and a cancel record the
// person's role, name and reason with the decision, and the fold reads
// them back, from a head snapshot too. A reason too long changes nothing.
func TestDecisions_RecordWhoDecided(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, uuid.NewString(), 100)
	if _, err := f.s.RequestApproval(ctx, run.ID, store.ActionProposed{Amount: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Approve(ctx, run.ID, f.approver.ID, strings.Repeat("x", store.MaxDecisionReasonLen+1)); store.ErrorCode(err) != store.CodeInvalid {
		t.Fatalf("approve with a reason too long: %v, want invalid", err)
	}
	if d, err := f.s.Approve(ctx, run.ID, f.approver.ID, "checked the photos"); err != nil || d.Outcome != store.DecisionAccepted {
		t.Fatalf("approve: %+v, %v", d, err)
	}
	if _, err := f.s.RequestCancel(ctx, run.ID, f.customer.ID); err != nil {
		t.Fatal(err)
	}
	head, err := f.s.SnapshotHead(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	p := store.ProgressOf(head)
	if a := p.ApprovedBy; a == nil || a.UserID != f.approver.ID || a.Role != store.RoleApprover || a.Name != f.approver.Name || a.Reason != "checked the photos" {
		t.Errorf("approved by %+v, want the approver with the reason", a)
	}
	if c := p.CanceledBy; c == nil || c.UserID != f.customer.ID || c.Role != store.RoleCustomer || c.Reason != "" {
		t.Errorf("canceled by %+v, want the customer", c)
	}
	var granted int
	if err := storetest.DB(t, f.s).Get(&granted, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = $2`, run.ID, store.EventApprovalGranted); err != nil || granted != 1 {
		t.Errorf("approval.granted events = %d (%v), want 1: the refused reason changed nothing", granted, err)
	}
}

// TestDeciderOf_OldEvents: events from before roles were recorded still
// name the user, or the policy.
func TestDeciderOf_OldEvents(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	if d := store.DeciderOf(logEvent(t, id, 1, store.EventCancelRequested, map[string]any{"by": 5})); d == nil || d.UserID != 5 || d.Role != "" {
		t.Errorf("old cancel: %+v", d)
	}
	if d := store.DeciderOf(logEvent(t, id, 2, store.EventApprovalGranted, map[string]any{"by": "policy"})); d == nil || !d.System {
		t.Errorf("policy: %+v", d)
	}
	if d := store.DeciderOf(logEvent(t, id, 3, store.EventCancelRequested, map[string]any{})); d != nil {
		t.Errorf("no by: %+v, want nil", d)
	}
}
