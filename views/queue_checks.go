package views

import (
	"fmt"

	"github.com/refundd/refundd/store"
)

// queueCheck is one check of a queued request, in the words an approver
// reads.
type queueCheck struct {
	OK   bool
	Text string
}

// queueChecks words the checks of it against its order and the agent's
// proposal, from the facts the store read: the amount against what was
// paid, the order's other refunds, and the proposal against the request.
func queueChecks(it *store.QueueItem) []queueCheck {
	paid := store.FormatMoney(it.OrderAmount, it.OrderCurrency)
	out := []queueCheck{{
		OK:   it.Currency == it.OrderCurrency && it.Amount <= it.OrderAmount,
		Text: fmt.Sprintf("Order #%d was paid %s; this refund is %s.", it.OrderID, paid, store.FormatMoney(it.Amount, it.Currency)),
	}}
	if it.OtherRuns == 0 {
		out = append(out, queueCheck{OK: true, Text: "No other refund was asked for on this order."})
	} else {
		total := it.OtherRefunds + it.Amount
		requests := "requests"
		if it.OtherRuns == 1 {
			requests = "request"
		}
		out = append(out, queueCheck{OK: total <= it.OrderAmount, Text: fmt.Sprintf(
			"Other refunds on this order: %s in %d %s; with this one %s of %s paid.",
			store.FormatMoney(it.OtherRefunds, it.OrderCurrency), it.OtherRuns, requests,
			store.FormatMoney(total, it.OrderCurrency), paid)})
	}
	switch p := it.Proposal; {
	case p == nil:
		out = append(out, queueCheck{OK: false, Text: "The agent recorded no proposal."})
	case p.OrderID == it.OrderID && p.Amount == it.Amount && p.Currency == it.Currency:
		out = append(out, queueCheck{OK: true, Text: "The agent's proposal matches the request."})
	default:
		out = append(out, queueCheck{OK: false, Text: fmt.Sprintf("The agent proposes %s on order #%d; the customer asked for %s.",
			store.FormatMoney(p.Amount, p.Currency), p.OrderID, store.FormatMoney(it.Amount, it.Currency))})
	}
	return out
}
