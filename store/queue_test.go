package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

func (f *fixture) queued(t *testing.T, key string, amount int64) *store.Run {
	t.Helper()
	r := f.start(t, key, amount)
	proposal := store.ActionProposed{Action: "refund", OrderID: f.order.ID, Amount: amount, Currency: f.order.Currency}
	r, err := f.s.RequestApproval(context.Background(), r.ID, proposal)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func queueIDs(p *store.QueuePage) []uuid.UUID {
	var ids []uuid.UUID
	for _, it := range p.Items {
		ids = append(ids, it.ID)
	}
	return ids
}

func mustQueue(t *testing.T, s *store.Store, after store.QueuePlace, limit int) *store.QueuePage {
	t.Helper()
	p, err := s.ApprovalQueue(context.Background(), after, limit)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestApprovalQueue_FollowsRuns: a run joins the queue when it asks for a
// decision and leaves it when approved or when a cancel is asked for; each
// change is one queue version, and nothing else moves the version.
func TestApprovalQueue_FollowsRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	l := store.NewListener(f.s.URL(), testLogger(t))
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	wake, unsubscribe := l.Subscribe(store.Queue)
	defer unsubscribe()

	a, b, c := f.queued(t, "a", 100), f.queued(t, "b", 200), f.queued(t, "c", 300)
	f.start(t, "not-queued", 100)
	p := mustQueue(t, f.s, store.QueuePlace{}, 2)
	if got := queueIDs(p); p.Version != 3 || p.Total != 3 || p.Before != 0 || !p.More || len(got) != 2 || got[0] != a.ID || got[1] != b.ID {
		t.Fatalf("first page = version %d, total %d, before %d, more %v, %v; want 3, 3, 0, true, [a b]", p.Version, p.Total, p.Before, p.More, got)
	}
	next := mustQueue(t, f.s, p.Items[1].Place(), 2)
	if got := queueIDs(next); next.Before != 2 || next.More || len(got) != 1 || got[0] != c.ID {
		t.Fatalf("second page = before %d, more %v, %v; want 2, false, [c]", next.Before, next.More, got)
	}
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("no queue wake-up after runs joined the queue")
	}

	// Narration and other appends are no queue change.
	if _, err := f.s.Append(ctx, a.ID, store.EventOf(store.NarrationDelta{Text: "hi"})); err != nil {
		t.Fatal(err)
	}
	if v := mustQueue(t, f.s, store.QueuePlace{}, 10).Version; v != 3 {
		t.Errorf("version after narration = %d, want 3", v)
	}

	if d, err := f.s.Approve(ctx, a.ID, f.approver.ID, ""); err != nil || d.Outcome != store.DecisionAccepted {
		t.Fatalf("approve: %v, %v", d.Outcome, err)
	}
	if d, err := f.s.RequestCancel(ctx, b.ID, f.customer.ID); err != nil || d.Outcome != store.DecisionAccepted {
		t.Fatalf("cancel: %v, %v", d.Outcome, err)
	}
	// A repeat changes nothing.
	if _, err := f.s.Approve(ctx, a.ID, f.approver.ID, ""); err != nil {
		t.Fatal(err)
	}
	p = mustQueue(t, f.s, store.QueuePlace{}, 10)
	if got := queueIDs(p); p.Version != 5 || p.Total != 1 || len(got) != 1 || got[0] != c.ID {
		t.Errorf("queue = version %d, total %d, %v; want 5, 1, [c]", p.Version, p.Total, got)
	}
	if got := count(t, f.s, `SELECT count(*) FROM queue_entries`); got != 1 {
		t.Errorf("queue_entries rows = %d, want 1", got)
	}
}

// TestApprovalQueue_Facts: an item carries what an approver checks the
// request against: the order, the agent's proposal, and the order's other
// refunds.
func TestApprovalQueue_Facts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.start(t, "earlier", 3000)
	r := f.queued(t, "q", 6000)
	p := mustQueue(t, f.s, store.QueuePlace{}, 10)
	if len(p.Items) != 1 {
		t.Fatalf("items = %d, want 1", len(p.Items))
	}
	it := p.Items[0]
	if it.ID != r.ID || it.CustomerEmail != f.customer.Email || it.Item != f.order.Description || it.Proposal == nil || it.Proposal.Amount != 6000 {
		t.Errorf("item = %+v", it)
	}
	if it.OrderAmount != f.order.Amount || it.OrderCurrency != f.order.Currency {
		t.Errorf("order = %d %s, want %d %s", it.OrderAmount, it.OrderCurrency, f.order.Amount, f.order.Currency)
	}
	if got, want := [2]int64{it.OtherRefunds, int64(it.OtherRuns)}, [2]int64{3000, 1}; got != want {
		t.Errorf("other refunds, runs = %v, want %v", got, want)
	}
}
