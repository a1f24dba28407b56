package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// AppendThenRollBack appends evs inside a transaction that then fails with
// fail: for tests of what a rolled-back append leaves behind.
func (s *Store) AppendThenRollBack(ctx context.Context, runID uuid.UUID, fail error, evs ...NewEvent) error {
	return s.inTx(ctx, func(tx *txn) error {
		if _, err := s.appendEvents(ctx, tx, runID, evs...); err != nil {
			return err
		}
		return fail
	})
}

// MarksSQL is the snapshot head's query of the log's marks.
var MarksSQL = marksSQL

// StreamOpenReads is how many statements StreamOpen's lookups have run
// (stream_open.go).
func (s *Store) StreamOpenReads() int64 { return s.openReads.Load() }

// StreamOpenBatch reads creds in one batch, as the batcher would: answer
// i is creds[i]'s.
func (s *Store) StreamOpenBatch(creds []StreamCredential) (users []*User, runs []*Run, errs []error) {
	batch := make([]*openRequest, len(creds))
	for i := range creds {
		batch[i] = newOpenRequest(&creds[i])
	}
	for _, a := range s.readOpenBatch(batch) {
		users, runs, errs = append(users, a.user), append(runs, a.run), append(errs, a.err)
	}
	return users, runs, errs
}

// Mutate is mutate for tests outside the package, which cannot name txn:
// fn sees the transaction as a *sqlx.Tx.
func (s *Store) Mutate(ctx context.Context, runID uuid.UUID, fn func(tx *sqlx.Tx, r *Run) (string, []NewEvent, error)) (*Run, []Event, error) {
	return s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) { return fn(tx.Tx, r) })
}

// StartWindow is startWindow, for the rate limit's tests.
const StartWindow = startWindow

// StateAfter is stateAfter, for tests of the states events record.
func StateAfter(eventType string) string { return stateAfter(eventType) }

// Wake sends one notification through the process's notifier, as a
// committed transaction's notices are sent.
func (s *Store) Wake(channel, payload string) { s.notify(notice{channel, payload}) }
