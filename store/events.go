package store

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// The event vocabulary: every type a run's log can hold, and the payload
// each carries. A payload's Go type names its event type, so nothing else
// does; handlers/openapi.json documents each as EventPayload_<type>, and
// handlers/openapi_events_test.go keeps the two in step.

// Event classes: business events are audit history and stay; presentation
// events (the model's narration) are kept only for the replay window.
const (
	ClassBusiness     = "business"
	ClassPresentation = "presentation"
)

// Event types.
const (
	EventRunCreated           = "run.created"           // a customer asked for a refund
	EventRunPlanning          = "run.planning"          // the agent began looking at the request
	EventActionProposed       = "action.proposed"       // the agent proposed the refund it will make
	EventApprovalRequested    = "approval.requested"    // the run waits for an approver
	EventApprovalGranted      = "approval.granted"      // an approver, or the policy, approved
	EventApprovalExpired      = "approval.expired"      // nobody decided by the deadline: the system canceled the run
	EventCancelRequested      = "cancel.requested"      // someone asked to cancel
	EventCancelTooLate        = "cancel.too_late"       // the cancel came after the refund reached the provider
	EventOperationSubmitted   = "operation.submitted"   // the refund's intent is in the ledger, before the provider call
	EventOperationSucceeded   = "operation.succeeded"   // the provider confirmed the refund
	EventOperationFailed      = "operation.failed"      // the provider refused the refund
	EventOperationReconciling = "operation.reconciling" // the outcome is unknown and being verified
	EventMessageFinal         = "message.final"         // the run's one final answer
	EventRunCompleted         = "run.completed"         // the run ended completed
	EventRunFailed            = "run.failed"            // the run ended failed
	EventRunCanceled          = "run.canceled"          // the run ended canceled
	EventNarrationDelta       = "narration.delta"       // a piece of the model's text (presentation)
	// EventStepAttempt marks where the executor began a narrating step.
	// Attempt 2 or later is a retry (a worker died, a lease was taken over,
	// the step failed): the narration before it belongs to an abandoned
	// attempt. It is presentation, like the narration it divides: kept and
	// pruned with it, never a line of the business history.
	EventStepAttempt   = "step.attempt"
	EventChildStarted  = "child.started"  // a family's parent started a child run
	EventChildFinished = "child.finished" // a family's child ended (in the parent's log)
)

// ClassOf tells an event type's retention class. Only narration and the
// attempt boundaries within it are presentation; everything else is
// business history.
func ClassOf(typ string) string {
	if typ == EventNarrationDelta || typ == EventStepAttempt {
		return ClassPresentation
	}
	return ClassBusiness
}

// Payload is an event's payload. Its type names the event's type.
type Payload interface{ EventType() string }

// RunCreated is run.created's payload: the request as the customer made it.
type RunCreated struct {
	OrderID  int64  `json:"order_id"` // 0 for a family's parent, which has no order
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Reason   string `json:"reason"`
	// Refunds, on a family's parent, are the request's refunds, one per
	// child, in family order.
	Refunds []RefundItem `json:"refunds,omitempty"`
}

// ChildStarted is child.started's payload, in a parent's log: the child run
// made for one of the request's refunds, and its place in the family.
type ChildStarted struct {
	ChildRunID uuid.UUID `json:"child_run_id"`
	Position   int       `json:"position"`
	OrderID    int64     `json:"order_id"`
	Amount     int64     `json:"amount"`
	Currency   string    `json:"currency"`
}

// ChildFinished is child.finished's payload, in a parent's log, committed
// with the child's own terminal event: how the child ended and what its
// ledger says was refunded (0 unless the provider confirmed it).
type ChildFinished struct {
	ChildRunID uuid.UUID `json:"child_run_id"`
	OrderID    int64     `json:"order_id"`
	State      string    `json:"state"`
	// Outcome is how the child ended, as its own page names it
	// (EndedAs): a failed child was declined by the provider or not.
	Outcome  string `json:"outcome,omitempty"`
	Refunded int64  `json:"refunded"`
	Currency string `json:"currency"`
}

// RunPlanning is run.planning's payload: empty.
type RunPlanning struct{}

// ActionProposed is action.proposed's payload: the refund the agent will make.
type ActionProposed struct {
	Action   string `json:"action"` // always "refund"
	OrderID  int64  `json:"order_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// ApprovalRequested is approval.requested's payload: until when an
// approver may decide (APPROVAL_DEADLINE), absent when there is no
// deadline.
type ApprovalRequested struct {
	Deadline *time.Time `json:"deadline,omitempty"`
}

// ApprovalExpired is approval.expired's payload: nobody decided between
// the request and its deadline, so the system canceled the run (its
// message.final and run.canceled follow in the same transaction).
type ApprovalExpired struct {
	RequestedAt time.Time `json:"requested_at"`
	Deadline    time.Time `json:"deadline"`
}

// Window is how long an approver had to decide.
func (p ApprovalExpired) Window() time.Duration { return p.Deadline.Sub(p.RequestedAt) }

// DecidedBy is who made a decision, as they were when they made it. Events
// from before role and name were recorded carry By only.
type DecidedBy struct {
	By     DeciderRef `json:"by"`
	ByRole string     `json:"by_role,omitempty"`
	ByName string     `json:"by_name,omitempty"`
	Reason string     `json:"reason,omitempty"`
}

// ApprovalGranted is approval.granted's payload.
type ApprovalGranted struct{ DecidedBy }

// CancelRequested is cancel.requested's payload.
type CancelRequested struct{ DecidedBy }

// CancelTooLatePayload is cancel.too_late's payload: the operation the
// cancel could not stop. (CancelTooLate is the rule that decides it.)
type CancelTooLatePayload struct {
	OperationID uuid.UUID `json:"operation_id"`
}

// OperationFacts are what every operation event says: which ledger row,
// for how much.
type OperationFacts struct {
	OperationID uuid.UUID `json:"operation_id"`
	Amount      int64     `json:"amount"`
	Currency    string    `json:"currency"`
}

// OperationSubmitted is operation.submitted's payload.
type OperationSubmitted struct{ OperationFacts }

// OperationSucceeded is operation.succeeded's payload, with the provider's
// reference for the refund.
type OperationSucceeded struct {
	OperationFacts
	ProviderRef string `json:"provider_ref"`
	// Recovered: the refund was found at the provider under the run's key
	// after the database had lost its record of it (a failover), not made
	// now (Store.RecordFound).
	Recovered bool `json:"recovered,omitempty"`
}

// OperationFailed is operation.failed's payload, with the provider's reason.
type OperationFailed struct {
	OperationFacts
	Reason string `json:"reason"`
	// Recovered is OperationSucceeded's: a decline found at the provider.
	Recovered bool `json:"recovered,omitempty"`
}

// OperationReconciling is operation.reconciling's payload, with why the
// outcome is unknown.
type OperationReconciling struct {
	OperationFacts
	Reason string `json:"reason"`
}

// MessageFinal is message.final's payload: the final answer's text.
type MessageFinal struct {
	Body string `json:"body"`
	// In is Body in the other languages the words table speaks, by BCP 47
	// tag (store.Answer); absent for answers from before languages.
	In Translations `json:"in,omitempty"`
}

// RunCompleted is run.completed's payload.
type RunCompleted struct {
	State string `json:"state"` // always "completed"
}

// RunFailed is run.failed's payload.
type RunFailed struct {
	State string `json:"state"` // always "failed"
}

// RunCanceled is run.canceled's payload.
type RunCanceled struct {
	State string `json:"state"` // always "canceled"
}

// NarrationDelta is narration.delta's payload.
type NarrationDelta struct {
	Text string `json:"text"`
	// CoalescedFrom is never stored: a stream that merges deltas for a
	// slow reader sets it to the first merged seq.
	CoalescedFrom int64 `json:"coalesced_from,omitempty"`
}

// StepAttempt is step.attempt's payload: the step begun, and its attempt
// number counting from 1.
type StepAttempt struct {
	Step    string `json:"step"`
	Attempt int    `json:"attempt"`
}

func (RunCreated) EventType() string           { return EventRunCreated }
func (RunPlanning) EventType() string          { return EventRunPlanning }
func (ActionProposed) EventType() string       { return EventActionProposed }
func (ApprovalRequested) EventType() string    { return EventApprovalRequested }
func (ApprovalGranted) EventType() string      { return EventApprovalGranted }
func (ApprovalExpired) EventType() string      { return EventApprovalExpired }
func (CancelRequested) EventType() string      { return EventCancelRequested }
func (CancelTooLatePayload) EventType() string { return EventCancelTooLate }
func (OperationSubmitted) EventType() string   { return EventOperationSubmitted }
func (OperationSucceeded) EventType() string   { return EventOperationSucceeded }
func (OperationFailed) EventType() string      { return EventOperationFailed }
func (OperationReconciling) EventType() string { return EventOperationReconciling }
func (MessageFinal) EventType() string         { return EventMessageFinal }
func (RunCompleted) EventType() string         { return EventRunCompleted }
func (RunFailed) EventType() string            { return EventRunFailed }
func (RunCanceled) EventType() string          { return EventRunCanceled }
func (NarrationDelta) EventType() string       { return EventNarrationDelta }
func (ChildStarted) EventType() string         { return EventChildStarted }
func (ChildFinished) EventType() string        { return EventChildFinished }
func (StepAttempt) EventType() string          { return EventStepAttempt }

// Payloads returns a zero payload of every event type, in the order of the
// constants above.
func Payloads() []Payload {
	return []Payload{
		RunCreated{}, RunPlanning{}, ActionProposed{}, ApprovalRequested{}, ApprovalGranted{},
		ApprovalExpired{}, CancelRequested{}, CancelTooLatePayload{}, OperationSubmitted{}, OperationSucceeded{},
		OperationFailed{}, OperationReconciling{}, MessageFinal{}, RunCompleted{}, RunFailed{},
		RunCanceled{}, NarrationDelta{}, StepAttempt{}, ChildStarted{}, ChildFinished{},
	}
}

// EventTypes lists every event type the store can write.
func EventTypes() []string {
	ps := Payloads()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.EventType()
	}
	return out
}

// NewEvent is an event to append, made by EventOf.
type NewEvent struct{ payload Payload }

// EventOf is the event that carries p; its type and class follow from p.
func EventOf(p Payload) NewEvent { return NewEvent{payload: p} }

// Type is the event's type, "" for the zero NewEvent.
func (e NewEvent) Type() string {
	if e.payload == nil {
		return ""
	}
	return e.payload.EventType()
}

// PayloadOf decodes ev's payload as P. An event of another type, or a
// payload that does not decode, is an error and the zero P.
func PayloadOf[P Payload](ev Event) (P, error) {
	var p P
	if ev.Type != p.EventType() {
		return p, fmt.Errorf("store: event %d is %s, not %s", ev.Seq, ev.Type, p.EventType())
	}
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		var zero P
		return zero, fmt.Errorf("store: %s payload: %w", ev.Type, err)
	}
	return p, nil
}

// OperationNews is what an operation event says about its ledger row.
type OperationNews struct {
	OperationFacts
	State       string // the ledger state the event records
	ProviderRef string
	Reason      string
	// Recovered: the outcome was found at the provider after the database
	// lost its record of the refund (a failover).
	Recovered bool
}

// OperationNewsOf reads an operation event; false for another event, or
// one whose payload does not decode.
func OperationNewsOf(ev Event) (OperationNews, bool) {
	var (
		n   OperationNews
		err error
	)
	switch ev.Type {
	case EventOperationSubmitted:
		var p OperationSubmitted
		p, err = PayloadOf[OperationSubmitted](ev)
		n = OperationNews{OperationFacts: p.OperationFacts, State: OpSubmitted}
	case EventOperationSucceeded:
		var p OperationSucceeded
		p, err = PayloadOf[OperationSucceeded](ev)
		n = OperationNews{OperationFacts: p.OperationFacts, State: OpSucceeded, ProviderRef: p.ProviderRef, Recovered: p.Recovered}
	case EventOperationFailed:
		var p OperationFailed
		p, err = PayloadOf[OperationFailed](ev)
		n = OperationNews{OperationFacts: p.OperationFacts, State: OpFailed, Reason: p.Reason, Recovered: p.Recovered}
	case EventOperationReconciling:
		var p OperationReconciling
		p, err = PayloadOf[OperationReconciling](ev)
		n = OperationNews{OperationFacts: p.OperationFacts, State: OpReconciling, Reason: p.Reason}
	default:
		return OperationNews{}, false
	}
	return n, err == nil
}

// DeciderRef is who made a decision: a user, by ID, or the approval
// policy. In JSON it is the user's ID as a number, or the string "policy".
type DeciderRef struct {
	UserID int64
	Policy bool
}

// MarshalJSON writes the user's ID, or "policy".
func (a DeciderRef) MarshalJSON() ([]byte, error) {
	if a.Policy {
		return []byte(`"policy"`), nil
	}
	return strconv.AppendInt(nil, a.UserID, 10), nil
}

// UnmarshalJSON reads a user's ID or "policy".
func (a *DeciderRef) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if s != "policy" {
			return fmt.Errorf("store: decider %q is neither a user ID nor \"policy\"", s)
		}
		*a = DeciderRef{Policy: true}
		return nil
	}
	var id int64
	if err := json.Unmarshal(b, &id); err != nil {
		return fmt.Errorf("store: decider: %w", err)
	}
	*a = DeciderRef{UserID: id}
	return nil
}
