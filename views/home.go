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

// refundOf names a run in a list, in l: what, for which item, then its
// state.
func refundOf(r store.RunListing, l Lang) string {
	amount := l.Money(r.Amount, r.Currency)
	if r.IsParent() {
		return countIn(l, "home.refunds_of", r.Children, map[string]any{"Amount": amount})
	}
	return l.T("home.refund_of", map[string]any{"Amount": amount, "Item": r.Item})
}

// orderOf is a listed run's order, or its orders' count for a request, in l.
func orderOf(r store.RunListing, l Lang) string {
	if r.IsParent() {
		return countIn(l, "list.orders", r.Children)
	}
	return l.T("family.order", map[string]any{"Order": r.OrderID})
}

// roleName is a role as the page names it, in l.
func roleName(role string, l Lang) string {
	switch role {
	case store.RoleCustomer, store.RoleApprover, store.RoleSupport, store.RoleAdmin:
		return l.T("home.role." + role)
	}
	return role
}
