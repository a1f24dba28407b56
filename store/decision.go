package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/lib/pq"
)

// Approval is the request for a person's decision on a run's proposed
// refund, and that decision once made.
type Approval struct {
	ID          int64          `db:"id" json:"id"`
	RunID       uuid.UUID      `db:"run_id" json:"-"`
	RequestedAt time.Time      `db:"requested_at" json:"requested_at"`
	Decision    sql.NullString `db:"decision" json:"-"`
	DecidedBy   sql.NullInt64  `db:"decided_by" json:"-"`
	DecidedAt   sql.NullTime   `db:"decided_at" json:"-"`
	// Deadline is until when an approver may decide (APPROVAL_DEADLINE
	// when the run asked); unset: no deadline. Past it, a request nobody
	// decided is ApprovalExpired.
	Deadline sql.NullTime `db:"deadline" json:"-"`
}

// An approval request's decision (Approval.Decision), once made.
const (
	DecidedApproved = "approved" // an approver approved
	DecidedExpired  = "expired"  // nobody decided by the deadline (ExpireApproval)
)

const approvalColumns = `id, run_id, requested_at, decision, decided_by, decided_at, deadline`

// RequestApproval records the agent's proposal and asks for a decision: the
// run moves to awaiting_approval with action.proposed and
// approval.requested. A second request for the same run is ErrAlreadyDone;
// one for a run that must ask the provider first is ErrProviderCheck. The
// request has no deadline (RequestApprovalWithin sets one).
func (s *Store) RequestApproval(ctx context.Context, runID uuid.UUID, proposal ActionProposed) (*Run, error) {
	return s.RequestApprovalWithin(ctx, runID, proposal, 0)
}

// RequestApprovalWithin is RequestApproval with a deadline: an approver may
// decide for within from now, after which the run ends canceled by the
// system (ExpireApproval). Zero: no deadline.
func (s *Store) RequestApprovalWithin(ctx context.Context, runID uuid.UUID, proposal ActionProposed, within time.Duration) (*Run, error) {
	// Nobody is asked to decide a refund the provider may have made: on a
	// timeline no check has seen, the run is marked first (and refused).
	if _, err := s.CheckTimeline(ctx); err != nil {
		return nil, err
	}
	run, _, err := s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) {
		if r.ProviderCheck {
			return "", nil, ErrProviderCheck
		}
		var deadline sql.NullTime
		err := tx.GetContext(ctx, &deadline, `INSERT INTO approvals (run_id, deadline) VALUES ($1, now() + $2::interval)
            ON CONFLICT (run_id) DO NOTHING RETURNING deadline`, r.ID, interval(within))
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil, ErrAlreadyDone
		}
		if err != nil {
			return "", nil, fmt.Errorf("store: request approval: %w", err)
		}
		var asked ApprovalRequested
		if deadline.Valid {
			asked.Deadline = &deadline.Time
		}
		return StateAwaitingApproval, []NewEvent{EventOf(proposal), EventOf(asked)}, nil
	})
	return run, err
}

// ErrProviderCheck: the run must ask the payment provider what it holds
// under its key before anyone decides it (Run.ProviderCheck).
var ErrProviderCheck = errors.New("store: the run asks the payment provider before anyone decides it")

// DecisionOutcome is what an approve or a cancel did. It is decided under
// the run's row lock, in the transaction that records the decision, so it
// is true of the run the decision returns.
type DecisionOutcome int

const (
	// DecisionAccepted: the decision is recorded.
	DecisionAccepted DecisionOutcome = iota + 1
	// DecisionAlreadyMade: the same decision was recorded before (already
	// approved, already canceling); nothing changed.
	DecisionAlreadyMade
	// DecisionTooLate: the cancel is recorded (now or before), but the
	// refund may already have reached the payment provider (CancelTooLate):
	// the executor confirms the result before it ends the run.
	DecisionTooLate
	// DecisionRunFinished: the run had already finished; nothing changed.
	DecisionRunFinished
	// DecisionNotAllowed: the decision is refused for the reason in Why;
	// nothing changed.
	DecisionNotAllowed
)

// Decision is the outcome of an approve or a cancel, with the run as the
// decision left it.
type Decision struct {
	Outcome DecisionOutcome
	Run     *Run
	// Why, for DecisionNotAllowed, is the refusal as an *Error: CodeForbidden
	// for one's own request, CodeConflict when the run's state forbids it.
	Why error
}

// Decider is who made a decision about a run, as the decision's event
// recorded it. Events from before the role and name were recorded carry
// the user's ID only (Role ""): a page says "someone" or "an approver".
type Decider struct {
	UserID int64  // 0 when the system decided
	Role   string // the person's role when they decided
	Name   string
	System bool   // the policy decided, not a person
	Reason string // the reason a person gave, if any
}

// MaxDecisionReasonLen bounds the reason a person may give for a decision.
const MaxDecisionReasonLen = 500

// DeciderOf reads who decided from an approval.granted or cancel.requested
// event; nil for another event, or one that names no one. The Decider may
// be shared with every other reader of the event: it is read-only.
func DeciderOf(ev Event) *Decider {
	if ev.facts != nil {
		return ev.facts.decider
	}
	return deciderOf(ev)
}

func deciderOf(ev Event) *Decider {
	var (
		by  DecidedBy
		err error
	)
	switch ev.Type {
	case EventApprovalGranted:
		var p ApprovalGranted
		p, err = PayloadOf[ApprovalGranted](ev)
		by = p.DecidedBy
	case EventCancelRequested:
		var p CancelRequested
		p, err = PayloadOf[CancelRequested](ev)
		by = p.DecidedBy
	default:
		return nil
	}
	if err != nil || by.By == (DeciderRef{}) {
		return nil
	}
	return &Decider{UserID: by.By.UserID, System: by.By.Policy, Role: by.ByRole, Name: by.ByName, Reason: by.Reason}
}

// decidedBy names userID as the decider, read under the decision's
// transaction so it names the person as they were then.
func decidedBy(ctx context.Context, tx *txn, userID int64, reason string) (DecidedBy, error) {
	by := DecidedBy{By: DeciderRef{UserID: userID}, Reason: reason}
	err := tx.QueryRowxContext(ctx, `SELECT role, name FROM users WHERE id = $1`, userID).Scan(&by.ByRole, &by.ByName)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return by, fmt.Errorf("store: decider: %w", err)
	}
	return by, nil
}

// checkDecisionReason refuses a reason too long to store.
func checkDecisionReason(reason string) error {
	if utf8.RuneCountInString(reason) > MaxDecisionReasonLen {
		return Refuse(CodeInvalid, "refuse.decision_reason_long", map[string]any{"Max": MaxDecisionReasonLen})
	}
	return nil
}

// Approve records approverID's approval of the run's pending request and
// moves the run on to submitting. The approver's reason may be empty; it
// is stored with the decision in its event and its audit entry. Refusals
// are outcomes, not errors: an error means the decision could not be made
// at all.
func (s *Store) Approve(ctx context.Context, runID uuid.UUID, approverID int64, reason string) (Decision, error) {
	if err := checkDecisionReason(reason); err != nil {
		return Decision{}, err
	}
	// A database that changed over since the last check marks the runs
	// whose refunds it may have forgotten, this one included, first.
	if _, err := s.CheckTimeline(ctx); err != nil {
		return Decision{}, err
	}
	var d Decision
	run, _, err := s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) {
		// Past its deadline the request is the system's to end, whoever
		// comes first: this approval then finds it expired.
		if _, err := s.expireLocked(ctx, tx, r); err != nil {
			return "", nil, err
		}
		var a Approval
		err := tx.GetContext(ctx, &a, `SELECT `+approvalColumns+` FROM approvals WHERE run_id = $1 FOR UPDATE`, r.ID)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			d = judgeApproval(r, nil, approverID)
		case err != nil:
			return "", nil, fmt.Errorf("store: load approval: %w", err)
		default:
			d = judgeApproval(r, &a, approverID)
		}
		if d.Outcome != DecisionAccepted {
			return "", nil, nil
		}
		ev, err := grantApproval(ctx, tx, r, a.ID, approverID, reason)
		if err != nil {
			return "", nil, err
		}
		return StateSubmitting, []NewEvent{ev}, nil
	})
	if err != nil {
		return Decision{}, err
	}
	d.Run = run
	return d, nil
}

// grantApproval writes approverID's approval (request approvalID) of r,
// whose row tx holds locked, with its audit entry and the executor's wake;
// the caller moves r to submitting with the event returned.
func grantApproval(ctx context.Context, tx *txn, r *Run, approvalID, approverID int64, reason string) (NewEvent, error) {
	if _, err := tx.ExecContext(ctx, `UPDATE approvals SET decision = 'approved', decided_by = $2, decided_at = now()
        WHERE id = $1`, approvalID, approverID); err != nil {
		return NewEvent{}, fmt.Errorf("store: approve: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET next_attempt_at = now() WHERE id = $1`, r.ID); err != nil {
		return NewEvent{}, fmt.Errorf("store: approve: %w", err)
	}
	by, err := decidedBy(ctx, tx, approverID, reason)
	if err != nil {
		return NewEvent{}, err
	}
	if err := audit(ctx, tx, AuditRunApproved, RunSubject(r.ID), auditDecision("approver_id", approverID, reason)); err != nil {
		return NewEvent{}, err
	}
	if err := notifyWork(ctx, tx); err != nil {
		return NewEvent{}, err
	}
	return EventOf(ApprovalGranted{by}), nil
}

// judgeApproval decides approverID's approval of r, whose approval request
// is a (nil when it never asked for one). The order matters: a repeat is
// answered as one before anything about the run.
func judgeApproval(r *Run, a *Approval, approverID int64) Decision {
	switch {
	case a == nil && Terminal(r.State):
		return Decision{Outcome: DecisionRunFinished}
	case a == nil, a.Decision.String == DecidedExpired:
		return Decision{Outcome: DecisionNotAllowed, Why: NotAwaitingApproval(r)}
	case a.Decision.Valid:
		return Decision{Outcome: DecisionAlreadyMade}
	case r.OwnerID == approverID:
		return Decision{Outcome: DecisionNotAllowed, Why: Refuse(CodeForbidden, "refuse.approve_own", nil)}
	case Terminal(r.State):
		return Decision{Outcome: DecisionRunFinished}
	case r.CancelRequested():
		return Decision{Outcome: DecisionNotAllowed, Why: refuseIn(r.State, "refuse.being_canceled", nil)}
	case r.ProviderCheck:
		return Decision{Outcome: DecisionNotAllowed, Why: refuseIn(r.State, "refuse.provider_check", nil)}
	}
	return Decision{Outcome: DecisionAccepted}
}

// NeedsApproval is the one rule for which refunds wait for an approver:
// those of at least threshold (APPROVAL_THRESHOLD) minor units.
func NeedsApproval(amount, threshold int64) bool { return amount >= threshold }

// NotAwaitingApproval is the conflict of a decision on a run that does not
// wait for one (yet, or any more), with the state it is in.
func NotAwaitingApproval(r *Run) *Error {
	return refuseIn(r.State, "refuse.not_awaiting", map[string]any{"State": strings.ReplaceAll(r.State, "_", " ")})
}

// CancelTooLate is the one rule for how late a cancel may come: once any
// call about one of the run's operations (ops is its ledger) may have
// reached the payment provider, a cancel can no longer promise that no
// money moves; only the provider's answer can say whether it did. Until
// then (no operation, or each one Unsent: no call begun, or every call
// refused before the provider committed anything) a cancel is in time,
// and no call is begun after it.
func CancelTooLate(ops []Operation) bool {
	return slices.ContainsFunc(ops, func(op Operation) bool { return !op.Unsent })
}

// RequestCancel records that byUserID asked to cancel the run. It is a
// command, not an outcome: the executor honours it at its next safe
// boundary. Asking again is DecisionAlreadyMade; asking once the refund may
// have reached the provider (CancelTooLate) is recorded all the same, and
// DecisionTooLate.
func (s *Store) RequestCancel(ctx context.Context, runID uuid.UUID, byUserID int64) (Decision, error) {
	return s.RequestCancelBecause(ctx, runID, byUserID, "")
}

// RequestCancelBecause is RequestCancel with the reason given (may be
// empty), stored with the request in its event and its audit entry.
func (s *Store) RequestCancelBecause(ctx context.Context, runID uuid.UUID, byUserID int64, reason string) (Decision, error) {
	if err := checkDecisionReason(reason); err != nil {
		return Decision{}, err
	}
	if r, err := getRun(ctx, s.db, runID); err != nil {
		return Decision{}, err
	} else if r.IsParent() {
		// A family's cancel reaches every child (its kind never changes).
		fd, err := s.CancelFamily(ctx, runID, byUserID, reason)
		return fd.Decision, err
	}
	var d Decision
	_, _, err := s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) {
		by, err := decidedBy(ctx, tx, byUserID, reason)
		if err != nil {
			return "", nil, err
		}
		// Under the run's lock no operation can appear, and no call about
		// one begin, until we commit: the executor does both through the
		// same lock (SubmitOperation, BeginSubmit).
		before := r.CancelRequested()
		if d, err = s.cancelLocked(ctx, tx, r, byUserID, by); err != nil {
			return "", nil, err
		}
		if before || Terminal(r.State) {
			return "", nil, nil
		}
		// Wake the executor now, whatever it was waiting for.
		return "", nil, notifyWork(ctx, tx)
	})
	if err != nil {
		return Decision{}, err
	}
	return d, nil
}

// LastDecisions reads the latest decision made about each of runIDs (its
// approval.granted or cancel.requested event), for a page that must say
// who decided a run it showed. A run with none is not in the map.
func (s *Store) LastDecisions(ctx context.Context, runIDs []uuid.UUID) (map[uuid.UUID]Event, error) {
	var evs []Event
	if err := s.db.SelectContext(ctx, &evs, `SELECT DISTINCT ON (run_id) `+eventColumns+` FROM run_events
        WHERE run_id = ANY($1) AND type IN ('`+EventApprovalGranted+`', '`+EventCancelRequested+`')
        ORDER BY run_id, seq DESC`, pq.Array(runIDs)); err != nil {
		return nil, fmt.Errorf("store: last decisions: %w", err)
	}
	out := make(map[uuid.UUID]Event, len(evs))
	for _, ev := range evs {
		out[ev.RunID] = ev
	}
	return out, nil
}

// auditDecision is a decision's audit detail: who, under key, and the
// reason when one was given.
func auditDecision(key string, userID int64, reason string) map[string]any {
	m := map[string]any{key: userID}
	if reason != "" {
		m["reason"] = reason
	}
	return m
}
