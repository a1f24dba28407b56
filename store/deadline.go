package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Decisions end (APPROVAL_DEADLINE). A run that asked for a decision with a
// deadline and still waits for it when the deadline passes ends canceled by
// the system: approval.expired, its final answer and run.canceled, in one
// transaction under the run's row lock, with child.finished in its parent's
// log when it is a family's child. Whoever first holds that lock after the
// deadline ends it: the worker the deadline wakes (ExpireApproval), or an
// approve or a cancel that came too late, which then finds the run ended as
// it would have a moment later. So of an approve, a cancel and the deadline,
// exactly one wins, and the others are answered with the state it left.

// ExpireApproval ends the run canceled by the system if it still waits for
// a decision whose deadline has passed, and says whether it did. A run that
// waits for a decision due later, or with no deadline, or for nothing, or
// whose cancel was asked for (the executor honours that), is left as it is.
func (s *Store) ExpireApproval(ctx context.Context, runID uuid.UUID) (expired bool, err error) {
	_, _, err = s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) {
		var err error
		expired, err = s.expireLocked(ctx, tx, r)
		return "", nil, err
	})
	return expired, err
}

// expireLocked is ExpireApproval on r, whose row tx holds locked; it moves r
// to canceled itself when the deadline has passed. "Passed" is as of the
// transaction's start: a decision whose transaction began before the
// deadline is in time, however long it then waited for the lock.
func (s *Store) expireLocked(ctx context.Context, tx *txn, r *Run) (bool, error) {
	// A run marked for a provider check (a failover) may have been refunded
	// already: it expires only once the provider has said it was not.
	if r.State != StateAwaitingApproval || r.CancelRequested() || r.ProviderCheck {
		return false, nil
	}
	var a struct {
		ID          int64     `db:"id"`
		RequestedAt time.Time `db:"requested_at"`
		Deadline    time.Time `db:"deadline"`
	}
	err := tx.GetContext(ctx, &a, `SELECT id, requested_at, deadline FROM approvals
        WHERE run_id = $1 AND decision IS NULL AND deadline <= now() FOR UPDATE`, r.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: expire approval: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE approvals SET decision = '`+DecidedExpired+`', decided_at = now() WHERE id = $1`, a.ID); err != nil {
		return false, fmt.Errorf("store: expire approval: %w", err)
	}
	p := ApprovalExpired{RequestedAt: a.RequestedAt, Deadline: a.Deadline}
	if s.answers == nil {
		return false, ErrNoAnswers
	}
	final, err := insertFinal(ctx, tx, r.ID, s.answers.Expired(p.Window()))
	if err != nil {
		return false, err
	}
	if err := tx.GetContext(ctx, &r.FinishedAt, `UPDATE runs SET state = $2, finished_at = now() WHERE id = $1 RETURNING finished_at`,
		r.ID, StateCanceled); err != nil {
		return false, fmt.Errorf("store: set run state: %w", err)
	}
	r.State = StateCanceled
	if r.ParentRunID.Valid {
		if err := s.childEnded(ctx, tx, r); err != nil {
			return false, err
		}
	}
	evs, err := s.appendEvents(ctx, tx, r.ID, EventOf(p), final, EventOf(RunCanceled{State: StateCanceled}))
	if err != nil {
		return false, err
	}
	r.LastSeq = evs[len(evs)-1].Seq
	return true, nil
}

// NextDeadline is how long until the earliest deadline of a decision still
// awaited passes, measured by the database's clock (the one the deadline is
// checked by); ok is false when no such deadline lies ahead.
func (s *Store) NextDeadline(ctx context.Context) (left time.Duration, ok bool, err error) {
	var us int64
	err = s.db.GetContext(ctx, &us, `SELECT (EXTRACT(EPOCH FROM a.deadline - now()) * 1000000)::bigint
        FROM approvals a JOIN runs r ON r.id = a.run_id
        WHERE a.decision IS NULL AND a.deadline > now()
          AND r.state = 'awaiting_approval' AND r.cancel_requested_at IS NULL
        ORDER BY a.deadline LIMIT 1`)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: next deadline: %w", err)
	}
	return time.Duration(us) * time.Microsecond, true, nil
}
