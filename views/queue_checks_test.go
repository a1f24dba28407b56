package views

import (
	"testing"

	"github.com/refundd/refundd/store"
)

// TestQueueChecks words what the store read about a queued request: the
// approver reads it against its order, the order's other refunds and the
// agent's proposal.
func TestQueueChecks(t *testing.T) {
	t.Parallel()
	item := func() *store.QueueItem {
		it := &store.QueueItem{OrderAmount: 10000, OrderCurrency: "EUR", OtherRefunds: 3000, OtherRuns: 1,
			Proposal: &store.ActionProposed{Action: "refund", OrderID: 7, Amount: 6000, Currency: "EUR"}}
		it.OrderID, it.Amount, it.Currency = 7, 6000, "EUR"
		return it
	}
	t.Run("all hold", func(t *testing.T) {
		t.Parallel()
		checks := queueChecks(item(), English)
		want := []queueCheck{
			{true, "Order #7 was paid €100.00; this refund is €60.00."},
			{true, "Other refunds on this order: €30.00 in 1 request; with this one €90.00 of €100.00 paid."},
			{true, "The agent's proposal matches the request."},
		}
		if len(checks) != len(want) {
			t.Fatalf("checks = %+v, want %+v", checks, want)
		}
		for i := range want {
			if got := checks[i]; got != want[i] {
				t.Errorf("check %d = %+v, want %+v", i, got, want[i])
			}
		}
	})
	t.Run("other refunds exceed what was paid", func(t *testing.T) {
		t.Parallel()
		it := item()
		it.OtherRefunds, it.OtherRuns = 5000, 2
		if c := queueChecks(it, English)[1]; c.OK || c.Text != "Other refunds on this order: €50.00 in 2 requests; with this one €110.00 of €100.00 paid." {
			t.Errorf("other refunds check = %+v", c)
		}
	})
	t.Run("a proposal of another amount", func(t *testing.T) {
		t.Parallel()
		it := item()
		it.Proposal.Amount = 5000
		if c := queueChecks(it, English)[2]; c.OK {
			t.Errorf("a proposal of another amount passes: %+v", c)
		}
	})
	t.Run("no proposal", func(t *testing.T) {
		t.Parallel()
		it := item()
		it.Proposal = nil
		if got, want := queueChecks(it, English)[2], (queueCheck{false, "The agent recorded no proposal."}); got != want {
			t.Errorf("check = %+v, want %+v", got, want)
		}
	})
}
