package views_test

import (
	"fmt"
	"strings"
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
		}, customer, "Partly refunded (2 of 3)", "Refunded €3.50 of €5.00: two orders refunded, one declined by the payment provider."},
		{"submitted is not refunded", []*store.Progress{
			child(150, store.StateCompleted, op(store.OpSucceeded, 150)),
			child(200, store.StateReconciling, op(store.OpReconciling, 200)),
			child(300, store.StateSubmitting, op(store.OpSubmitted, 300)),
		}, customer, "1 of 3 refunds ended", "Refunded €1.50 of €6.50 so far: one order refunded; still verifying one refund, one being sent to the payment provider."},
		{"all canceled, by whom", []*store.Progress{
			canceledBy(child(100, store.StateCanceled), cat),
			canceledBy(child(100, store.StateCanceled), ann),
		}, customer, "Canceled", "Nothing was refunded: one order canceled by you, one canceled by an approver. No money moved."},
		{"staff read names", []*store.Progress{
			canceledBy(child(100, store.StateCanceled), ann),
			child(100, store.StateAwaitingApproval),
		}, views.Viewer{UserID: supportID, Staff: true}, "1 of 2 refunds ended", "Nothing refunded yet: one order canceled by Ann (approver); one waiting for an approver."},
		{"a cancel too late still refunded", []*store.Progress{
			canceledBy(child(100, store.StateCompleted, op(store.OpSucceeded, 100)), cat),
			child(100, store.StateFailed),
		}, customer, "Partly refunded (1 of 2)", "Refunded €1.00 of €2.00: one order refunded although you asked to cancel (too late), one not refunded: the request could not be carried out."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := views.FamilyWords(parent, "", tc.children, tc.viewer)
			if w.Status != tc.status || w.Outcome != tc.outcome {
				t.Errorf("got %q: %q\nwant %q: %q", w.Status, w.Outcome, tc.status, tc.outcome)
			}
		})
	}
}

// TestFamilyWords_DeclinedIsBad: a request the provider declined (with a
// cancel beside) is not refunded in the bad tone, as the home list shows it,
// not in the neutral tone of a request its customer canceled.
func TestFamilyWords_DeclinedIsBad(t *testing.T) {
	parent := &store.Run{Currency: "EUR"}
	w := views.FamilyWords(parent, "", []*store.Progress{
		child(150, store.StateFailed, op(store.OpFailed, 150)),
		child(100, store.StateCanceled),
	}, views.Viewer{UserID: customerID})
	if w.Status != "Not refunded" || w.Tone != views.ToneBad {
		t.Errorf("got %q in tone %q, want Not refunded in %q", w.Status, w.Tone, views.ToneBad)
	}
}

// TestFamilyStreamEvent: a refund's event redraws the request's words and
// that refund's card, not the others; what the decisions show changes
// (ActionsKey) only when a refund starts or stops waiting for an approver,
// a cancel is asked for, or the last refund ends, and only then are they
// drawn again, so a confirm the viewer has open stays open.
func TestFamilyStreamEvent(t *testing.T) {
	snap := func(state string, amount int64) *store.Snapshot {
		return &store.Snapshot{Run: &store.Run{ID: uuid.New(), OwnerID: customerID, OrderID: 7, State: state, Amount: amount, Currency: "EUR", Kind: store.KindRefund}}
	}
	parent := snap(store.StateCreated, 300)
	parent.Run.Kind = store.KindRequest
	fs := &store.FamilySnapshot{Parent: parent, Children: []*store.Snapshot{snap(store.StateCreated, 100), snap(store.StateCompleted, 200)}}
	f := views.NewFamilyView(fs, true, views.Viewer{UserID: approverID, MayApprove: true, MayCancel: true, Staff: true})
	if f.Cursor() != "0.0.0" || !f.CanCancel() || f.CanApproveAll() {
		t.Fatalf("cursor %q, cancel %v, approve all %v; want 0.0.0, true, false", f.Cursor(), f.CanCancel(), f.CanApproveAll())
	}
	key := f.ActionsKey()
	tests := []struct {
		name     string
		state    string // the first child's, now
		changed  bool
		approves string // the approve-all's question, "" for none
	}{
		{"a child's step", store.StatePlanning, false, ""},
		{"a child waits for an approver", store.StateAwaitingApproval, true, "Approve the refund of €1.00 for order #7?"},
		{"the last child's end", store.StateCanceled, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.Runs[1].State = tc.state
			now := f.ActionsKey()
			if changed := now != key; changed != tc.changed {
				t.Errorf("actions changed: %v, want %v", changed, tc.changed)
			}
			key = now
			doc := render(t, views.FamilyStreamEvent(f, 1, tc.changed))
			var cards []string
			doc.Find(".child").Each(func(_ int, s *goquery.Selection) { cards = append(cards, s.AttrOr("id", "")) })
			if fmt.Sprint(cards) != "[child-1]" {
				t.Errorf("cards %v, want child-1's only", cards)
			}
			if got := doc.Find("#run-actions").Length() == 1; got != tc.changed {
				t.Errorf("actions drawn: %v, want %v", got, tc.changed)
			}
			if got := doc.Find("#approve-details form p").Text(); !strings.HasPrefix(got, tc.approves) || (tc.approves == "") != (got == "") {
				t.Errorf("approve all asks %q, want %q", got, tc.approves)
			}
			if doc.Find("#run-status[hx-swap-oob]").Length() != 1 {
				t.Error("the request's words are not drawn again")
			}
		})
	}
}

// TestEventText_ChildFinishedAsItsPageSays: a request's timeline names how
// each refund ended with the word its own page uses: a declined one read
// "ended failed: nothing refunded" where its page said "Declined".
func TestEventText_ChildFinishedAsItsPageSays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		payload map[string]any
		want    string
	}{
		{map[string]any{"order_id": 3, "state": "failed", "outcome": "declined", "refunded": 0, "currency": "EUR"},
			"The refund for order #3 ended: Declined, nothing refunded"},
		{map[string]any{"order_id": 4, "state": "completed", "outcome": "cancel_too_late", "refunded": 150, "currency": "EUR"},
			"The refund for order #4 ended: Refunded, €1.50"},
		{map[string]any{"order_id": 5, "state": "canceled", "refunded": 0, "currency": "EUR"},
			"The refund for order #5 ended: Canceled, nothing refunded"},
	} {
		if got := views.EventText(ev(9, store.EventChildFinished, tc.payload)); got != tc.want {
			t.Errorf("EventText = %q, want %q", got, tc.want)
		}
	}
}
