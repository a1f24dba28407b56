package views_test

import (
	"testing"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// TestAnswers_RequestSumsAndEachOrder: a request's final answer says what
// the provider refunded of what was asked and each order's end, and quotes
// no child's own answer (each child's page and card show that).
func TestAnswers_RequestSumsAndEachOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kids []store.ChildEnding
		want string
	}{
		{"partly refunded", []store.ChildEnding{
			{OrderID: 1, State: store.StateCompleted, Amount: 1000, Refunded: 1000},
			{OrderID: 2, State: store.StateCompleted, Amount: 750, Refunded: 750},
			{OrderID: 3, State: store.StateFailed, Amount: 500, Declined: true},
		}, "Refunded €17.50 of €22.50: order #1 refunded €10.00, order #2 refunded €7.50, order #3 declined by the payment provider."},
		{"nothing refunded", []store.ChildEnding{
			{OrderID: 4, State: store.StateCanceled, Amount: 100},
			{OrderID: 5, State: store.StateFailed, Amount: 200},
			{OrderID: 6, State: store.StateCanceled, Amount: 300, Expired: true},
		}, "Nothing was refunded of €6.00 asked; no money moved: order #4 canceled, order #5 not refunded, order #6 canceled (no approver decided in time)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (views.Answers{}).Request(tc.kids, "EUR"); got != tc.want {
				t.Errorf("Request = %q, want %q", got, tc.want)
			}
		})
	}
}
