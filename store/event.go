package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/refundd/refundd/internal/metrics"
)

// Event is one committed entry of a run's ordered log.
type Event struct {
	RunID uuid.UUID `db:"run_id" json:"run_id"`
	// ParentRunID is the run's family parent (null for a root) and
	// CorrelationID the family's root run: causality across a family's
	// runs, whose seqs are each their own.
	ParentRunID   uuid.NullUUID   `db:"parent_run_id" json:"parent_run_id"`
	CorrelationID uuid.UUID       `db:"correlation_id" json:"correlation_id"`
	Seq           int64           `db:"seq" json:"seq"`
	EventID       uuid.UUID       `db:"event_id" json:"event_id"`
	Type          string          `db:"type" json:"type"`
	Class         string          `db:"class" json:"class"`
	Payload       json.RawMessage `db:"payload" json:"payload"`
	CreatedAt     time.Time       `db:"created_at" json:"created_at"`

	// facts is what views read from the payload, decoded once when the
	// streams read the event (EventsAfter): a thousand watchers of one
	// approval share one decoding. nil: decoded where asked.
	facts *eventFacts
}

// eventFacts is what of an event's payload Progress reads. Shared by
// every copy of the event: never written after decodeFacts.
type eventFacts struct {
	decider *Decider // DeciderOf
	attempt int      // a step.attempt's Attempt
}

// decodeFacts decodes, for the event types whose payload Progress reads,
// what it reads.
func (ev *Event) decodeFacts() {
	switch ev.Type {
	case EventApprovalGranted, EventCancelRequested:
		ev.facts = &eventFacts{decider: deciderOf(*ev)}
	case EventStepAttempt:
		pl, _ := PayloadOf[StepAttempt](*ev)
		ev.facts = &eventFacts{attempt: pl.Attempt}
	}
}

const eventColumns = `run_id, parent_run_id, correlation_id, seq, event_id, type, class, payload, created_at`

// seqEpochGap is how many seqs the first append after a PostgreSQL restart
// skips (runs.seq_gaps records where each gap begins, not its length:
// changing this needs a migration of the gaps already recorded). It must
// exceed the narration events one run can have committed
// but not yet flushed when the server stops: the WAL writer flushes
// asynchronous commits within three wal_writer_delays (600 ms by default),
// and a run narrates at most about ten events a second.
const seqEpochGap = 1000

// bumpSeq is the SET list of every append's UPDATE of the run: n more
// events, and after a restart a gap of seqEpochGap seqs, recorded in
// seq_gaps by the last seq before it. The right-hand sides read the row as
// it was.
func bumpSeq(n string) string {
	return fmt.Sprintf(`
    last_seq = last_seq + %[2]s + CASE WHEN seq_epoch = pg_postmaster_start_time() THEN 0 ELSE %[1]d END,
    seq_gaps = CASE WHEN seq_epoch = pg_postmaster_start_time() THEN seq_gaps ELSE array_append(seq_gaps, last_seq) END,
    seq_epoch = pg_postmaster_start_time(),
    updated_at = now()`, seqEpochGap, n)
}

// appendSQL bumps last_seq under the run's row lock and inserts the events
// numbered below it, in one statement. Because the row lock is held until
// commit, one run's events commit in seq order: a reader asking for
// seq > cursor never skips a later commit. The NOTIFY that wakes the
// readers goes out after the commit (notify.go).
//
// The first append after a PostgreSQL restart skips seqEpochGap seqs and
// records the gap (migrations 00008 and 00011): seqs of narration lost in a
// crash are never handed out again, and nothing kept is lost.
var appendSQL = `
WITH bump AS (
    UPDATE runs SET ` + bumpSeq("$2") + `
    WHERE id = $1
    RETURNING last_seq, parent_run_id, correlation_id
)
INSERT INTO run_events (run_id, parent_run_id, correlation_id, seq, event_id, type, class, payload)
SELECT $1, bump.parent_run_id, bump.correlation_id, bump.last_seq - $2 + e.ord, e.event_id::uuid, e.type, e.class, e.payload::jsonb
FROM bump, unnest($3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY
    AS e(event_id, type, class, payload, ord)
RETURNING ` + eventColumns

// appendEvents appends evs to the run's log. With a transaction, the events
// commit with the state change the transaction makes; without one (tx nil)
// the statement is its own transaction.
func (s *Store) appendEvents(ctx context.Context, tx *txn, runID uuid.UUID, evs ...NewEvent) ([]Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	types := make([]string, len(evs))
	classes := make([]string, len(evs))
	ids := make([]string, len(evs))
	payloads := make([]string, len(evs))
	for i, e := range evs {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("store: event id: %w", err)
		}
		if e.payload == nil {
			return nil, errors.New("store: append event: an event without a payload (use EventOf)")
		}
		p, err := json.Marshal(e.payload)
		if err != nil {
			return nil, fmt.Errorf("store: event payload %s: %w", e.Type(), err)
		}
		types[i], classes[i], ids[i], payloads[i] = e.Type(), ClassOf(e.Type()), id.String(), string(p)
	}
	// Prepared: planning this statement costs as much as running it, and
	// appends are the hot path.
	stmt, err := s.prepared(ctx, appendSQL)
	if err != nil {
		return nil, err
	}
	if tx != nil {
		stmt = tx.StmtxContext(ctx, stmt)
	}
	var out []Event
	err = stmt.SelectContext(ctx, &out,
		runID, len(evs), pq.Array(ids), pq.Array(types), pq.Array(classes), pq.Array(payloads))
	if err != nil {
		return nil, fmt.Errorf("store: append event: %w", err)
	}
	if len(out) != len(evs) {
		return nil, fmt.Errorf("store: append event: run %s: %w", runID, ErrNotFound)
	}
	slices.SortFunc(out, func(a, b Event) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, ev := range out {
		metrics.Appends.WithLabelValues(ev.Class).Inc()
	}
	n := notice{ChannelEvents, runID.String() + ":" + strconv.FormatInt(out[len(out)-1].Seq, 10)}
	if tx != nil {
		tx.noteAfterCommit(n)
	} else {
		s.notify(n)
	}
	return out, nil
}

// Append commits events to a run's log. It is for events that change no
// other state, such as narration: the one statement is atomic by itself.
//
// An append PostgreSQL chose as a deadlock's victim was rolled back whole
// (it is one statement): it is sent again, at most txAttempts times, as
// inTx does with a transaction.
func (s *Store) Append(ctx context.Context, runID uuid.UUID, evs ...NewEvent) ([]Event, error) {
	var (
		out []Event
		err error
	)
	for range txAttempts {
		if out, err = s.appendEvents(ctx, nil, runID, evs...); !isDeadlock(err) {
			break
		}
	}
	return out, err
}

// BeginAttempt records that the executor begins step (the stage it
// narrates) on the run, and returns the attempt number: one more than the
// attempts of that step already recorded, counted under the run's row lock.
func (s *Store) BeginAttempt(ctx context.Context, runID uuid.UUID, step string) (int, error) {
	var n int
	_, _, err := s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) {
		if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM run_events
            WHERE run_id = $1 AND type = $2 AND payload->>'step' = $3`, r.ID, EventStepAttempt, step); err != nil {
			return "", nil, fmt.Errorf("store: begin attempt: %w", err)
		}
		n++
		return "", []NewEvent{EventOf(StepAttempt{Step: step, Attempt: n})}, nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// MaxPage bounds one read of the log.
const MaxPage = 1000

// pageLimit is the page EventsAfter reads when asked for limit events.
func pageLimit(limit int) int {
	if limit <= 0 || limit > MaxPage {
		return MaxPage
	}
	return limit
}

const eventsAfterSQL = `
SELECT r.last_seq, r.replay_floor, r.seq_gaps, e.run_id, e.parent_run_id, e.correlation_id, e.seq, e.event_id, e.type, e.class, e.payload, e.created_at
FROM runs r
LEFT JOIN LATERAL (
    SELECT ` + eventColumns + ` FROM run_events
    WHERE run_id = r.id AND seq > $2
    ORDER BY seq LIMIT $3
) e ON true
WHERE r.id = $1
ORDER BY e.seq`

// EventsAfter returns up to limit events with seq > cursor, in order, read
// in one statement together with the run's bounds so the answer is
// consistent. A cursor below the replay floor is ErrCursorExpired (events
// after it may have been pruned); a negative cursor or one above last_seq is
// ErrCursorInvalid. Either way the caller should fall back to a snapshot.
func (s *Store) EventsAfter(ctx context.Context, runID uuid.UUID, cursor int64, limit int) ([]Event, error) {
	limit = pageLimit(limit)
	// On the stream pool: the streams' reads never wait behind writers.
	stmt, err := s.preparedOn(ctx, s.streams, eventsAfterSQL)
	if err != nil {
		return nil, err
	}
	rows, err := stmt.QueryContext(ctx, runID, cursor, limit)
	if err != nil {
		return nil, fmt.Errorf("store: events after: %w", err)
	}
	defer rows.Close()
	// Scanned by hand: replay is a hot path and reflection dominated it.
	var (
		out             = make([]Event, 0, min(limit, 16)) // most reads find a few events
		found           bool
		lastSeq, floor  int64
		gaps            pq.Int64Array
		seq             sql.NullInt64
		runIDs, eventID uuid.NullUUID
		parentID        uuid.NullUUID
		correlationID   uuid.NullUUID
		typ, class      sql.NullString
		payload         []byte
		createdAt       sql.NullTime
	)
	for rows.Next() {
		if err := rows.Scan(&lastSeq, &floor, &gaps, &runIDs, &parentID, &correlationID, &seq, &eventID, &typ, &class, &payload, &createdAt); err != nil {
			return nil, fmt.Errorf("store: events after: %w", err)
		}
		found = true
		if !seq.Valid {
			continue
		}
		ev := Event{RunID: runIDs.UUID, ParentRunID: parentID, CorrelationID: correlationID.UUID, Seq: seq.Int64, EventID: eventID.UUID, Type: typ.String,
			Class: class.String, Payload: json.RawMessage(payload), CreatedAt: createdAt.Time}
		ev.decodeFacts()
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: events after: %w", err)
	}
	if !found {
		return nil, ErrNotFound
	}
	if err := checkCursor(cursor, lastSeq, floor, gaps); err != nil {
		return nil, err
	}
	return out, nil
}

// scanEvents appends rows of eventColumns to out and closes rows. By
// hand: a run's whole log is read for every run page, and sqlx's
// reflection cost more than the rows.
func scanEvents(rows *sql.Rows, out []Event) ([]Event, error) {
	defer rows.Close()
	for rows.Next() {
		var ev Event
		var payload []byte
		if err := rows.Scan(&ev.RunID, &ev.ParentRunID, &ev.CorrelationID, &ev.Seq, &ev.EventID, &ev.Type, &ev.Class, &payload, &ev.CreatedAt); err != nil {
			return nil, err
		}
		ev.Payload = json.RawMessage(payload)
		out = append(out, ev)
	}
	return out, rows.Err()
}
