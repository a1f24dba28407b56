package views

import (
	"strconv"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// RunListStreamURL is the customer's run list stream, resuming after the
// list's version.
func RunListStreamURL(version int64) string {
	return "/runs/events?after=" + strconv.FormatInt(version, 10)
}

// ownRunsOrNone is l, or an empty list for a Home that has none.
func ownRunsOrNone(l *store.OwnRuns) *store.OwnRuns {
	if l == nil {
		return &store.OwnRuns{}
	}
	return l
}

// RunRowID is the id of a run's row in the customer's list.
func RunRowID(id uuid.UUID) string { return "run-row-" + id.String() }

// refundOf names a run in a list: what, for which item, then its state.
func refundOf(r store.RunListing) string {
	if r.IsParent() {
		return "Refunds of " + store.FormatMoney(r.Amount, r.Currency) + " in all for " + countOf(r.Children, "order", "orders") + " — "
	}
	return "Refund of " + store.FormatMoney(r.Amount, r.Currency) + " for " + r.Item + " — "
}

// orderOf is a listed run's order, or its orders' count for a request.
func orderOf(r store.RunListing) string {
	if r.IsParent() {
		return countOf(r.Children, "order", "orders")
	}
	return "Order #" + strconv.FormatInt(r.OrderID, 10)
}
