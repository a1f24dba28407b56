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
	RunID     uuid.UUID    `db:"run_id" json:"-"`
	Body      string       `db:"body" json:"body"`
	In        Translations `db:"body_in" json:"-"` // Body in the other languages (Answer.In)
	CreatedAt time.Time    `db:"created_at" json:"created_at"`
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
// nothing and returns ErrAlreadyDone. A run whose cancel was answered in
// time (CancelTooLate false) ends canceled only: ending it otherwise
// changes nothing and returns ErrCancelRequested.
func (s *Store) FinishRun(ctx context.Context, runID uuid.UUID, state string, message Answer, extra ...NewEvent) (*Run, error) {
	return s.FinishRunAs(ctx, runID, state, func(*Run) (Answer, []NewEvent) { return message, extra })
}

// FinishRunAs is FinishRun with the final message and the extra events
// worded from the run as it is under its row lock (whether a cancel came,
// say), so no read before it can be out of date by the time it ends the run.
func (s *Store) FinishRunAs(ctx context.Context, runID uuid.UUID, state string, word func(*Run) (Answer, []NewEvent)) (*Run, error) {
	end, ok := terminalEvent(state)
	if !ok {
		return nil, fmt.Errorf("store: finish run: %q is not a terminal state", state)
	}
	run, _, err := s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) {
		if Terminal(r.State) {
			return "", nil, ErrAlreadyDone
		}
		if state != StateCanceled && r.CancelRequested() {
			ops, err := operationsByRun(ctx, tx, r.ID)
			if err != nil {
				return "", nil, err
			}
			if !CancelTooLate(ops) {
				return "", nil, ErrCancelRequested
			}
		}
		message, extra := word(r)
		return finishLocked(ctx, tx, r, state, message, end, extra...)
	})
	return run, err
}

// FinishCanceled ends a run whose cancel came in time: its operations that
// are still open, none of which can have reached the payment provider, are
// recorded failed with reason (operation.failed), and the run ends canceled
// with message, in one transaction. A run whose cancel came too late, or
// was never asked for, is a conflict, and changes nothing; a finished run
// is ErrAlreadyDone.
func (s *Store) FinishCanceled(ctx context.Context, runID uuid.UUID, reason string, message Answer) (*Run, error) {
	run, _, err := s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) {
		if Terminal(r.State) {
			return "", nil, ErrAlreadyDone
		}
		var ops []Operation
		if err := tx.SelectContext(ctx, &ops, `SELECT `+operationColumns+` FROM operations
            WHERE run_id = $1 ORDER BY created_at FOR UPDATE`, r.ID); err != nil {
			return "", nil, fmt.Errorf("store: lock operations: %w", err)
		}
		if !r.CancelRequested() || CancelTooLate(ops) {
			return "", nil, Errorf(CodeConflict, "the run has no cancel that came in time")
		}
		var evs []NewEvent
		for _, op := range ops {
			if op.State == OpSucceeded || op.State == OpFailed {
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE operations SET state = 'failed', last_error = $2,
                last_call_refused = false, updated_at = now() WHERE id = $1`, op.ID, reason); err != nil {
				return "", nil, fmt.Errorf("store: close operation: %w", err)
			}
			evs = append(evs, EventOf(OperationFailed{OperationFacts: op.facts(), Reason: reason}))
		}
		return finishLocked(ctx, tx, r, StateCanceled, message, RunCanceled{State: StateCanceled}, evs...)
	})
	return run, err
}

// finishLocked ends r, whose row tx holds locked, in state (with end, its
// terminal event): the final message, then extra, message.final and end.
func finishLocked(ctx context.Context, tx *txn, r *Run, state string, message Answer, end Payload, extra ...NewEvent) (string, []NewEvent, error) {
	final, err := insertFinal(ctx, tx, r.ID, message)
	if err != nil {
		return "", nil, err
	}
	return state, slices.Concat(extra, []NewEvent{final, EventOf(end)}), nil
}

// insertFinal stores a run's final answer, in every language, and is its
// message.final event.
func insertFinal(ctx context.Context, tx *txn, runID uuid.UUID, a Answer) (NewEvent, error) {
	if _, err := tx.ExecContext(ctx, `INSERT INTO final_messages (run_id, body, body_in) VALUES ($1, $2, $3)`,
		runID, a.Body, a.In); err != nil {
		return NewEvent{}, fmt.Errorf("store: final message: %w", err)
	}
	return EventOf(MessageFinal{Body: a.Body, In: a.In}), nil
}
