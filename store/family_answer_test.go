package store

import "testing"

// TestRequestAnswer_SumsAndEachOrder: a request's final answer says what
// the provider refunded of what was asked and each order's end, and quotes
// no child's own answer (each child's page and card show that).
func TestRequestAnswer_SumsAndEachOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kids []childEnd
		want string
	}{
		{"partly refunded", []childEnd{
			{OrderID: 1, State: StateCompleted, Amount: 1000, Refunded: 1000},
			{OrderID: 2, State: StateCompleted, Amount: 750, Refunded: 750},
			{OrderID: 3, State: StateFailed, Amount: 500, Declined: true},
		}, "Refunded €17.50 of €22.50: order #1 refunded €10.00, order #2 refunded €7.50, order #3 declined by the payment provider."},
		{"nothing refunded", []childEnd{
			{OrderID: 4, State: StateCanceled, Amount: 100},
			{OrderID: 5, State: StateFailed, Amount: 200},
		}, "Nothing was refunded of €3.00 asked; no money moved: order #4 canceled, order #5 not refunded."},
		{"one expired", []childEnd{
			{OrderID: 6, State: StateCompleted, Amount: 100, Refunded: 100},
			{OrderID: 7, State: StateCanceled, Amount: 200, Expired: true},
		}, "Refunded €1.00 of €3.00: order #6 refunded €1.00, order #7 canceled (no approver decided in time)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := requestAnswer(tc.kids, "EUR"); got != tc.want {
				t.Errorf("requestAnswer = %q, want %q", got, tc.want)
			}
		})
	}
}
