package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Snapshot is one consistent read of a run: everything on it is as of
// CoveringSeq, the run's last_seq at that read. A live stream that goes on
// strictly after CoveringSeq neither misses nor repeats anything.
type Snapshot struct {
	Run          *Run
	CoveringSeq  int64
	ReplayFloor  int64
	Operations   []Operation
	Approval     *Approval     // nil until approval is requested
	FinalMessage *FinalMessage // nil until the run finishes
	// Events are the stored events with seq <= CoveringSeq: all business
	// events, and the narration the replay window still holds.
	Events []Event
	// Marks are the events of MarkTypes with seq <= CoveringSeq (who
	// decided, where a step began again), which ProgressOf folds; a head
	// snapshot has them too.
	Marks []Event
}

// Snapshot reads a run in one REPEATABLE READ transaction, so its state, its
// ledger, its final message and its events all agree with CoveringSeq.
func (s *Store) Snapshot(ctx context.Context, runID uuid.UUID) (*Snapshot, error) {
	return s.snapshot(ctx, runID, true)
}

// SnapshotHead is Snapshot without Events: the run's state as of
// CoveringSeq, for a reader that takes the events from its own cursor (a
// stream that resumes) and need not read the whole log again.
func (s *Store) SnapshotHead(ctx context.Context, runID uuid.UUID) (*Snapshot, error) {
	return s.snapshot(ctx, runID, false)
}

func (s *Store) snapshot(ctx context.Context, runID uuid.UUID, withEvents bool) (*Snapshot, error) {
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	defer tx.Rollback()
	snap, err := readSnapshot(ctx, tx, runID, withEvents)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	return snap, nil
}

func readSnapshot(ctx context.Context, tx *sqlx.Tx, runID uuid.UUID, withEvents bool) (*Snapshot, error) {
	r, err := getRun(ctx, tx, runID)
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Run: r, CoveringSeq: r.LastSeq, ReplayFloor: r.ReplayFloor}
	if snap.Operations, err = operationsByRun(ctx, tx, runID); err != nil {
		return nil, err
	}
	var a Approval
	switch err := tx.GetContext(ctx, &a, `SELECT `+approvalColumns+` FROM approvals WHERE run_id = $1`, runID); {
	case err == nil:
		snap.Approval = &a
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("store: snapshot approval: %w", err)
	}
	var m FinalMessage
	switch err := tx.GetContext(ctx, &m, `SELECT run_id, body, created_at FROM final_messages WHERE run_id = $1`, runID); {
	case err == nil:
		snap.FinalMessage = &m
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("store: snapshot message: %w", err)
	}
	snap.Events = []Event{}
	if !withEvents {
		if err := tx.SelectContext(ctx, &snap.Marks, `SELECT `+eventColumns+` FROM run_events
            WHERE run_id = $1 AND seq <= $2 AND type = ANY($3) ORDER BY seq`, runID, r.LastSeq, pq.Array(MarkTypes)); err != nil {
			return nil, fmt.Errorf("store: snapshot marks: %w", err)
		}
		return snap, nil
	}
	if err := tx.SelectContext(ctx, &snap.Events, `SELECT `+eventColumns+` FROM run_events
        WHERE run_id = $1 AND seq <= $2 ORDER BY seq`, runID, r.LastSeq); err != nil {
		return nil, fmt.Errorf("store: snapshot events: %w", err)
	}
	for _, ev := range snap.Events {
		if slices.Contains(MarkTypes, ev.Type) {
			snap.Marks = append(snap.Marks, ev)
		}
	}
	return snap, nil
}
