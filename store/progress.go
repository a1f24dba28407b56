package store

import (
	"database/sql"
	"time"

	"github.com/google/uuid"
)

// stateAfter is the run state an event records, "" for an event that leaves
// the state as it was. Every state change appends its event in the same
// transaction (see mutate), so folding a log with stateAfter gives the state
// the run's row held at that seq.
func stateAfter(eventType string) string {
	switch eventType {
	case EventRunCreated:
		return StateCreated
	case EventRunPlanning:
		return StatePlanning
	case EventApprovalRequested:
		return StateAwaitingApproval
	case EventApprovalGranted, EventOperationSubmitted:
		return StateSubmitting
	case EventOperationReconciling:
		return StateReconciling
	case EventRunCompleted:
		return StateCompleted
	case EventRunFailed:
		return StateFailed
	case EventRunCanceled:
		return StateCanceled
	}
	return ""
}

// Waits reports whether a run in state waits on someone else: an
// approver, or the payment provider.
func Waits(state string) bool {
	return state == StateAwaitingApproval || state == StateSubmitting || state == StateReconciling
}

// Progress is where a run stands as of CoveringSeq: its state, whether a
// cancel was asked for and by whom, who approved it, its ledger, its final
// message and the attempt its current step is on. It starts from a
// snapshot and is moved forward by the events after it, so a page and the
// stream that continues it tell the same story. It keeps no narration or
// timeline: a long stream holds no growing history.
type Progress struct {
	Run             *Run
	State           string
	CancelRequested bool
	CoveringSeq     int64
	Operations      []Operation
	FinalMessage    string
	FinalIn         Translations // FinalMessage in the other languages
	// ApprovalAsked: the run asked a person for a decision.
	ApprovalAsked bool
	// Deadline is until when an approver may decide, zero when the run
	// asked with none (or never asked); Expiry is set once nobody did, and
	// the system canceled the run (approval.expired).
	Deadline time.Time
	Expiry   *ApprovalExpired
	// CanceledBy and ApprovedBy are who decided, as the decision's event
	// recorded it; nil until then.
	CanceledBy, ApprovedBy *Decider
	// RestartSeq is the seq of the latest step.attempt that began a step
	// again (attempt 2 or later), 0 if none: narration at or below it
	// belongs to an attempt that was abandoned, and is not shown.
	RestartSeq int64
	// StateSince is when the event that set State committed: the start of
	// the step that waits now (a snapshot reads it only while the run
	// Waits).
	StateSince time.Time
}

// ProgressOf is where the snapshot's run stands.
func ProgressOf(snap *Snapshot) Progress {
	p := Progress{
		Run:             snap.Run,
		State:           snap.Run.State,
		CancelRequested: snap.Run.CancelRequested(),
		CoveringSeq:     snap.CoveringSeq,
		// A copy: Apply changes operations in place, and the snapshot may
		// be shared.
		Operations:    append([]Operation(nil), snap.Operations...),
		ApprovalAsked: snap.Approval != nil,
		StateSince:    snap.StateSince,
	}
	if snap.FinalMessage != nil {
		p.FinalMessage, p.FinalIn = snap.FinalMessage.Body, snap.FinalMessage.In
	}
	if a := snap.Approval; a != nil && a.Deadline.Valid {
		p.Deadline = a.Deadline.Time
		if a.Decision.String == DecidedExpired {
			p.Expiry = &ApprovalExpired{RequestedAt: a.RequestedAt, Deadline: a.Deadline.Time}
		}
	}
	for _, ev := range snap.Marks {
		p.note(ev)
	}
	return p
}

// ShowsNarration reports whether a narration event belongs to the attempt
// the page shows: a restarted step's new attempt never continues the text
// of the one it replaced.
func (p *Progress) ShowsNarration(ev Event) bool { return ev.Seq > p.RestartSeq }

// Outcomes of a finished run, as its page names them.
const (
	OutcomeCompleted = "completed"
	// OutcomeCancelTooLate: the refund went through although a cancel was
	// asked for: it came after the refund reached the provider.
	OutcomeCancelTooLate = "cancel_too_late"
	OutcomeDeclined      = "declined" // the provider refused the refund
	OutcomeFailed        = "failed"
	OutcomeCanceled      = "canceled"
)

// Outcome names how the run ended, "" while it goes on.
func (p *Progress) Outcome() string {
	declined := false
	for _, op := range p.Operations {
		declined = declined || op.State == OpFailed
	}
	return EndedAs(p.State, declined, p.CancelRequested)
}

// EndedAs names how a run in state ended, "" while it goes on: declined,
// the provider refused its refund; cancelRequested, a cancel was asked
// for. The one rule, for a run's page and a request's record of it
// (child.finished).
func EndedAs(state string, declined, cancelRequested bool) string {
	switch state {
	case StateCompleted:
		if cancelRequested {
			return OutcomeCancelTooLate
		}
		return OutcomeCompleted
	case StateCanceled:
		return OutcomeCanceled
	case StateFailed:
		if declined {
			return OutcomeDeclined
		}
		return OutcomeFailed
	}
	return ""
}

// Terminal reports whether the run, as of CoveringSeq, has ended.
func (p *Progress) Terminal() bool { return Terminal(p.State) }

// Apply moves the progress forward by one event. Events may arrive again
// (delivery is at least once), so applying an older one never undoes a
// finish or a settled operation.
func (p *Progress) Apply(ev Event) {
	if ev.Seq > p.CoveringSeq {
		p.CoveringSeq = ev.Seq
	}
	// A finished run stays finished, whatever older event a replay shows.
	if s := stateAfter(ev.Type); s != "" && (!p.Terminal() || Terminal(s)) {
		p.State = s
		if ev.CreatedAt.After(p.StateSince) {
			p.StateSince = ev.CreatedAt
		}
	}
	p.note(ev)
	switch ev.Type {
	case EventCancelRequested:
		p.CancelRequested = true
		// The event does not say whether it came in time, and a call may
		// have begun since the snapshot was read: say only what is true
		// either way (CancelTooLate), as a fresh snapshot would say more.
		for i := range p.Operations {
			p.Operations[i].Unsent = false
		}
	case EventApprovalRequested:
		p.ApprovalAsked = true
		if pl, err := PayloadOf[ApprovalRequested](ev); err == nil && pl.Deadline != nil {
			p.Deadline = *pl.Deadline
		}
	case EventApprovalExpired:
		if pl, err := PayloadOf[ApprovalExpired](ev); err == nil {
			p.Expiry = &pl
		}
	case EventMessageFinal:
		if pl, err := PayloadOf[MessageFinal](ev); err == nil {
			p.FinalMessage, p.FinalIn = pl.Body, pl.In
		}
	default:
		if n, ok := OperationNewsOf(ev); ok {
			p.applyOperation(ev.RunID, n)
		}
	}
}

// applyOperation records what an operation event says about its ledger row,
// adding the row when the event is the first news of it.
func (p *Progress) applyOperation(runID uuid.UUID, n OperationNews) {
	id, state := n.OperationID, n.State
	if id == uuid.Nil {
		return // an operation event always names its operation; this one names none
	}
	ref := sql.NullString{String: n.ProviderRef, Valid: n.ProviderRef != ""}
	for i := range p.Operations {
		op := &p.Operations[i]
		if op.ID != id {
			continue
		}
		// succeeded and failed are final in the ledger.
		if op.State != OpSucceeded && op.State != OpFailed {
			op.State = state
		}
		// As RecordOutcome: a call may have reached the provider.
		if state == OpSucceeded || state == OpReconciling {
			op.Unsent = false
		}
		if ref.Valid {
			op.ProviderRef = ref
		}
		if n.Reason != "" {
			op.LastError = n.Reason
		}
		op.Recovered = op.Recovered || n.Recovered
		return
	}
	p.Operations = append(p.Operations, Operation{ID: id, RunID: runID, Kind: "refund", Amount: n.Amount,
		Currency: n.Currency, State: state, ProviderRef: ref, LastError: n.Reason, Recovered: n.Recovered})
}

// markTypes are the events ProgressOf reads besides the snapshot's rows:
// who decided, and where a step began again. A snapshot carries them as
// Marks, a head snapshot too.
var markTypes = []string{EventApprovalGranted, EventCancelRequested, EventStepAttempt}

// note records what a mark event says about who decided and which attempt
// a step is on.
func (p *Progress) note(ev Event) {
	switch ev.Type {
	case EventCancelRequested:
		p.CanceledBy = DeciderOf(ev)
	case EventApprovalGranted:
		p.ApprovedBy = DeciderOf(ev)
	case EventStepAttempt:
		if attemptOf(ev) > 1 && ev.Seq > p.RestartSeq {
			p.RestartSeq = ev.Seq
		}
	}
}

// attemptOf is a step.attempt event's Attempt (0 if unreadable).
func attemptOf(ev Event) int {
	if ev.facts != nil {
		return ev.facts.attempt
	}
	pl, _ := PayloadOf[StepAttempt](ev)
	return pl.Attempt
}

// Answer is the run's final answer in the language tag (English when it
// has none there); "" until the run ends.
func (p *Progress) Answer(tag string) string { return p.FinalIn.Or(tag, p.FinalMessage) }
