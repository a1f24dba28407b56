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
	p, _ := json.Marshal(payload)
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

func TestRunView_ApplyFollowsTheLog(t *testing.T) {
	t.Parallel()
	v := views.NewRunView(testSnapshot(), true, views.Viewer{MayApprove: true, MayCancel: true})
	if len(v.Narration) != 2 || len(v.Timeline) != 2 || v.State != store.StatePlanning {
		t.Fatalf("view = %+v, want 2 narration pieces, 2 timeline items, planning", v)
	}
	opID := uuid.New()
	for _, step := range []struct {
		e         store.Event
		state     string
		canCancel bool
	}{
		{ev(5, store.EventApprovalRequested, nil), store.StateAwaitingApproval, true},
		{ev(6, store.EventApprovalGranted, map[string]any{"by": 9}), store.StateSubmitting, true},
		{ev(7, store.EventOperationSubmitted, map[string]any{"operation_id": opID, "amount": 500, "currency": "EUR"}), store.StateSubmitting, true},
		{ev(8, store.EventOperationReconciling, map[string]any{"operation_id": opID, "reason": "timeout"}), store.StateReconciling, true},
		{ev(9, store.EventCancelRequested, nil), store.StateReconciling, false},
		{ev(10, store.EventOperationSucceeded, map[string]any{"operation_id": opID, "amount": 500, "currency": "EUR", "provider_ref": "re_1"}), store.StateReconciling, false},
		{ev(11, store.EventMessageFinal, map[string]string{"body": "Refunded."}), store.StateReconciling, false},
		{ev(12, store.EventRunCompleted, nil), store.StateCompleted, false},
		// A replay of an older event never takes a finished run back.
		{ev(5, store.EventApprovalRequested, nil), store.StateCompleted, false},
	} {
		v.Apply(step.e)
		if v.State != step.state || v.CanCancel() != step.canCancel {
			t.Errorf("after %s: state %s, can cancel %v; want %s, %v", step.e.Type, v.State, v.CanCancel(), step.state, step.canCancel)
		}
	}
	if len(v.Operations) != 1 || v.Operations[0].State != store.OpSucceeded || v.Operations[0].ProviderRef.String != "re_1" {
		t.Errorf("operations = %+v, want one succeeded with its reference", v.Operations)
	}
	if v.FinalMessage != "Refunded." || v.CoveringSeq != 12 {
		t.Errorf("final %q covering %d", v.FinalMessage, v.CoveringSeq)
	}
}

func TestRunPage_FromOneSnapshot(t *testing.T) {
	t.Parallel()
	snap := testSnapshot()
	v := views.NewRunView(snap, true, views.Viewer{MayCancel: true})
	doc := render(t, views.RunPage(&store.User{Name: "C", Role: store.RoleCustomer}, v, []string{"Approved."}))
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
	if got := doc.Find(".flash").Text(); got != "Approved." {
		t.Errorf("flash = %q", got)
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
