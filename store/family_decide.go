package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
)

// ApproveFamily records approverID's approval of each child of the parent
// that waits for one, in one transaction: the approver's "approve all" on
// a request. When only is not empty, only the children it names are
// approved (those the approver was shown); a child it names that no longer
// waits says why in its own Decision. Each child's approval is what
// Approve records for a single run, and a repeat is DecisionAlreadyMade
// for that child. The family's outcome is DecisionAccepted when any child
// was approved now, DecisionAlreadyMade when every child concerned had
// been, and otherwise the refusal of the first child that refused
// (DecisionNotAllowed), or DecisionRunFinished for a family that ended.
// The children are locked in ID order, as CancelFamily locks them.
func (s *Store) ApproveFamily(ctx context.Context, parentID uuid.UUID, approverID int64, reason string, only []uuid.UUID) (FamilyDecision, error) {
	if err := checkDecisionReason(reason); err != nil {
		return FamilyDecision{}, err
	}
	// As Approve: runs the database may have forgotten a refund of are
	// marked before anyone decides them.
	if _, err := s.CheckTimeline(ctx); err != nil {
		return FamilyDecision{}, err
	}
	var fd FamilyDecision
	err := s.inTx(ctx, func(tx *txn) error {
		fd = FamilyDecision{}
		kids, err := lockChildren(ctx, tx, parentID)
		if err != nil {
			return err
		}
		parent, err := getRun(ctx, tx, parentID)
		if err != nil {
			return err
		}
		if !parent.IsParent() {
			return ErrNotFound
		}
		fd.Run = parent
		for i := range kids {
			if len(only) > 0 && !slices.Contains(only, kids[i].ID) {
				continue
			}
			d, asked, err := s.approveChild(ctx, tx, &kids[i], approverID, reason)
			if err != nil {
				return err
			}
			// A child that never asked for a decision is not part of
			// "all", unless the approver named it.
			if asked || len(only) > 0 {
				fd.Children = append(fd.Children, d)
			}
		}
		fd.Outcome, fd.Why = familyApprovalOutcome(parent, fd.Children)
		return nil
	})
	if err != nil {
		return FamilyDecision{}, err
	}
	return fd, nil
}

// approveChild approves r, whose row tx holds locked, as Approve does;
// asked says whether r ever asked for an approval.
func (s *Store) approveChild(ctx context.Context, tx *txn, r *Run, approverID int64, reason string) (d Decision, asked bool, err error) {
	if _, err := s.expireLocked(ctx, tx, r); err != nil {
		return d, false, err
	}
	var a Approval
	err = tx.GetContext(ctx, &a, `SELECT `+approvalColumns+` FROM approvals WHERE run_id = $1 FOR UPDATE`, r.ID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		d = judgeApproval(r, nil, approverID)
	case err != nil:
		return d, false, fmt.Errorf("store: load approval: %w", err)
	default:
		asked = true
		d = judgeApproval(r, &a, approverID)
	}
	d.Run = r
	if d.Outcome != DecisionAccepted {
		return d, asked, nil
	}
	ev, err := grantApproval(ctx, tx, r, a.ID, approverID, reason)
	if err != nil {
		return d, asked, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = $2 WHERE id = $1`, r.ID, StateSubmitting); err != nil {
		return d, asked, fmt.Errorf("store: set run state: %w", err)
	}
	r.State = StateSubmitting
	evs, err := s.appendEvents(ctx, tx, r.ID, ev)
	if err != nil {
		return d, asked, err
	}
	r.LastSeq = evs[len(evs)-1].Seq
	return d, asked, nil
}

// familyApprovalOutcome is what an approval of a family's children did,
// from each child's outcome.
func familyApprovalOutcome(parent *Run, kids []Decision) (DecisionOutcome, error) {
	has := func(o DecisionOutcome) bool {
		return slices.ContainsFunc(kids, func(d Decision) bool { return d.Outcome == o })
	}
	switch {
	case has(DecisionAccepted):
		return DecisionAccepted, nil
	case has(DecisionAlreadyMade):
		return DecisionAlreadyMade, nil
	case has(DecisionNotAllowed):
		i := slices.IndexFunc(kids, func(d Decision) bool { return d.Outcome == DecisionNotAllowed })
		return DecisionNotAllowed, kids[i].Why
	case Terminal(parent.State):
		return DecisionRunFinished, nil
	}
	return DecisionNotAllowed, refuseIn(parent.State, "refuse.family_none_waiting", nil)
}

// FamilyAskedApproval reports whether any child of the parent ever asked
// for an approval: an approver may see and decide such a request.
func (s *Store) FamilyAskedApproval(ctx context.Context, parentID uuid.UUID) (bool, error) {
	var asked bool
	if err := s.db.GetContext(ctx, &asked, `SELECT EXISTS (SELECT 1 FROM approvals a JOIN runs r ON r.id = a.run_id
        WHERE r.parent_run_id = $1)`, parentID); err != nil {
		return false, fmt.Errorf("store: family approvals: %w", err)
	}
	return asked, nil
}
