package views

import (
	"database/sql"
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

// RunView is what the run page shows: built from one snapshot, then moved
// forward event by event by the live stream, so the page and the fragments
// the stream sends come from the same values.
type RunView struct {
	Run    *store.Run
	Viewer Viewer
	// Full is AccessFull: narration and timeline. Without it the view holds
	// the state and the outcome only.
	Full            bool
	State           string
	CancelRequested bool
	CoveringSeq     int64
	ReplayFloor     int64
	Operations      []store.Operation
	FinalMessage    string
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
	v := &RunView{
		Run:             snap.Run,
		Viewer:          viewer,
		Full:            full,
		State:           snap.Run.State,
		CancelRequested: snap.Run.CancelRequested(),
		CoveringSeq:     snap.CoveringSeq,
		ReplayFloor:     snap.ReplayFloor,
		Operations:      append([]store.Operation(nil), snap.Operations...),
	}
	if snap.FinalMessage != nil {
		v.FinalMessage = snap.FinalMessage.Body
	}
	if !full {
		return v
	}
	firstNarration := int64(-1)
	for _, ev := range snap.Events {
		if ev.Type == store.EventNarrationDelta {
			if firstNarration < 0 {
				firstNarration = ev.Seq
			}
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

// stateAfter is the run state an event records, "" for events that do not
// change the state.
var stateAfter = map[string]string{
	store.EventRunCreated:           store.StateCreated,
	store.EventRunPlanning:          store.StatePlanning,
	store.EventApprovalRequested:    store.StateAwaitingApproval,
	store.EventApprovalGranted:      store.StateSubmitting,
	store.EventOperationSubmitted:   store.StateSubmitting,
	store.EventOperationReconciling: store.StateReconciling,
	store.EventRunCompleted:         store.StateCompleted,
	store.EventRunFailed:            store.StateFailed,
	store.EventRunCanceled:          store.StateCanceled,
}

// Apply moves the view forward by one event: state, cancel request, ledger
// and final message. It keeps no narration or timeline, so a long stream
// holds no growing history.
func (v *RunView) Apply(ev store.Event) {
	if ev.Seq > v.CoveringSeq {
		v.CoveringSeq = ev.Seq
	}
	// A finished run stays finished, whatever older event a replay shows.
	if s := stateAfter[ev.Type]; s != "" && (!v.Terminal() || store.Terminal(s)) {
		v.State = s
	}
	var p eventPayload
	_ = json.Unmarshal(ev.Payload, &p)
	switch ev.Type {
	case store.EventCancelRequested:
		v.CancelRequested = true
	case store.EventMessageFinal:
		v.FinalMessage = p.Body
	case store.EventOperationSubmitted, store.EventOperationSucceeded, store.EventOperationFailed, store.EventOperationReconciling:
		id, err := uuid.Parse(p.OperationID)
		if err != nil {
			return
		}
		state := map[string]string{
			store.EventOperationSubmitted:   store.OpSubmitted,
			store.EventOperationSucceeded:   store.OpSucceeded,
			store.EventOperationFailed:      store.OpFailed,
			store.EventOperationReconciling: store.OpReconciling,
		}[ev.Type]
		for i := range v.Operations {
			op := &v.Operations[i]
			if op.ID != id {
				continue
			}
			if op.State != store.OpSucceeded && op.State != store.OpFailed {
				op.State = state
			}
			if p.ProviderRef != "" {
				op.ProviderRef = sql.NullString{String: p.ProviderRef, Valid: true}
			}
			if p.Reason != "" {
				op.LastError = p.Reason
			}
			return
		}
		op := store.Operation{ID: id, RunID: v.Run.ID, Kind: "refund", Amount: p.Amount, Currency: p.Currency, State: state, LastError: p.Reason}
		if p.ProviderRef != "" {
			op.ProviderRef = sql.NullString{String: p.ProviderRef, Valid: true}
		}
		v.Operations = append(v.Operations, op)
	}
}

// Terminal reports whether the run, as shown, has ended.
func (v *RunView) Terminal() bool { return store.Terminal(v.State) }

// CanApprove and CanCancel say which buttons to offer now.
func (v *RunView) CanApprove() bool {
	return v.Viewer.MayApprove && v.State == store.StateAwaitingApproval && !v.CancelRequested
}

func (v *RunView) CanCancel() bool {
	return v.Viewer.MayCancel && !v.Terminal() && !v.CancelRequested
}

// eventPayload is the union of the payload fields the page reads.
type eventPayload struct {
	Text        string `json:"text"`
	Body        string `json:"body"`
	OperationID string `json:"operation_id"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	ProviderRef string `json:"provider_ref"`
	Reason      string `json:"reason"`
	OrderID     int64  `json:"order_id"`
	By          any    `json:"by"`
}

// NarrationText is the text of a narration.delta event.
func NarrationText(ev store.Event) string {
	var p eventPayload
	_ = json.Unmarshal(ev.Payload, &p)
	return p.Text
}

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
	var p eventPayload
	_ = json.Unmarshal(ev.Payload, &p)
	switch ev.Type {
	case store.EventRunCreated:
		return fmt.Sprintf("Refund of %s requested for order #%d", Money(p.Amount, p.Currency), p.OrderID)
	case store.EventRunPlanning:
		return "The agent started looking at the request"
	case store.EventActionProposed:
		return fmt.Sprintf("Proposed: refund %s", Money(p.Amount, p.Currency))
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
		return fmt.Sprintf("Refund of %s sent to the payment provider", Money(p.Amount, p.Currency))
	case store.EventOperationSucceeded:
		return fmt.Sprintf("The payment provider confirmed the refund of %s (reference %s)", Money(p.Amount, p.Currency), p.ProviderRef)
	case store.EventOperationFailed:
		if p.Reason != "" {
			return fmt.Sprintf("The payment provider did not refund %s: %s", Money(p.Amount, p.Currency), p.Reason)
		}
		return fmt.Sprintf("The payment provider did not refund %s", Money(p.Amount, p.Currency))
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
