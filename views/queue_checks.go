package views

import (
	"github.com/refundd/refundd/store"
)

// queueCheck is one check of a queued request, in the words an approver
// reads.
type queueCheck struct {
	OK   bool
	Text string
}

// queueChecks words the checks of it against its order and the agent's
// proposal in l, from the facts the store read: the amount against what
// was paid, the order's other refunds, and the proposal against the
// request.
func queueChecks(it *store.QueueItem, l Lang) []queueCheck {
	paid := l.Money(it.OrderAmount, it.OrderCurrency)
	amount := l.Money(it.Amount, it.Currency)
	out := []queueCheck{{
		OK:   it.Currency == it.OrderCurrency && it.Amount <= it.OrderAmount,
		Text: l.T("queue.check.paid", map[string]any{"Order": it.OrderID, "Paid": paid, "Amount": amount}),
	}}
	if it.OtherRuns == 0 {
		out = append(out, queueCheck{OK: true, Text: l.T("queue.check.no_other")})
	} else {
		total := it.OtherRefunds + it.Amount
		out = append(out, queueCheck{OK: total <= it.OrderAmount, Text: l.N("queue.check.others", it.OtherRuns, map[string]any{
			"Count": it.OtherRuns, "Others": l.Money(it.OtherRefunds, it.OrderCurrency),
			"Total": l.Money(total, it.OrderCurrency), "Paid": paid})})
	}
	switch p := it.Proposal; {
	case p == nil:
		out = append(out, queueCheck{OK: false, Text: l.T("queue.no_proposal")})
	case p.OrderID == it.OrderID && p.Amount == it.Amount && p.Currency == it.Currency:
		out = append(out, queueCheck{OK: true, Text: l.T("queue.check.proposal_matches")})
	default:
		out = append(out, queueCheck{OK: false, Text: l.T("queue.check.proposal_differs", map[string]any{
			"Proposed": l.Money(p.Amount, p.Currency), "Order": p.OrderID, "Amount": amount})})
	}
	return out
}
