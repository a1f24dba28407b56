package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// Snapshot is one consistent read of a run: everything on it is as of
// CoveringSeq, the run's last_seq at that read. A live stream that goes on
// strictly after CoveringSeq neither misses nor repeats anything.
type Snapshot struct {
	Run         *Run
	CoveringSeq int64
	ReplayFloor int64
	Operations  []Operation
	// Calls are every call made to the provider about the operations,
	// oldest first; read with Events only.
	Calls        []ProviderCall
	Approval     *Approval     // nil until approval is requested
	FinalMessage *FinalMessage // nil until the run finishes
	// Events are the stored events with seq <= CoveringSeq: all business
	// events, and the narration the replay window still holds.
	Events []Event
	// Marks are the events of markTypes with seq <= CoveringSeq (who
	// decided, where a step began again), which ProgressOf folds; a head
	// snapshot has them too.
	Marks []Event
}

// Snapshot reads a run in one REPEATABLE READ transaction, so its state, its
// ledger, its final message and its events all agree with CoveringSeq.
func (s *Store) Snapshot(ctx context.Context, runID uuid.UUID) (*Snapshot, error) {
	return s.snapshot(ctx, runID, readEvents)
}

// SnapshotHead is Snapshot without Events: the run's state as of
// CoveringSeq, for a reader that takes the events from its own cursor (a
// stream that resumes) and need not read the whole log again.
func (s *Store) SnapshotHead(ctx context.Context, runID uuid.UUID) (*Snapshot, error) {
	return s.snapshot(ctx, runID, readMarks)
}

// SnapshotState is SnapshotHead without Marks: it reads nothing of the
// log, for a reader that shows no events and no actors (the JSON API's
// snapshot), so its cost does not grow with the run's log.
func (s *Store) SnapshotState(ctx context.Context, runID uuid.UUID) (*Snapshot, error) {
	return s.snapshot(ctx, runID, readNoEvents)
}

// What a snapshot reads of the run's log.
type logPart int

const (
	readNoEvents logPart = iota
	readMarks            // the markTypes events, through their partial index
	readEvents           // every stored event up to CoveringSeq
)

func (s *Store) snapshot(ctx context.Context, runID uuid.UUID, part logPart) (*Snapshot, error) {
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	defer tx.Rollback()
	snap, err := readSnapshot(ctx, tx, runID, part)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	return snap, nil
}

// marksSQL reads the markTypes events. The types are spelled out, not a
// parameter, so the planner uses the partial index run_events_marks_idx
// (migration 00010) and reads only the marks, however long the log.
var marksSQL = `SELECT ` + eventColumns + ` FROM run_events
WHERE run_id = $1 AND seq <= $2 AND type IN ('` + strings.Join(markTypes, "', '") + `') ORDER BY seq`

func readSnapshot(ctx context.Context, tx *sqlx.Tx, runID uuid.UUID, part logPart) (*Snapshot, error) {
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
	switch part {
	case readNoEvents:
		return snap, nil
	case readMarks:
		if err := tx.SelectContext(ctx, &snap.Marks, marksSQL, runID, r.LastSeq); err != nil {
			return nil, fmt.Errorf("store: snapshot marks: %w", err)
		}
		return snap, nil
	}
	if err := tx.SelectContext(ctx, &snap.Events, `SELECT `+eventColumns+` FROM run_events
        WHERE run_id = $1 AND seq <= $2 ORDER BY seq`, runID, r.LastSeq); err != nil {
		return nil, fmt.Errorf("store: snapshot events: %w", err)
	}
	if snap.Calls, err = providerCallsByRun(ctx, tx, runID); err != nil {
		return nil, err
	}
	for _, ev := range snap.Events {
		if slices.Contains(markTypes, ev.Type) {
			snap.Marks = append(snap.Marks, ev)
		}
	}
	return snap, nil
}
