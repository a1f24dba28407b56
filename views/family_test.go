package views_test

import (
	"fmt"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// child is a refund of a family as FamilyWords reads it.
func child(amount int64, state string, ops ...store.Operation) *store.Progress {
	run := &store.Run{ID: uuid.New(), OwnerID: customerID, Amount: amount, Currency: "EUR"}
	return &store.Progress{Run: run, State: state, Operations: ops}
}

func op(state string, amount int64) store.Operation {
	return store.Operation{ID: uuid.New(), State: state, Amount: amount, Currency: "EUR"}
}

func canceledBy(p *store.Progress, d *store.Decider) *store.Progress {
	p.CancelRequested, p.CanceledBy = true, d
	return p
}

// TestFamilyWords: a request's words come from its refunds: only what the
// provider confirmed is refunded, an unknown result is being verified, and
// each ending names who acted in the viewer's words.
func TestFamilyWords(t *testing.T) {
	cat := &store.Decider{UserID: customerID, Role: store.RoleCustomer, Name: "Cat"}
	ann := &store.Decider{UserID: approverID, Role: store.RoleApprover, Name: "Ann"}
	parent := &store.Run{Currency: "EUR"}
	customer := views.Viewer{UserID: customerID}
	tests := []struct {
		name     string
		children []*store.Progress
		viewer   views.Viewer
		status   string
		outcome  string
	}{
		{"issue 22's example", []*store.Progress{
			child(150, store.StateCompleted, op(store.OpSucceeded, 150)),
			child(200, store.StateCompleted, op(store.OpSucceeded, 200)),
			child(150, store.StateFailed, op(store.OpFailed, 150)),
		}, customer, "Partly refunded", "Refunded €3.50 of €5.00: two orders refunded, one declined by the payment provider."},
		{"submitted is not refunded", []*store.Progress{
			child(150, store.StateCompleted, op(store.OpSucceeded, 150)),
			child(200, store.StateReconciling, op(store.OpReconciling, 200)),
			child(300, store.StateSubmitting, op(store.OpSubmitted, 300)),
		}, customer, "In progress", "Refunded €1.50 of €6.50 so far: one order refunded; still verifying one refund, one being sent to the payment provider."},
		{"all canceled, by whom", []*store.Progress{
			canceledBy(child(100, store.StateCanceled), cat),
			canceledBy(child(100, store.StateCanceled), ann),
		}, customer, "Canceled", "Nothing was refunded: one order canceled by you, one canceled by an approver. No money moved."},
		{"staff read names", []*store.Progress{
			canceledBy(child(100, store.StateCanceled), ann),
			child(100, store.StateAwaitingApproval),
		}, views.Viewer{UserID: supportID, Staff: true}, "In progress", "Nothing refunded yet: one order canceled by Ann (approver); one waiting for an approver."},
		{"a cancel too late still refunded", []*store.Progress{
			canceledBy(child(100, store.StateCompleted, op(store.OpSucceeded, 100)), cat),
			child(100, store.StateFailed),
		}, customer, "Partly refunded", "Refunded €1.00 of €2.00: one order refunded although you asked to cancel (too late), one not refunded: the request could not be carried out."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := views.FamilyWords(parent, tc.children, tc.viewer)
			if w.Status != tc.status || w.Outcome != tc.outcome {
				t.Errorf("got %q: %q\nwant %q: %q", w.Status, w.Outcome, tc.status, tc.outcome)
			}
		})
	}
}

// TestFamilyStreamEvent: a refund's event redraws the request's words and
// that refund's card, not the others, and leaves the cancel (which a
// viewer may have open) alone until the request's own event or its end.
func TestFamilyStreamEvent(t *testing.T) {
	snap := func(state string, amount int64) *store.Snapshot {
		return &store.Snapshot{Run: &store.Run{ID: uuid.New(), OwnerID: customerID, State: state, Amount: amount, Currency: "EUR", Kind: store.KindRefund}}
	}
	parent := snap(store.StateCreated, 300)
	parent.Run.Kind = store.KindRequest
	fs := &store.FamilySnapshot{Parent: parent, Children: []*store.Snapshot{snap(store.StatePlanning, 100), snap(store.StateCompleted, 200)}}
	f := views.NewFamilyView(fs, true, views.Viewer{UserID: customerID, MayCancel: true})
	if f.Cursor() != "0.0.0" || !f.CanCancel() {
		t.Fatalf("cursor %q, cancel offered %v; want 0.0.0 and true", f.Cursor(), f.CanCancel())
	}
	tests := []struct {
		name    string
		i       int
		state   string // the first child's, before rendering
		cards   []string
		actions bool
	}{
		{"a child's step", 1, store.StateAwaitingApproval, []string{"child-1"}, false},
		{"the request's own event", 0, store.StateAwaitingApproval, nil, true},
		{"the last child's end", 1, store.StateCanceled, []string{"child-1"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.Runs[1].State = tc.state
			doc := render(t, views.FamilyStreamEvent(f, tc.i))
			var cards []string
			doc.Find(".child").Each(func(_ int, s *goquery.Selection) { cards = append(cards, s.AttrOr("id", "")) })
			if fmt.Sprint(cards) != fmt.Sprint(tc.cards) {
				t.Errorf("cards %v, want %v", cards, tc.cards)
			}
			if got := doc.Find("#run-actions").Length() == 1; got != tc.actions {
				t.Errorf("actions drawn: %v, want %v", got, tc.actions)
			}
			if doc.Find("#run-status[hx-swap-oob]").Length() != 1 {
				t.Error("the request's words are not drawn again")
			}
		})
	}
}
