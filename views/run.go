package views

import (
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
	// UserID is who is looking (0: nobody signed in): their own decisions
	// read "you".
	UserID int64
	// Staff (approvers, support, admins) see who decided by name and the
	// reasons given, and may give one with their own decisions.
	Staff bool
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
	// Answer is what the viewer's own decision just did, shown next to the
	// buttons; the next render from the log replaces it.
	Answer string
}

// NewRunView builds the view of a snapshot. full is whether the viewer may
// see the narration and the timeline.
func NewRunView(snap *store.Snapshot, full bool, viewer Viewer) *RunView {
	v := &RunView{Progress: store.ProgressOf(snap), Viewer: viewer, Full: full, ReplayFloor: snap.ReplayFloor}
	if !full {
		return v
	}
	for _, ev := range snap.Events {
		switch {
		case ev.Type == store.EventNarrationDelta && v.ShowsNarration(ev):
			v.Narration = append(v.Narration, Narration{Seq: ev.Seq, Text: NarrationText(ev)})
		case inTimeline(ev):
			v.Timeline = append(v.Timeline, ev)
		}
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

// CanCancel offers the cancel only while it can still stop the money:
// once an operation exists the provider may have the refund
// (store.CancelTooLate).
func (v *RunView) CanCancel() bool {
	return v.Viewer.MayCancel && !v.Terminal() && !v.CancelRequested && !store.CancelTooLate(v.Operations)
}

// Restarted reports whether a step began again, so the narration shown is
// the new attempt's only.
func (v *RunView) Restarted() bool { return v.RestartSeq > 0 }

// Words is what the run says to this viewer (words.go).
func (v *RunView) Words() Said { return Words(&v.Progress, v.Viewer) }

// inTimeline reports whether an event is a line of the run page's
// timeline, the business history. A restarted step is told beside the
// narration instead (NarrationRestarted).
func inTimeline(ev store.Event) bool { return ev.Class != store.ClassPresentation }

// NarrationText is the text of a narration.delta event.
func NarrationText(ev store.Event) string {
	p, _ := store.PayloadOf[store.NarrationDelta](ev)
	return p.Text
}

// EventText describes a business event in words, naming who acted in the
// viewer's terms.
func (v *RunView) EventText(ev store.Event) string {
	switch ev.Type {
	case store.EventApprovalGranted:
		return "Approved by " + v.Who(store.DeciderOf(ev), "an approver") + v.reason(ev)
	case store.EventCancelRequested:
		return "Cancel requested by " + v.Who(store.DeciderOf(ev), "someone") + v.reason(ev)
	}
	return EventText(ev)
}

// reason is the reason given with a decision: a cancel's for everyone
// (the customer reads why their refund was stopped), an approval's for
// staff only, as Words shows them.
func (v *RunView) reason(ev store.Event) string {
	d := store.DeciderOf(ev)
	if d == nil || d.Reason == "" || (ev.Type == store.EventApprovalGranted && !v.Viewer.Staff) {
		return ""
	}
	return ": “" + d.Reason + "”"
}

// EventText describes a business event in words, without who acted. The
// store wrote every payload itself; one that does not decode reads as
// empty fields, and the page still renders.
func EventText(ev store.Event) string {
	op, _ := store.OperationNewsOf(ev)
	switch ev.Type {
	case store.EventRunCreated:
		p, _ := store.PayloadOf[store.RunCreated](ev)
		return fmt.Sprintf("Refund of %s requested for order #%d", store.FormatMoney(p.Amount, p.Currency), p.OrderID)
	case store.EventRunPlanning:
		return "The agent started looking at the request"
	case store.EventActionProposed:
		p, _ := store.PayloadOf[store.ActionProposed](ev)
		return fmt.Sprintf("Proposed: refund %s", store.FormatMoney(p.Amount, p.Currency))
	case store.EventApprovalRequested:
		return "Asked an approver for a decision"
	case store.EventApprovalGranted:
		if d := store.DeciderOf(ev); d != nil && d.System {
			return "Approved by policy"
		}
		return "Approved"
	case store.EventCancelRequested:
		return "Cancel requested"
	case store.EventCancelTooLate:
		return "The cancel arrived too late: the refund had already reached the payment provider"
	case store.EventOperationSubmitted:
		return fmt.Sprintf("Refund of %s sent to the payment provider", store.FormatMoney(op.Amount, op.Currency))
	case store.EventOperationSucceeded:
		return fmt.Sprintf("The payment provider confirmed the refund of %s (reference %s)", store.FormatMoney(op.Amount, op.Currency), op.ProviderRef)
	case store.EventOperationFailed:
		if op.Reason != "" {
			return fmt.Sprintf("The payment provider did not refund %s: %s", store.FormatMoney(op.Amount, op.Currency), op.Reason)
		}
		return fmt.Sprintf("The payment provider did not refund %s", store.FormatMoney(op.Amount, op.Currency))
	case store.EventOperationReconciling:
		return "No answer from the payment provider: began verifying the result"
	case store.EventMessageFinal:
		return "Final answer written"
	case store.EventRunCompleted:
		return "Run completed"
	case store.EventRunFailed:
		return "Run ended without a refund"
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
