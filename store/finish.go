package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// FinalMessage is the one answer a finished run gives its customer.
type FinalMessage struct {
	RunID     uuid.UUID `db:"run_id" json:"-"`
	Body      string    `db:"body" json:"body"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

// terminalEvent is the event that ends a run in state; false for a state
// that is not terminal.
func terminalEvent(state string) (Payload, bool) {
	switch state {
	case StateCompleted:
		return RunCompleted{State: state}, true
	case StateFailed:
		return RunFailed{State: state}, true
	case StateCanceled:
		return RunCanceled{State: state}, true
	}
	return nil, false
}

// ErrAlreadyDone reports that an exactly-once step had already happened; the
// call changed nothing. Callers usually treat it as success.
var ErrAlreadyDone = errors.New("store: already done")

// FinishRun ends a run: it stores the final message, appends message.final
// and the terminal event (run.completed, run.failed or run.canceled) with the
// state change, all in one transaction. Extra events (cancel.too_late, say)
// are appended before them. Finishing a run that is already finished changes
// nothing and returns ErrAlreadyDone.
func (s *Store) FinishRun(ctx context.Context, runID uuid.UUID, state, message string, extra ...NewEvent) (*Run, error) {
	end, ok := terminalEvent(state)
	if !ok {
		return nil, fmt.Errorf("store: finish run: %q is not a terminal state", state)
	}
	run, _, err := s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) {
		if Terminal(r.State) {
			return "", nil, ErrAlreadyDone
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO final_messages (run_id, body) VALUES ($1, $2)`, r.ID, message); err != nil {
			return "", nil, fmt.Errorf("store: final message: %w", err)
		}
		evs := slices.Concat(extra, []NewEvent{EventOf(MessageFinal{Body: message}), EventOf(end)})
		return state, evs, nil
	})
	return run, err
}
