package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/refundd/refundd/internal/metrics"
)

// Narration is presentation (seed 004: not every token needs keeping), so
// it is written unlike business events: the narration of every run in the
// process is gathered into one transaction, committed without waiting for
// the WAL flush (synchronous_commit=off), with one NOTIFY per run in it.
// While one batch commits the next gathers, so a quiet process writes each
// piece at once and a busy one writes many per commit. A crash may lose the
// last few batches; migrations/00008_seq_epoch.sql keeps their seqs from
// ever naming another event.

// maxNarrationBatch bounds one batch (and what waits to join the next).
const maxNarrationBatch = 512

// narrationBatchTimeout bounds one batch's transaction: it runs for many
// callers, so it does not take any one caller's deadline.
const narrationBatchTimeout = 30 * time.Second

// errStoreClosed answers narration appended, or a stream opened, after
// Close.
var errStoreClosed = errors.New("store: closed")

type narrationPiece struct {
	runID uuid.UUID
	text  string
	done  chan error
}

// AppendNarration appends a narration.delta with text to the run's log,
// batched with other runs' narration and committed asynchronously. It
// returns once the batch committed (the event is visible to readers, and
// its NOTIFY sent), or when ctx ends; ErrNotFound for a missing run.
func (s *Store) AppendNarration(ctx context.Context, runID uuid.UUID, text string) error {
	b := s.narration
	p := narrationPiece{runID: runID, text: text, done: make(chan error, 1)}
	if err := b.put(ctx, p); err != nil {
		return err
	}
	answer, err := await(ctx, b, p.done)
	if err != nil {
		return err
	}
	return answer
}

// writeNarration writes a batch in one transaction and answers each
// piece.
func (s *Store) writeNarration(batch []narrationPiece) {
	written, err := s.appendNarrationBatch(batch)
	for _, p := range batch {
		switch {
		case err != nil:
			p.done <- err
		case !written[p.runID]:
			p.done <- fmt.Errorf("store: narration for run %s: %w", p.runID, ErrNotFound)
		default:
			p.done <- nil
		}
	}
}

// narrationSQL appends every piece of a batch, in one statement that is
// its own transaction (one round trip where BEGIN, a locking statement,
// this one and COMMIT took four):
//   - locked takes the batch's runs' rows in id order, so two batches never
//     deadlock: the update below touches a run only once locked has
//     returned it, and locked returns (and locks) them in id order whatever
//     the plan. It also makes the commit asynchronous: set_config's local
//     setting lasts until the end of the statement's own transaction, its
//     commit included.
//   - each run's pieces are numbered in order after its last_seq (bumped
//     once per run, as appendSQL does), and each run gets one NOTIFY with
//     its new last_seq.
var narrationSQL = `
WITH input AS (
    SELECT i.run_id, i.event_id, i.payload,
           row_number() OVER (PARTITION BY i.run_id ORDER BY i.ord) AS k
    FROM unnest($1::uuid[], $2::uuid[], $3::text[]) WITH ORDINALITY AS i(run_id, event_id, payload, ord)
), locked AS (
    SELECT id, set_config('synchronous_commit', 'off', true)
    FROM runs WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE
), counts AS (
    SELECT run_id, count(*) AS n FROM input GROUP BY run_id
), bump AS (
    UPDATE runs SET ` + bumpSeq("counts.n") + `
    FROM counts JOIN locked ON locked.id = counts.run_id
    WHERE runs.id = counts.run_id
    RETURNING runs.id, runs.last_seq, runs.parent_run_id, runs.correlation_id, counts.n
), ins AS (
    INSERT INTO run_events (run_id, parent_run_id, correlation_id, seq, event_id, type, class, payload)
    SELECT i.run_id, b.parent_run_id, b.correlation_id, b.last_seq - b.n + i.k, i.event_id, '` + EventNarrationDelta + `', '` + ClassPresentation + `', i.payload::jsonb
    FROM input i JOIN bump b ON b.id = i.run_id
    RETURNING run_id
), note AS (
    SELECT pg_notify($4, b.id::text || ':' || b.last_seq) FROM bump b
)
SELECT DISTINCT ins.run_id FROM ins CROSS JOIN (SELECT count(*) FROM note) AS notified`

// appendNarrationBatch writes a batch in its one asynchronous-commit
// statement and says which runs it wrote to. A batch PostgreSQL chose as a
// deadlock's victim (against a transaction that locks runs in another
// order) was rolled back whole: it is sent again, as Append does.
func (s *Store) appendNarrationBatch(batch []narrationPiece) (map[uuid.UUID]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), narrationBatchTimeout)
	defer cancel()
	runs := make([]string, len(batch))
	ids := make([]string, len(batch))
	payloads := make([]string, len(batch))
	for i, p := range batch {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("store: event id: %w", err)
		}
		payload, err := json.Marshal(NarrationDelta{Text: p.text})
		if err != nil {
			return nil, fmt.Errorf("store: narration payload: %w", err)
		}
		runs[i], ids[i], payloads[i] = p.runID.String(), id.String(), string(payload)
	}
	stmt, err := s.prepared(ctx, narrationSQL)
	if err != nil {
		return nil, err
	}
	var got []uuid.UUID
	for range txAttempts {
		got = got[:0]
		err = stmt.SelectContext(ctx, &got, pq.Array(runs), pq.Array(ids), pq.Array(payloads), ChannelEvents)
		if !isDeadlock(err) {
			break
		}
	}
	written := make(map[uuid.UUID]bool, len(got))
	for _, id := range got {
		written[id] = true
	}
	if err != nil {
		return nil, fmt.Errorf("store: append narration: %w", err)
	}
	n := 0
	for _, p := range batch {
		if written[p.runID] {
			n++
		}
	}
	metrics.Appends.WithLabelValues(ClassPresentation).Add(float64(n))
	return written, nil
}
