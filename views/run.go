package views

import (
	"fmt"
	"math"
	"strconv"
	"strings"

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
	// NarrationHidden: earlier pieces of narration the view leaves out
	// (NarrationShown). They are kept; the page links to them.
	NarrationHidden int
	// Answer is what the viewer's own decision just did, shown next to the
	// buttons; the next render from the log replaces it.
	Answer string
}

// NewRunView builds the view of a snapshot, with the latest NarrationShown
// pieces of narration (the others are counted in NarrationHidden). full is
// whether the viewer may see the narration and the timeline.
func NewRunView(snap *store.Snapshot, full bool, viewer Viewer) *RunView {
	return newRunView(snap, full, viewer, NarrationShown)
}

// NewRunViewAllNarration is NewRunView with every piece of narration the
// replay window holds (AllNarrationURL).
func NewRunViewAllNarration(snap *store.Snapshot, full bool, viewer Viewer) *RunView {
	return newRunView(snap, full, viewer, math.MaxInt)
}

func newRunView(snap *store.Snapshot, full bool, viewer Viewer, latest int) *RunView {
	v := &RunView{Progress: store.ProgressOf(snap), Viewer: viewer, Full: full, ReplayFloor: snap.ReplayFloor}
	if !full {
		return v
	}
	var narration []store.Event
	for _, ev := range snap.Events {
		switch {
		case ev.Type == store.EventNarrationDelta && v.ShowsNarration(ev):
			narration = append(narration, ev)
		case inTimeline(ev):
			v.Timeline = append(v.Timeline, ev)
		}
	}
	// Only what is shown is decoded; a page's snapshot (SnapshotPage) did
	// not even read the rest.
	v.NarrationHidden = snap.NarrationLeftOut
	if extra := len(narration) - latest; extra > 0 {
		v.NarrationHidden, narration = v.NarrationHidden+extra, narration[extra:]
	}
	for _, ev := range narration {
		v.Narration = append(v.Narration, Narration{Seq: ev.Seq, Text: NarrationText(ev)})
	}
	// Only retention raises the floor; a restart's skipped seqs are no
	// loss and leave it be.
	v.NarrationTrimmed = snap.ReplayFloor > 0
	return v
}

// NarrationShown is how many of the latest pieces of narration a run's
// view holds unless asked for all (AllNarrationURL): a long run's page
// then costs about what reading its snapshot does, not the HTML of
// hundreds of pieces.
const NarrationShown = 100

// AllNarrationURL is the run page with every piece of narration the
// replay window holds.
func AllNarrationURL(runID uuid.UUID) string {
	return "/runs/" + runID.String() + "?narration=all#run-narration"
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

// cancelGone says why a viewer who could cancel before no longer can, ""
// when the cancel is still offered or was never theirs to make.
func (v *RunView) cancelGone() string {
	if !v.Viewer.MayCancel || v.Terminal() || v.CancelRequested || !store.CancelTooLate(v.Operations) {
		return ""
	}
	return "The refund has been sent to the payment provider, so it can no longer be canceled. The result appears here once the provider confirms it."
}

// Restarted reports whether a step began again, so the narration shown is
// the new attempt's only.
func (v *RunView) Restarted() bool { return v.RestartSeq > 0 }

// Who names the person who made decision d in the viewer's words: "you",
// "an approver", "support", "the customer", "the system"; staff also see
// the name. unknown is the words for an event that recorded no role.
func (v *RunView) Who(d *store.Decider, unknown string) string {
	switch {
	case d == nil:
		return unknown
	case d.System:
		return "the system"
	case d.UserID != 0 && d.UserID == v.Viewer.UserID:
		return "you"
	}
	var role string
	switch d.Role {
	case store.RoleApprover:
		role = "an approver"
	case store.RoleSupport, store.RoleAdmin:
		role = "support"
	case store.RoleCustomer:
		role = "the customer"
	default:
		return unknown
	}
	if v.Viewer.Staff && d.Name != "" {
		return d.Name + " (" + strings.TrimPrefix(role, "an ") + ")"
	}
	return role
}

// cancelNote is the pending cancel in words while the run goes on, ""
// when there is none.
func (v *RunView) cancelNote() string {
	if !v.CancelRequested || v.Terminal() {
		return ""
	}
	who := v.Who(v.CanceledBy, "someone")
	if store.CancelTooLate(v.Operations) {
		return "Cancel requested by " + who + ", but the refund may already have reached the payment provider: the agent is confirming the result before it ends the run."
	}
	return "Cancel requested by " + who + ": the agent stops before any money moves."
}

// approvalNote says who approved, "" before an approval.
func (v *RunView) approvalNote() string {
	if v.ApprovedBy == nil {
		return ""
	}
	return "Approved by " + v.Who(v.ApprovedBy, "an approver") + "."
}

// outcomeText is the one sentence that says how the run ended, "" while it
// goes on.
func (v *RunView) outcomeText() string {
	amount := store.FormatMoney(v.Run.Amount, v.Run.Currency)
	for _, op := range v.Operations {
		if op.State == store.OpSucceeded {
			amount = store.FormatMoney(op.Amount, op.Currency)
		}
	}
	switch v.Outcome() {
	case store.OutcomeCompleted:
		return "Refunded " + amount + ": the payment provider confirmed it."
	case store.OutcomeCancelTooLate:
		return "Refunded " + amount + ": the cancel " + v.Who(v.CanceledBy, "someone") +
			" asked for came after the refund had reached the payment provider, which confirmed it."
	case store.OutcomeCanceled:
		return "Canceled by " + v.Who(v.CanceledBy, "someone") + ". No refund was made."
	case store.OutcomeDeclined:
		return "Not refunded: the payment provider did not make the refund. No money moved."
	case store.OutcomeFailed:
		return "Not refunded: the request could not be carried out. No money moved."
	}
	return ""
}

// ProgressStep is one stop of the progress line.
type ProgressStep struct {
	Label string
	// Status is done, current, todo, or stopped (where a failed or
	// canceled run ended).
	Status string
	// Here marks where the run stands (aria-current="step").
	Here bool
}

// progressSteps is the progress line: requested, checked, approval (when
// one was asked for), sent, confirmed, with where the run stands marked.
func (v *RunView) progressSteps() []ProgressStep {
	labels := []string{"Requested", "Checked"}
	if v.ApprovalAsked {
		labels = append(labels, "Approval")
	}
	labels = append(labels, "Sent", "Confirmed")
	sent, confirmed := len(labels)-2, len(labels)-1
	at := 1 // checking the request
	switch {
	case len(v.Operations) > 0 || v.State == store.StateReconciling || v.State == store.StateCompleted:
		at = confirmed
	case v.State == store.StateSubmitting || v.ApprovedBy != nil:
		at = sent
	case v.ApprovalAsked:
		at = 2
	}
	steps := make([]ProgressStep, len(labels))
	for i, l := range labels {
		st := ProgressStep{Label: l, Status: "todo", Here: i == at}
		switch {
		case i < at, st.Here && v.State == store.StateCompleted:
			st.Status = "done"
		case st.Here && v.Terminal():
			st.Status = "stopped"
		case st.Here:
			st.Status = "current"
		}
		steps[i] = st
	}
	return steps
}

// inTimeline reports whether an event is a line of the run page's
// timeline, the business history. A restarted step is told beside the
// narration instead (NarrationRestarted).
func inTimeline(ev store.Event) bool { return ev.Class != store.ClassPresentation }

// NarrationText is the text of a narration.delta event.
func NarrationText(ev store.Event) string {
	p, _ := store.PayloadOf[store.NarrationDelta](ev)
	return p.Text
}

// stateLabel is how a run state reads on the page.
func stateLabel(state string) string {
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

// operationLabel is how a ledger state reads: submitted is not succeeded,
// and an unknown outcome is being verified, never "failed".
func operationLabel(state string) string {
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

// reason is the reason given with a decision, for staff.
func (v *RunView) reason(ev store.Event) string {
	if d := store.DeciderOf(ev); d != nil && d.Reason != "" && v.Viewer.Staff {
		return ": “" + d.Reason + "”"
	}
	return ""
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

// NarrationAnnounceEvery is, in milliseconds, how often at most the run
// page reads new narration to a screen reader: each word as it arrives
// would drown everything else.
const NarrationAnnounceEvery = 8000

// StreamURL is where the page's stream resumes: strictly after seq.
func StreamURL(runID uuid.UUID, after int64) string {
	return "/runs/" + runID.String() + "/events?after=" + strconv.FormatInt(after, 10)
}
