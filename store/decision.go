package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
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
}

const approvalColumns = `id, run_id, requested_at, decision, decided_by, decided_at`

// RequestApproval records the agent's proposal and asks for a decision: the
// run moves to awaiting_approval with action.proposed and
// approval.requested. A second request for the same run is ErrAlreadyDone.
func (s *Store) RequestApproval(ctx context.Context, runID uuid.UUID, proposal map[string]any) (*Run, error) {
	run, _, err := s.Mutate(ctx, runID, func(tx *sqlx.Tx, r *Run) (string, []NewEvent, error) {
		res, err := tx.ExecContext(ctx, `INSERT INTO approvals (run_id) VALUES ($1) ON CONFLICT (run_id) DO NOTHING`, r.ID)
		if err != nil {
			return "", nil, fmt.Errorf("store: request approval: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return "", nil, ErrAlreadyDone
		}
		return StateAwaitingApproval, []NewEvent{
			{Type: EventActionProposed, Payload: proposal},
			{Type: EventApprovalRequested},
		}, nil
	})
	return run, err
}

// Approve records approverID's approval of the run's pending request and
// moves the run on to submitting. Approving an approved run is
// ErrAlreadyDone; approving a canceled, finished or undecidable run is
// ErrConflict; approving one's own request is ErrForbidden.
func (s *Store) Approve(ctx context.Context, runID uuid.UUID, approverID int64) (*Run, error) {
	run, _, err := s.Mutate(ctx, runID, func(tx *sqlx.Tx, r *Run) (string, []NewEvent, error) {
		var a Approval
		err := tx.GetContext(ctx, &a, `SELECT `+approvalColumns+` FROM approvals WHERE run_id = $1 FOR UPDATE`, r.ID)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return "", nil, Errorf(CodeConflict, "this run is not waiting for an approval")
		case err != nil:
			return "", nil, fmt.Errorf("store: load approval: %w", err)
		case a.Decision.Valid:
			return "", nil, ErrAlreadyDone
		case r.OwnerID == approverID:
			return "", nil, Errorf(CodeForbidden, "you cannot approve your own refund request")
		case Terminal(r.State):
			return "", nil, Errorf(CodeConflict, "the run has already %s", r.State)
		case r.CancelRequested():
			return "", nil, Errorf(CodeConflict, "the run is being canceled")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE approvals SET decision = 'approved', decided_by = $2, decided_at = now()
            WHERE id = $1`, a.ID, approverID); err != nil {
			return "", nil, fmt.Errorf("store: approve: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET next_attempt_at = now() WHERE id = $1`, r.ID); err != nil {
			return "", nil, fmt.Errorf("store: approve: %w", err)
		}
		if err := audit(ctx, tx, AuditRunApproved, RunSubject(r.ID), map[string]any{"approver_id": approverID}); err != nil {
			return "", nil, err
		}
		return StateSubmitting, []NewEvent{{Type: EventApprovalGranted, Payload: map[string]any{"by": approverID}}}, nil
	})
	return run, err
}

// ApprovalByRun loads a run's approval request.
func (s *Store) ApprovalByRun(ctx context.Context, runID uuid.UUID) (*Approval, error) {
	var a Approval
	err := s.db.GetContext(ctx, &a, `SELECT `+approvalColumns+` FROM approvals WHERE run_id = $1`, runID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: load approval: %w", err)
	}
	return &a, nil
}

// RequestCancel records that byUserID asked to cancel the run. It is a
// command, not an outcome: the executor honours it at its next safe
// boundary. Asking twice is ErrAlreadyDone; asking once the run has finished
// is ErrConflict.
func (s *Store) RequestCancel(ctx context.Context, runID uuid.UUID, byUserID int64) (*Run, error) {
	run, _, err := s.Mutate(ctx, runID, func(tx *sqlx.Tx, r *Run) (string, []NewEvent, error) {
		switch {
		case Terminal(r.State):
			return "", nil, Errorf(CodeConflict, "the run has already %s", r.State)
		case r.CancelRequested():
			return "", nil, ErrAlreadyDone
		}
		// Wake the executor now, whatever it was waiting for.
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET cancel_requested_at = now(), next_attempt_at = now()
            WHERE id = $1`, r.ID); err != nil {
			return "", nil, fmt.Errorf("store: request cancel: %w", err)
		}
		r.CancelRequestedAt = sql.NullTime{Time: time.Now(), Valid: true}
		if err := audit(ctx, tx, AuditRunCancelRequested, RunSubject(r.ID), map[string]any{"by": byUserID}); err != nil {
			return "", nil, err
		}
		return "", []NewEvent{{Type: EventCancelRequested, Payload: map[string]any{"by": byUserID}}}, nil
	})
	return run, err
}
