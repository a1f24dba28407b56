package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
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
	// events, and the narration the replay window still holds (of a
	// SnapshotPage, only the latest pieces of the attempt shown, each
	// with its run, seq, type and class but not its ID, payload or time:
	// its text is NarrationText).
	Events []Event
	// NarrationLeftOut counts the pieces of the shown attempt's narration
	// that a SnapshotPage left out of Events: they are kept, not read.
	NarrationLeftOut int
	// narrationText is a SnapshotPage's narration, decoded by PostgreSQL
	// as it read the pieces (payload->>'text'), by seq: NarrationText.
	narrationText map[int64]string
	// Marks are the events of markTypes with seq <= CoveringSeq (who
	// decided, where a step began again), which ProgressOf folds; a head
	// snapshot has them too.
	Marks []Event
	// StateSince is when the latest event that set the run's state
	// committed, while the run waits on someone else (Waits); zero
	// otherwise and for a SnapshotState: how long the current step has
	// waited, for a page's step timer.
	StateSince time.Time
}

// Snapshot reads a run in one REPEATABLE READ transaction, so its state, its
// ledger, its final message and its events all agree with CoveringSeq.
func (s *Store) Snapshot(ctx context.Context, runID uuid.UUID) (*Snapshot, error) {
	return s.snapshot(ctx, runID, readEvents)
}

// SnapshotPage is Snapshot with, of the narration, only the latest pieces
// of the attempt the page shows (after Progress.RestartSeq), at most
// narration of them (at least one); the others are counted in
// NarrationLeftOut. A run page so reads and renders what it shows, however
// long the run narrated; of each piece it reads only its seq and its text
// (see Events).
func (s *Store) SnapshotPage(ctx context.Context, runID uuid.UUID, narration int) (*Snapshot, error) {
	return s.snapshot(ctx, runID, logPart{narration: max(narration, 1)})
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

// What a snapshot reads of the run's log: nothing, the marks, or the
// events (narration > 0: the business events and that much narration).
type logPart struct {
	marks, events bool
	narration     int
}

var (
	readNoEvents = logPart{}
	readMarks    = logPart{marks: true}  // the markTypes events, through their partial index
	readEvents   = logPart{events: true} // every stored event up to CoveringSeq
)

func (s *Store) snapshot(ctx context.Context, runID uuid.UUID, part logPart) (*Snapshot, error) {
	if err := s.warm(ctx); err != nil {
		return nil, err
	}
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	defer tx.Rollback()
	snap, err := readSnapshot(ctx, preparedTx{tx, s}, runID, part)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	return snap, nil
}

// snapshotSQL are a snapshot's statements, among the hot ones (warm): the
// server plans each once per connection, not at every page (preparedTx).
var snapshotSQL = []string{runByIDSQL, operationsByRunSQL, approvalByRunSQL, finalMessageByRunSQL, marksSQL,
	logSQL, businessLogSQL, latestNarrationSQL, providerCallsByRunSQL, verifyingSinceSQL}

const (
	approvalByRunSQL     = `SELECT ` + approvalColumns + ` FROM approvals WHERE run_id = $1`
	finalMessageByRunSQL = `SELECT run_id, body, body_in, created_at FROM final_messages WHERE run_id = $1`
	logSQL               = `SELECT ` + eventColumns + ` FROM run_events WHERE run_id = $1 AND seq <= $2 ORDER BY seq`
	businessLogSQL       = `SELECT ` + eventColumns + ` FROM run_events
        WHERE run_id = $1 AND seq <= $2 AND type <> '` + EventNarrationDelta + `' ORDER BY seq`
)

// marksSQL reads the markTypes events. The types are spelled out, not a
// parameter, so the planner uses the partial index run_events_marks_idx
// (migration 00010) and reads only the marks, however long the log.
var marksSQL = `SELECT ` + eventColumns + ` FROM run_events
WHERE run_id = $1 AND seq <= $2 AND type IN ('` + strings.Join(markTypes, "', '") + `') ORDER BY seq`

// verifyingSinceSQL reads when the run began verifying its refund's
// outcome. Only a run being verified asks it, so its cost never falls on
// the many runs that wait for an approver or narrate.
var verifyingSinceSQL = `SELECT created_at FROM run_events
WHERE run_id = $1 AND seq <= $2 AND type = '` + EventOperationReconciling + `' ORDER BY seq DESC LIMIT 1`

func readSnapshot(ctx context.Context, tx preparedTx, runID uuid.UUID, part logPart) (*Snapshot, error) {
	r, err := getRun(ctx, tx, runID)
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Run: r, CoveringSeq: r.LastSeq, ReplayFloor: r.ReplayFloor}
	if snap.Operations, err = operationsByRun(ctx, tx, runID); err != nil {
		return nil, err
	}
	var a Approval
	switch err := tx.GetContext(ctx, &a, approvalByRunSQL, runID); {
	case err == nil:
		snap.Approval = &a
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("store: snapshot approval: %w", err)
	}
	var m FinalMessage
	switch err := tx.GetContext(ctx, &m, finalMessageByRunSQL, runID); {
	case err == nil:
		snap.FinalMessage = &m
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("store: snapshot message: %w", err)
	}
	snap.Events = []Event{}
	if part == readNoEvents {
		return snap, nil
	}
	if err := readPart(ctx, tx, snap, part); err != nil {
		return nil, err
	}
	if snap.StateSince, err = stateSince(ctx, tx, snap); err != nil {
		return nil, err
	}
	return snap, nil
}

// readPart reads what part asks of the run's log up to its covering seq.
func readPart(ctx context.Context, tx preparedTx, snap *Snapshot, part logPart) error {
	switch {
	case part.marks:
		if err := tx.SelectContext(ctx, &snap.Marks, marksSQL, snap.Run.ID, snap.CoveringSeq); err != nil {
			return fmt.Errorf("store: snapshot marks: %w", err)
		}
		return nil
	case part.events:
		if err := readLog(ctx, tx, snap, logSQL); err != nil {
			return err
		}
	case part.narration > 0:
		if err := readLog(ctx, tx, snap, businessLogSQL); err != nil {
			return err
		}
		if err := readLatestNarration(ctx, tx, snap, part.narration); err != nil {
			return err
		}
	default:
		return nil
	}
	// The provider calls go with the events: a page that shows the log
	// shows the ledger's calls too.
	var err error
	snap.Calls, err = providerCallsByRun(ctx, tx, snap.Run.ID)
	return err
}

// stateSince is when the step the run waits in began (Snapshot.StateSince):
// the commit of the event that set its state. The rows committed with that
// event carry its time (now() is the transaction's): the approval asked
// for, the refund's intent, or, before the intent, the approval's mark.
// Only a verification reads the log for it.
func stateSince(ctx context.Context, tx preparedTx, snap *Snapshot) (time.Time, error) {
	var verifying time.Time
	if snap.Run.State == StateReconciling {
		err := tx.GetContext(ctx, &verifying, verifyingSinceSQL, snap.Run.ID, snap.CoveringSeq)
		if err != nil && !errors.Is(err, sql.ErrNoRows) { // none: retention removed it
			return time.Time{}, fmt.Errorf("store: snapshot verifying since: %w", err)
		}
	}
	return stateSinceOf(snap, verifying), nil
}

// stateSinceOf is the one rule for when a run's current step began, for a
// run's snapshot and for a family's child alike (a child's card and its
// own page time the same step the same): the approval request; the first
// submit, or the approval that led to it; the latest
// operation.reconciling (verifying, zero when retention removed it).
func stateSinceOf(snap *Snapshot, verifying time.Time) time.Time {
	switch snap.Run.State {
	case StateAwaitingApproval:
		if snap.Approval != nil {
			return snap.Approval.RequestedAt
		}
	case StateSubmitting:
		if len(snap.Operations) > 0 {
			return snap.Operations[0].CreatedAt
		}
		for _, m := range slices.Backward(snap.Marks) {
			if m.Type == EventApprovalGranted {
				return m.CreatedAt
			}
		}
	case StateReconciling:
		return verifying
	}
	return time.Time{}
}

// readLog reads the events query selects of the run ($1) up to its
// covering seq ($2) into snap, and its marks.
func readLog(ctx context.Context, tx preparedTx, snap *Snapshot, query string) error {
	rows, err := tx.QueryContext(ctx, query, snap.Run.ID, snap.CoveringSeq)
	if err != nil {
		return fmt.Errorf("store: snapshot events: %w", err)
	}
	if snap.Events, err = scanEvents(rows, snap.Events); err != nil {
		return fmt.Errorf("store: snapshot events: %w", err)
	}
	for _, ev := range snap.Events {
		if slices.Contains(markTypes, ev.Type) {
			snap.Marks = append(snap.Marks, ev)
		}
	}
	return nil
}

// latestNarrationSQL is the latest $4 pieces of narration after $2 up to
// $3: their seqs and texts, and how many there are in all. That is all a
// page shows of them: not reading their IDs, payloads and times (jsonb and
// timestamps out of PostgreSQL, parsed again by lib/pq) took a 501-event
// page from 2.5 to 2.1 ms (BenchmarkRunPageVsPgbench500, 3 interleaved
// runs).
const latestNarrationSQL = `
SELECT seq, text, total FROM (
    SELECT seq, payload->>'text' AS text, count(*) OVER () AS total FROM run_events
    WHERE run_id = $1 AND seq > $2 AND seq <= $3 AND type = '` + EventNarrationDelta + `'
    ORDER BY seq DESC LIMIT $4
) t ORDER BY seq`

// readLatestNarration adds the latest n pieces of the shown attempt's
// narration to snap's events (which hold every other event, and so the
// marks that say where the attempt began), in seq order, and their text.
func readLatestNarration(ctx context.Context, tx preparedTx, snap *Snapshot, n int) error {
	p := ProgressOf(snap)
	rows, err := tx.QueryContext(ctx, latestNarrationSQL, snap.Run.ID, p.RestartSeq, snap.CoveringSeq, n)
	if err != nil {
		return fmt.Errorf("store: snapshot narration: %w", err)
	}
	defer rows.Close()
	events := slices.Grow(snap.Events, n)
	snap.narrationText = make(map[int64]string, n)
	// Scanned in place, into room made for them: an Event whose fields
	// Scan is given escapes, and each would be one more allocation.
	var text sql.NullString
	var total int
	for rows.Next() {
		events = append(events, Event{RunID: snap.Run.ID, ParentRunID: snap.Run.ParentRunID, CorrelationID: snap.Run.CorrelationID,
			Type: EventNarrationDelta, Class: ClassPresentation})
		ev := &events[len(events)-1]
		if err := rows.Scan(&ev.Seq, &text, &total); err != nil {
			return fmt.Errorf("store: snapshot narration: %w", err)
		}
		snap.narrationText[ev.Seq] = text.String
		snap.NarrationLeftOut = max(total-n, 0)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: snapshot narration: %w", err)
	}
	snap.Events = events
	slices.SortFunc(snap.Events, func(a, b Event) int { return cmp.Compare(a.Seq, b.Seq) })
	return nil
}

// NarrationText is the text of ev, a narration.delta of the snapshot:
// read with it by a SnapshotPage, else decoded from its payload.
func (snap *Snapshot) NarrationText(ev Event) string {
	if text, ok := snap.narrationText[ev.Seq]; ok {
		return text
	}
	p, _ := PayloadOf[NarrationDelta](ev)
	return p.Text
}
