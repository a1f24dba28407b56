package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// AppendThenRollBack appends evs inside a transaction that then fails with
// fail: for tests of what a rolled-back append leaves behind.
func (s *Store) AppendThenRollBack(ctx context.Context, runID uuid.UUID, fail error, evs ...NewEvent) error {
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := s.appendEvents(ctx, tx, runID, evs...); err != nil {
			return err
		}
		return fail
	})
}

// MarksSQL is the snapshot head's query of the log's marks.
var MarksSQL = marksSQL
