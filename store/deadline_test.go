package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// queuedWithin is a run of amount that asks for a decision within window
// (0: with no deadline).
func (f *fixture) queuedWithin(t *testing.T, key string, amount int64, window time.Duration) *store.Run {
	t.Helper()
	r := f.start(t, key, amount)
	proposal := store.ActionProposed{Action: "refund", OrderID: f.order.ID, Amount: amount, Currency: f.order.Currency}
	r, err := f.s.RequestApprovalWithin(context.Background(), r.ID, proposal, window)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestApprovalQueue_OrdersByDeadline: the queue lists the soonest due
// first, runs without a deadline last, and its pages follow that order:
// the second page starts after the first page's last place, and says how
// many come before it.
func TestApprovalQueue_OrdersByDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	late := f.queuedWithin(t, "late", 1, 10*time.Hour)
	none := f.queuedWithin(t, "none", 1, 0)
	soon := f.queuedWithin(t, "soon", 1, time.Hour)
	mid := f.queuedWithin(t, "mid", 1, 5*time.Hour)
	alsoNone := f.queuedWithin(t, "also-none", 1, 0)

	all := mustQueue(t, f.s, store.QueuePlace{}, 10)
	if got, want := queueIDs(all), []uuid.UUID{soon.ID, mid.ID, late.ID, none.ID, alsoNone.ID}; !slices.Equal(got, want) {
		t.Errorf("queue = %v, want soon, mid, late, then the two without a deadline in the order they asked: %v", got, want)
	}
	first := mustQueue(t, f.s, store.QueuePlace{}, 2)
	second := mustQueue(t, f.s, first.Items[1].Place(), 2)
	third := mustQueue(t, f.s, second.Items[1].Place(), 2)
	if got, want := [][]uuid.UUID{queueIDs(first), queueIDs(second), queueIDs(third)},
		[][]uuid.UUID{{soon.ID, mid.ID}, {late.ID, none.ID}, {alsoNone.ID}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("pages = %v, want %v", got, want)
	}
	if second.Before != 2 || third.Before != 4 || !second.More || third.More {
		t.Errorf("second page before %d more %v, third before %d more %v; want 2 true, 4 false", second.Before, second.More, third.Before, third.More)
	}
	// A place survives its link.
	for _, it := range all.Items {
		p, err := store.ParseQueuePlace(it.Place().String())
		if err != nil || p.Version != it.Version || !p.Deadline.Equal(it.Deadline.Time) {
			t.Errorf("place %q read back as %+v, %v; want %+v", it.Place(), p, err, it.Place())
		}
	}
}

func TestParseQueuePlace_Refuses(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"x", "-3", "+7", "007", "0.5", "3.", "3.x", "3.1.2", ".5"} {
		if p, err := store.ParseQueuePlace(raw); err == nil {
			t.Errorf("ParseQueuePlace(%q) = %+v, want an error", raw, p)
		}
	}
	if p, err := store.ParseQueuePlace(" "); err != nil || p != (store.QueuePlace{}) {
		t.Errorf("ParseQueuePlace(blank) = %+v, %v; want the start", p, err)
	}
}

// TestExpireApproval_OnlyPastTheDeadline: before its deadline a decision
// is left to people; a run with no deadline, or whose cancel was asked for
// in time, never expires; past it the run ends canceled by the system,
// once, and leaves the queue. A cancel that comes after the deadline finds
// the run ended so, as an approval does.
func TestExpireApproval_OnlyPastTheDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	db := storetest.DB(t, f.s)
	ahead := f.queuedWithin(t, "ahead", 1, time.Hour)
	none := f.queuedWithin(t, "none", 1, 0)
	canceled := f.queuedWithin(t, "canceled in time", 1, time.Hour)
	if d, err := f.s.RequestCancel(ctx, canceled.ID, f.customer.ID); err != nil || d.Outcome != store.DecisionAccepted {
		t.Fatalf("cancel in time = %+v, %v", d, err)
	}
	if _, err := db.Exec(`UPDATE approvals SET deadline = requested_at WHERE run_id = $1`, canceled.ID); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*store.Run{ahead, none, canceled} {
		if expired, err := f.s.ExpireApproval(ctx, r.ID); err != nil || expired {
			t.Errorf("ExpireApproval(%s) = %v, %v; want nothing done", r.ClientRequestID, expired, err)
		}
	}

	past := f.queuedWithin(t, "past", 1, time.Microsecond)
	expired, err := f.s.ExpireApproval(ctx, past.ID)
	if err != nil || !expired {
		t.Fatalf("ExpireApproval(past) = %v, %v; want it expired", expired, err)
	}
	if again, err := f.s.ExpireApproval(ctx, past.ID); err != nil || again {
		t.Errorf("ExpireApproval again = %v, %v; want nothing done", again, err)
	}
	late := f.queuedWithin(t, "cancel too late", 1, time.Microsecond)
	d, err := f.s.RequestCancel(ctx, late.ID, f.customer.ID)
	if err != nil || d.Outcome != store.DecisionRunFinished || d.Run.State != store.StateCanceled {
		t.Errorf("cancel after the deadline = %+v, %v; want the run finished, canceled", d, err)
	}
	for _, r := range []*store.Run{past, late} {
		if n := count(t, f.s, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'approval.expired'`, r.ID); n != 1 {
			t.Errorf("%s: approval.expired events = %d, want 1", r.ClientRequestID, n)
		}
		if n := count(t, f.s, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'cancel.requested'`, r.ID); n != 0 {
			t.Errorf("%s: cancel.requested events = %d, want none", r.ClientRequestID, n)
		}
	}
	p := mustQueue(t, f.s, store.QueuePlace{}, 10)
	if got, want := queueIDs(p), []uuid.UUID{ahead.ID, none.ID}; !slices.Equal(got, want) {
		t.Errorf("queue = %v, want the two still waiting %v", got, want)
	}
}

// TestVerify_DecisionsEndOneWay: verify finds a run whose decision both
// expired and was granted.
func TestVerify_DecisionsEndOneWay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.queuedWithin(t, "expired", 1, time.Microsecond)
	if expired, err := f.s.ExpireApproval(ctx, run.ID); err != nil || !expired {
		t.Fatalf("ExpireApproval = %v, %v", expired, err)
	}
	if problems, err := f.s.Verify(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("verify after an expiry: %v, %v", problems, err)
	}
	granted := store.ApprovalGranted{DecidedBy: store.DecidedBy{By: store.DeciderRef{UserID: f.approver.ID}}}
	if _, err := f.s.Append(ctx, run.ID, store.EventOf(granted)); err != nil {
		t.Fatal(err)
	}
	problems, err := f.s.Verify(ctx)
	if err != nil || len(problems) != 1 || !strings.HasPrefix(problems[0], "a decision is approved or expired, never both") {
		t.Errorf("verify = %q, %v; want the decision made twice", problems, err)
	}
}
