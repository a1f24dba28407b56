package views_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// endedRun is a snapshot of a run of one order that ended in state, as
// the planner reads it.
func endedRun(state string, answer store.Answer, ops ...store.Operation) *store.Snapshot {
	run := &store.Run{ID: uuid.New(), OwnerID: customerID, OrderID: 7, Amount: 500, Currency: "EUR", Reason: "arrived <broken>", State: state}
	return &store.Snapshot{Run: run, Operations: ops, FinalMessage: &store.FinalMessage{Body: answer.Body, In: answer.In}}
}

// TestEndedEmail_SaysWhatThePageSays: the email's words are the page's
// (Words, for its owner), in the page's order, and the link.
func TestEndedEmail_SaysWhatThePageSays(t *testing.T) {
	refunded := store.Operation{ID: uuid.New(), State: store.OpSucceeded, Amount: 500, Currency: "EUR", ProviderRef: sql.NullString{String: "re_1", Valid: true}}
	tests := []struct {
		name    string
		snap    *store.Snapshot
		subject string
	}{
		{"refunded", endedRun(store.StateCompleted, views.Answers{}.Refunded(500, "EUR", "re_1", false), refunded), "Your refund of €5.00 for order #7: Refunded"},
		{"canceled", endedRun(store.StateCanceled, views.Answers{}.Canceled(false)), "Your refund of €5.00 for order #7: Canceled"},
		{"not carried out", endedRun(store.StateFailed, views.Answers{}.OrderMissing()), "Your refund of €5.00 for order #7: Failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := views.NewRunView(tt.snap, false, views.Viewer{UserID: customerID})
			e := views.EndedEmail(v, "https://r.example/runs/x")
			if e.Subject != tt.subject {
				t.Errorf("subject = %q, want %q", e.Subject, tt.subject)
			}
			w := v.Words()
			at := 0
			for _, line := range []string{w.Outcome, w.Answer, w.Actor, w.Reason, w.Detail, "“arrived <broken>”", "https://r.example/runs/x"} {
				if line == "" {
					continue
				}
				i := strings.Index(e.Body[at:], line)
				if i < 0 {
					t.Fatalf("body lacks %q after byte %d:\n%s", line, at, e.Body)
				}
				at += i + len(line)
			}
		})
	}
}

// TestRequestEndedEmail_OneForTheRequest: the request's words
// (FamilyWords), not any one refund's.
func TestRequestEndedEmail_OneForTheRequest(t *testing.T) {
	parent := &store.Run{ID: uuid.New(), OwnerID: customerID, Kind: store.KindRequest, Currency: "EUR", Reason: "both broken", State: store.StateCompleted}
	kid := func(amount int64, state string, ops ...store.Operation) *store.Snapshot {
		return &store.Snapshot{Run: &store.Run{ID: uuid.New(), OwnerID: customerID, Amount: amount, Currency: "EUR", State: state}, Operations: ops}
	}
	fs := &store.FamilySnapshot{
		Parent: &store.Snapshot{Run: parent, FinalMessage: &store.FinalMessage{Body: "Refunded €1.50 of €3.50."}},
		Children: []*store.Snapshot{
			kid(150, store.StateCompleted, op(store.OpSucceeded, 150)),
			kid(200, store.StateFailed, op(store.OpFailed, 200)),
		},
	}
	f := views.NewFamilyView(fs, false, views.Viewer{UserID: customerID})
	e := views.RequestEndedEmail(f, "https://r.example/runs/p")
	w := f.Words()
	if want := "Your refund request for two orders: " + w.Status; e.Subject != want {
		t.Errorf("subject = %q, want %q", e.Subject, want)
	}
	for _, line := range []string{w.Outcome, w.Answer, "“both broken”", "https://r.example/runs/p"} {
		if !strings.Contains(e.Body, line) {
			t.Errorf("body lacks %q:\n%s", line, e.Body)
		}
	}
}

// TestWaitingEmail_ToAnApprover: the status, the refund, the deadline's
// sentence as the page words it, the link.
func TestWaitingEmail_ToAnApprover(t *testing.T) {
	deadline := time.Date(2026, 12, 4, 14, 5, 0, 0, time.UTC)
	snap := endedRun(store.StateAwaitingApproval, store.Answer{})
	snap.FinalMessage = nil
	snap.Approval = &store.Approval{RunID: snap.Run.ID, Deadline: sql.NullTime{Time: deadline, Valid: true}}
	v := views.NewRunView(snap, false, views.Viewer{UserID: approverID, Staff: true, MayApprove: true})
	e := views.WaitingEmail(v, "https://r.example/runs/x")
	if want := "A refund of €5.00 for order #7 waits for your decision"; e.Subject != want {
		t.Errorf("subject = %q, want %q", e.Subject, want)
	}
	for _, line := range []string{v.Words().Status, views.DecideByLead + "4 Dec 2026, 14:05 UTC" + views.DecideByTail, "https://r.example/runs/x"} {
		if !strings.Contains(e.Body, line) {
			t.Errorf("body lacks %q:\n%s", line, e.Body)
		}
	}
}
