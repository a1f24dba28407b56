package views

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// Viewer is what the person looking at a run may do with it; it decides
// which buttons the page offers (the POST handlers decide for real).
type Viewer struct {
	MayApprove bool
	MayCancel  bool
}

// Narration is one stored piece of the agent's narration.
type Narration struct {
	Seq  int64
	Text string
}

// RunView is what the run page shows: the run's Progress, built from one
// snapshot and then moved forward event by event by the live stream (Apply),
// so the page and the fragments the stream sends come from the same values.
type RunView struct {
	store.Progress
	Viewer Viewer
	// Full is AccessFull: narration and timeline. Without it the view holds
	// the state and the outcome only.
	Full        bool
	ReplayFloor int64
	// Narration and Timeline are filled from the snapshot only; the stream
	// sends later pieces one by one and never keeps them.
	Narration []Narration
	Timeline  []store.Event
	// NarrationTrimmed: narration older than the replay window is gone.
	NarrationTrimmed bool
}

// NewRunView builds the view of a snapshot. full is whether the viewer may
// see the narration and the timeline.
func NewRunView(snap *store.Snapshot, full bool, viewer Viewer) *RunView {
	v := &RunView{Progress: store.ProgressOf(snap), Viewer: viewer, Full: full, ReplayFloor: snap.ReplayFloor}
	if !full {
		return v
	}
	for _, ev := range snap.Events {
		if ev.Type == store.EventNarrationDelta {
			v.Narration = append(v.Narration, Narration{Seq: ev.Seq, Text: NarrationText(ev)})
			continue
		}
		v.Timeline = append(v.Timeline, ev)
	}
	// Narration was pruned if the floor lies past some narration we do not
	// have; a floor reached by business events alone hides nothing.
	v.NarrationTrimmed = snap.ReplayFloor > 0
	return v
}

// CanApprove and CanCancel say which buttons to offer now.
func (v *RunView) CanApprove() bool {
	return v.Viewer.MayApprove && v.State == store.StateAwaitingApproval && !v.CancelRequested
}

func (v *RunView) CanCancel() bool {
	return v.Viewer.MayCancel && !v.Terminal() && !v.CancelRequested
}

// eventPayload is the union of the payload fields the page's words read.
type eventPayload struct {
	Text        string `json:"text"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	ProviderRef string `json:"provider_ref"`
	Reason      string `json:"reason"`
	OrderID     int64  `json:"order_id"`
	By          any    `json:"by"`
}

// payloadOf reads an event's payload for the words about it. The store wrote
// every payload itself; one that does not decode reads as empty fields, and
// the page still renders.
func payloadOf(ev store.Event) eventPayload {
	var p eventPayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return eventPayload{}
	}
	return p
}

// NarrationText is the text of a narration.delta event.
func NarrationText(ev store.Event) string { return payloadOf(ev).Text }

// StateLabel is how a run state reads on the page.
func StateLabel(state string) string {
	switch state {
	case store.StateCreated:
		return "Received"
	case store.StatePlanning:
		return "Looking at your request"
	case store.StateAwaitingApproval:
		return "Waiting for an approver"
	case store.StateSubmitting:
		return "Sending the refund"
	case store.StateReconciling:
		return "Verifying the result"
	case store.StateCompleted:
		return "Completed"
	case store.StateFailed:
		return "Failed"
	case store.StateCanceled:
		return "Canceled"
	}
	return state
}

// OperationLabel is how a ledger state reads: submitted is not succeeded,
// and an unknown outcome is being verified, never "failed".
func OperationLabel(state string) string {
	switch state {
	case store.OpSubmitted:
		return "sent to the payment provider, not yet confirmed"
	case store.OpSucceeded:
		return "confirmed by the payment provider"
	case store.OpFailed:
		return "not refunded"
	case store.OpReconciling:
		return "verifying the result with the payment provider"
	}
	return state
}

// EventText describes a business event in words.
func EventText(ev store.Event) string {
	p := payloadOf(ev)
	switch ev.Type {
	case store.EventRunCreated:
		return fmt.Sprintf("Refund of %s requested for order #%d", store.FormatMoney(p.Amount, p.Currency), p.OrderID)
	case store.EventRunPlanning:
		return "The agent started looking at the request"
	case store.EventActionProposed:
		return fmt.Sprintf("Proposed: refund %s", store.FormatMoney(p.Amount, p.Currency))
	case store.EventApprovalRequested:
		return "Asked an approver for a decision"
	case store.EventApprovalGranted:
		if p.By == "policy" {
			return "Approved by policy"
		}
		return "Approved"
	case store.EventCancelRequested:
		return "Cancel requested"
	case store.EventCancelTooLate:
		return "The cancel arrived too late: the refund had already reached the payment provider"
	case store.EventOperationSubmitted:
		return fmt.Sprintf("Refund of %s sent to the payment provider", store.FormatMoney(p.Amount, p.Currency))
	case store.EventOperationSucceeded:
		return fmt.Sprintf("The payment provider confirmed the refund of %s (reference %s)", store.FormatMoney(p.Amount, p.Currency), p.ProviderRef)
	case store.EventOperationFailed:
		if p.Reason != "" {
			return fmt.Sprintf("The payment provider did not refund %s: %s", store.FormatMoney(p.Amount, p.Currency), p.Reason)
		}
		return fmt.Sprintf("The payment provider did not refund %s", store.FormatMoney(p.Amount, p.Currency))
	case store.EventOperationReconciling:
		return "Verifying the result with the payment provider"
	case store.EventMessageFinal:
		return "Final answer written"
	case store.EventRunCompleted:
		return "Run completed"
	case store.EventRunFailed:
		return "Run failed"
	case store.EventRunCanceled:
		return "Run canceled"
	}
	return ev.Type
}

// Stable element IDs of the run page's parts.
func NarrationID(seq int64) string { return "n-" + strconv.FormatInt(seq, 10) }
func EventID(seq int64) string     { return "ev-" + strconv.FormatInt(seq, 10) }

// StreamURL is where the page's stream resumes: strictly after seq.
func StreamURL(runID uuid.UUID, after int64) string {
	return "/runs/" + runID.String() + "/events?after=" + strconv.FormatInt(after, 10)
}
