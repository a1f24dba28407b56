package views_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

func ev(seq int64, typ string, payload any) store.Event {
	p, err := json.Marshal(payload)
	if err != nil {
		panic(err) // a test's own payload: the test is wrong
	}
	return store.Event{Seq: seq, Type: typ, Class: store.ClassOf(typ), Payload: p, CreatedAt: time.Unix(1700000000, 0)}
}

func testSnapshot() *store.Snapshot {
	run := &store.Run{ID: uuid.New(), OwnerID: 1, OrderID: 3, Amount: 500, Currency: "EUR", Reason: "broken",
		State: store.StatePlanning, LastSeq: 4, ReplayFloor: 0}
	return &store.Snapshot{Run: run, CoveringSeq: 4, Events: []store.Event{
		ev(1, store.EventRunCreated, map[string]any{"order_id": 3, "amount": 500, "currency": "EUR"}),
		ev(2, store.EventRunPlanning, nil),
		ev(3, store.EventNarrationDelta, map[string]string{"text": "Looking <b>now</b>. "}),
		ev(4, store.EventNarrationDelta, map[string]string{"text": "Still looking."}),
	}}
}

// TestRunView_ButtonsFollowTheLog: the buttons offered move with the events
// the view applies (the fold itself is tested in store).
func TestRunView_ButtonsFollowTheLog(t *testing.T) {
	t.Parallel()
	v := views.NewRunView(testSnapshot(), true, views.Viewer{MayApprove: true, MayCancel: true})
	if len(v.Narration) != 2 || len(v.Timeline) != 2 || v.State != store.StatePlanning {
		t.Fatalf("view = %+v, want 2 narration pieces, 2 timeline items, planning", v)
	}
	for _, step := range []struct {
		e                     store.Event
		canApprove, canCancel bool
	}{
		{ev(5, store.EventApprovalRequested, nil), true, true},
		{ev(6, store.EventCancelRequested, nil), false, false},
		{ev(7, store.EventRunCanceled, nil), false, false},
	} {
		v.Apply(step.e)
		if v.CanApprove() != step.canApprove || v.CanCancel() != step.canCancel {
			t.Errorf("after %s: can approve %v, can cancel %v; want %v, %v", step.e.Type, v.CanApprove(), v.CanCancel(), step.canApprove, step.canCancel)
		}
	}
	if v.State != store.StateCanceled || v.CoveringSeq != 7 {
		t.Errorf("state %s at seq %d, want canceled at 7", v.State, v.CoveringSeq)
	}
}

// reconcilingSnapshot is a run whose refund's outcome is unknown: the
// provider call timed out and the executor is asking the provider.
func reconcilingSnapshot(opID uuid.UUID) *store.Snapshot {
	snap := testSnapshot()
	snap.Run.State, snap.Run.LastSeq, snap.CoveringSeq = store.StateReconciling, 6, 6
	snap.Operations = []store.Operation{{ID: opID, Kind: "refund", Amount: 500, Currency: "EUR", State: store.OpReconciling,
		LastError: "no answer from the payment provider: timeout"}}
	return snap
}

// TestRunPage_ReconcilingReadsVerifyingNeverFailed: an unknown outcome is
// "verifying the result", never "failed" (design rule 3), whether the page
// comes from a snapshot or the stream moved it there.
func TestRunPage_ReconcilingReadsVerifyingNeverFailed(t *testing.T) {
	t.Parallel()
	opID := uuid.New()
	fromSnapshot := views.NewRunView(reconcilingSnapshot(opID), true, views.Viewer{MayCancel: true})

	streamed := views.NewRunView(testSnapshot(), true, views.Viewer{MayCancel: true})
	for _, e := range []store.Event{
		ev(5, store.EventOperationSubmitted, map[string]any{"operation_id": opID, "amount": 500, "currency": "EUR"}),
		ev(6, store.EventOperationReconciling, map[string]any{"operation_id": opID, "amount": 500, "currency": "EUR",
			"reason": "no answer from the payment provider: timeout"}),
	} {
		streamed.Apply(e)
	}
	for name, v := range map[string]*views.RunView{"snapshot": fromSnapshot, "after operation.reconciling": streamed} {
		t.Run(name, func(t *testing.T) {
			doc := render(t, views.RunPage(&store.User{Name: "C", Role: store.RoleCustomer}, v))
			if got := doc.Find("#run-state").Text(); !strings.Contains(strings.ToLower(got), "verifying") {
				t.Errorf("#run-state = %q, want it to say verifying", got)
			}
			op := doc.Find("#op-" + opID.String())
			if got := op.Text(); !strings.Contains(got, "verifying the result") {
				t.Errorf("operation = %q, want it to say verifying the result", got)
			}
			for _, id := range []string{"#run-status", "#run-outcome"} {
				html, err := doc.Find(id).Html()
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(strings.ToLower(html), "fail") {
					t.Errorf("%s says failed:\n%s", id, html)
				}
			}
			if got, _ := doc.Find("#run-status").Attr("data-state"); got != store.StateReconciling {
				t.Errorf("status data-state = %q, want %q", got, store.StateReconciling)
			}
		})
	}
}

func TestRunPage_FromOneSnapshot(t *testing.T) {
	t.Parallel()
	snap := testSnapshot()
	v := views.NewRunView(snap, true, views.Viewer{MayCancel: true})
	v.Answer = "You asked to cancel this run."
	doc := render(t, views.RunPage(&store.User{Name: "C", Role: store.RoleCustomer}, v))
	run := doc.Find("#run")
	if got, _ := run.Attr("sse-connect"); got != "/runs/"+snap.Run.ID.String()+"/events?after=4" {
		t.Errorf("sse-connect = %q", got)
	}
	if got, _ := run.Attr("data-applied-seq"); got != "4" {
		t.Errorf("data-applied-seq = %q, want the covering seq", got)
	}
	if got := doc.Find("#narration").Text(); got != "Looking <b>now</b>. Still looking." {
		t.Errorf("narration = %q, want the text, escaped", got)
	}
	if got, _ := doc.Find("#stream-sink").Attr("sse-swap"); got != "message,reset,close" {
		t.Errorf("sink sse-swap = %q", got)
	}
	for _, id := range []string{"#run-status", "#run-actions", "#run-outcome", "#timeline", "#decision-result", "#reset-banner", "#stream-end", "#n-3", "#ev-1"} {
		if doc.Find(id).Length() != 1 {
			t.Errorf("no %s on the page", id)
		}
	}
	if got := doc.Find("#run-actions + #decision-result").Text(); got != "You asked to cancel this run." {
		t.Errorf("answer next to the buttons = %q", got)
	}
	if doc.Find("#approve").Length() != 0 || doc.Find("#cancel").Length() != 1 {
		t.Error("want a cancel button and no approve button for a customer")
	}
}

// TestStreamEvent_SameComponentsAsThePage: what the stream sends for an
// event is the page's own component, marked for an out-of-band swap.
func TestStreamEvent_SameComponentsAsThePage(t *testing.T) {
	t.Parallel()
	v := views.NewRunView(testSnapshot(), true, views.Viewer{})
	e := ev(5, store.EventNarrationDelta, map[string]string{"text": "more"})
	doc := render(t, views.StreamEvent(v, e))
	if got, _ := doc.Find("[hx-swap-oob]").Attr("hx-swap-oob"); got != "beforeend:#narration" {
		t.Errorf("narration swap = %q", got)
	}
	if got := doc.Find("#n-5").Text(); got != "more" {
		t.Errorf("#n-5 = %q", got)
	}
	e = ev(5, store.EventApprovalRequested, nil)
	v.Apply(e)
	doc = render(t, views.StreamEvent(v, e))
	for _, id := range []string{"#run-status", "#run-actions", "#run-outcome"} {
		if got, _ := doc.Find(id).Attr("hx-swap-oob"); got != "true" {
			t.Errorf("%s hx-swap-oob = %q, want true", id, got)
		}
	}
	if got, _ := doc.Find("#run-status").Attr("data-state"); got != store.StateAwaitingApproval {
		t.Errorf("status = %q", got)
	}
	if !strings.Contains(doc.Find("#ev-5").Text(), "approver") {
		t.Errorf("timeline item = %q", doc.Find("#ev-5").Text())
	}
	t.Run("status only: no narration, no timeline", func(t *testing.T) {
		s := views.NewRunView(testSnapshot(), false, views.Viewer{})
		if doc := render(t, views.StreamEvent(s, ev(5, store.EventNarrationDelta, map[string]string{"text": "x"}))); doc.Find("span").Length() != 0 {
			t.Error("narration sent to a status-only viewer")
		}
		if doc := render(t, views.StreamEvent(s, e)); doc.Find("#ev-5").Length() != 0 || doc.Find("#run-status").Length() != 1 {
			t.Error("want the status and no timeline item")
		}
	})
}
