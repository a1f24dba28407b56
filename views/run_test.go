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
			if got := doc.Find(`#run-progress [aria-current="step"]`).Text(); got != "Verifying the result" {
				t.Errorf("current step = %q, want it to say verifying the result", got)
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
	if got, _ := run.Attr("data-applied"); got != "4" {
		t.Errorf("data-applied = %q, want the covering seq", got)
	}
	if got := doc.Find("#narration").Text(); got != "Looking <b>now</b>. Still looking." {
		t.Errorf("narration = %q, want the text, escaped", got)
	}
	if got, _ := doc.Find("#stream-sink").Attr("sse-swap"); got != "message,reset,close,busy,restart" {
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

// TestRunView_WhoActed: a decision names who made it in the viewer's
// terms; staff see the name; an event from before roles were recorded
// still reads.
func TestRunView_WhoActed(t *testing.T) {
	t.Parallel()
	const customer, approver = 1, 7
	byApprover := map[string]any{"by": approver, "by_role": store.RoleApprover, "by_name": "Ann Approver"}
	byCustomer := map[string]any{"by": customer, "by_role": store.RoleCustomer, "by_name": "Cat Customer"}
	bySupport := map[string]any{"by": 9, "by_role": store.RoleSupport, "by_name": "Sam Support"}
	for _, tc := range []struct {
		name    string
		typ     string
		payload map[string]any
		viewer  views.Viewer
		want    string
	}{
		{"own cancel", store.EventCancelRequested, byCustomer, views.Viewer{UserID: customer}, "Cancel requested by you"},
		{"approver's cancel, customer looks", store.EventCancelRequested, byApprover, views.Viewer{UserID: customer}, "Cancel requested by an approver"},
		{"approver's cancel, staff looks", store.EventCancelRequested, byApprover, views.Viewer{UserID: 8, Staff: true}, "Cancel requested by Ann Approver (approver)"},
		{"customer's cancel, approver looks", store.EventCancelRequested, byCustomer, views.Viewer{UserID: approver, Staff: true}, "Cancel requested by Cat Customer (the customer)"},
		{"support", store.EventCancelRequested, bySupport, views.Viewer{UserID: customer}, "Cancel requested by support"},
		{"old cancel event", store.EventCancelRequested, map[string]any{"by": approver}, views.Viewer{UserID: customer}, "Cancel requested by someone"},
		{"own approval", store.EventApprovalGranted, byApprover, views.Viewer{UserID: approver, Staff: true}, "Approved by you"},
		{"approval, customer looks", store.EventApprovalGranted, byApprover, views.Viewer{UserID: customer}, "Approved by an approver"},
		{"old approval event", store.EventApprovalGranted, map[string]any{"by": approver}, views.Viewer{UserID: customer}, "Approved by an approver"},
		{"policy", store.EventApprovalGranted, map[string]any{"by": "policy"}, views.Viewer{UserID: customer}, "Approved by the system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := testSnapshot()
			e := ev(5, tc.typ, tc.payload)
			snap.Events = append(snap.Events, e)
			snap.Marks = []store.Event{e}
			v := views.NewRunView(snap, true, tc.viewer)
			doc := render(t, views.RunBody(v, nil))
			if got := strings.TrimSpace(doc.Find("#ev-5").Contents().Not("time").Text()); got != tc.want {
				t.Errorf("timeline item = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("a cancel's reason for everyone, an approval's for staff", func(t *testing.T) {
		p := map[string]any{"by": approver, "by_role": store.RoleApprover, "by_name": "Ann Approver", "reason": "duplicate request"}
		canceled, approved := ev(5, store.EventCancelRequested, p), ev(5, store.EventApprovalGranted, p)
		staff := views.NewRunView(testSnapshot(), true, views.Viewer{UserID: 8, Staff: true})
		cust := views.NewRunView(testSnapshot(), true, views.Viewer{UserID: customer})
		for _, tc := range []struct {
			v    *views.RunView
			e    store.Event
			want bool
		}{{staff, canceled, true}, {cust, canceled, true}, {staff, approved, true}, {cust, approved, false}} {
			if got := tc.v.EventText(tc.e); strings.Contains(got, "duplicate request") != tc.want {
				t.Errorf("staff %v read %q; want the reason: %v", tc.v.Viewer.Staff, got, tc.want)
			}
		}
	})
}

// terminalSnapshot is a finished run: state, ledger, final message and
// the decision events.
func terminalSnapshot(state string, opState string, marks ...store.Event) *store.Snapshot {
	snap := testSnapshot()
	snap.Run.State, snap.Run.LastSeq, snap.CoveringSeq = state, 20, 20
	if opState != "" {
		snap.Operations = []store.Operation{{ID: uuid.New(), Kind: "refund", Amount: 500, Currency: "EUR", State: opState}}
	}
	snap.FinalMessage = &store.FinalMessage{Body: "The agent's final words."}
	snap.Events = append(snap.Events, marks...)
	snap.Marks = marks
	for _, m := range marks {
		if m.Type == store.EventCancelRequested {
			snap.Run.CancelRequestedAt.Valid = true
		}
	}
	return snap
}

// TestRunActions_CancelOnlyWhileItCanStopMoney: once the refund's
// operation exists, the cancel is no longer offered, and the page says why.
func TestRunActions_CancelOnlyWhileItCanStopMoney(t *testing.T) {
	t.Parallel()
	v := views.NewRunView(testSnapshot(), true, views.Viewer{UserID: 1, MayCancel: true})
	doc := render(t, views.RunActions(v, nil))
	if doc.Find("details#cancel-details summary#cancel").Length() != 1 || doc.Find("#cancel-details form button#cancel-confirm").Length() != 1 {
		t.Fatal("want the cancel behind a confirm step")
	}
	if doc.Find(`input[name="reason"]`).Length() != 0 {
		t.Error("a customer is asked for a reason")
	}
	staff := views.NewRunView(testSnapshot(), true, views.Viewer{UserID: 7, MayCancel: true, Staff: true})
	if doc := render(t, views.RunActions(staff, nil)); doc.Find(`#cancel-details input[name="reason"]`).Length() != 1 {
		t.Error("staff get no reason field")
	}
	v.Apply(ev(5, store.EventOperationSubmitted, map[string]any{"operation_id": uuid.New(), "amount": 500, "currency": "EUR"}))
	doc = render(t, views.RunActions(v, nil))
	if doc.Find("#cancel").Length() != 0 {
		t.Error("cancel offered after the refund was sent")
	}
	if got := doc.Find("#cancel-gone").Text(); !strings.Contains(got, "can no longer be canceled") {
		t.Errorf("#cancel-gone = %q, want it to say why", got)
	}
}

// TestRunView_RestartedStepShowsTheNewAttemptOnly: narration before a
// step.attempt that began the step again is not shown, from a snapshot or
// from the stream, and a quiet note says the step restarted.
func TestRunView_RestartedStepShowsTheNewAttemptOnly(t *testing.T) {
	t.Parallel()
	snap := testSnapshot()
	restart := ev(7, store.EventStepAttempt, map[string]any{"step": "planning", "attempt": 2})
	snap.Events = []store.Event{
		ev(1, store.EventRunCreated, map[string]any{"order_id": 3, "amount": 500, "currency": "EUR"}),
		ev(2, store.EventRunPlanning, nil),
		ev(3, store.EventStepAttempt, map[string]any{"step": "planning", "attempt": 1}),
		ev(4, store.EventNarrationDelta, map[string]string{"text": "I'm looking at "}),
		ev(5, store.EventNarrationDelta, map[string]string{"text": "order #3, "}),
		restart,
		ev(8, store.EventNarrationDelta, map[string]string{"text": "I'm looking at order #3."}),
	}
	snap.Marks = []store.Event{snap.Events[2], restart}
	snap.Run.LastSeq, snap.CoveringSeq = 8, 8
	doc := render(t, views.RunBody(views.NewRunView(snap, true, views.Viewer{}), nil))
	if got := doc.Find("#narration").Text(); got != "I'm looking at order #3." {
		t.Errorf("narration = %q, want the new attempt's only", got)
	}
	note := doc.Find("#narration-restarted")
	if _, hidden := note.Attr("hidden"); hidden || note.Text() != "The agent restarted this step." {
		t.Errorf("restart note = %q (hidden %v)", note.Text(), hidden)
	}
	if n := doc.Find("#timeline li").Length(); n != 2 {
		t.Errorf("%d timeline items, want the 2 business events only", n)
	}

	// Live: the stream had shown the first attempt's words; the restart
	// takes them away.
	live := snap
	live.Events, live.Marks = snap.Events[:5], snap.Marks[:1]
	live.Run.LastSeq, live.CoveringSeq = 5, 5
	v := views.NewRunView(live, true, views.Viewer{})
	v.Apply(restart)
	doc = render(t, views.StreamEvent(v, restart))
	if n := doc.Find(`#narration[hx-swap-oob="true"]`); n.Length() != 1 || n.Text() != "" {
		t.Errorf("want the narration emptied out of band, got %d", n.Length())
	}
	if n := doc.Find(`#narration-restarted[hx-swap-oob="true"]`); n.Length() != 1 || n.Text() != "The agent restarted this step." {
		t.Error("want the restart note sent out of band")
	}
	late := ev(6, store.EventNarrationDelta, map[string]string{"text": "stale"})
	if doc := render(t, views.StreamEvent(v, late)); doc.Find("span").Length() != 0 {
		t.Error("narration from before the restart sent after it")
	}
}
