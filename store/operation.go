package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// Operation states in the ledger.
const (
	OpSubmitted   = "submitted"
	OpSucceeded   = "succeeded"
	OpFailed      = "failed"
	OpReconciling = "reconciling"
)

// Operation is one external effect in the ledger. Its ID is the payment
// provider's idempotency key: every call about it carries that ID. A
// refund's is derived from what the customer asked (RefundKey); ledgers
// from before then hold random ones.
type Operation struct {
	ID          uuid.UUID      `db:"id" json:"id"`
	RunID       uuid.UUID      `db:"run_id" json:"-"`
	OrderID     int64          `db:"order_id" json:"-"`
	Kind        string         `db:"kind" json:"kind"`
	Amount      int64          `db:"amount" json:"amount"`
	Currency    string         `db:"currency" json:"currency"`
	State       string         `db:"state" json:"state"`
	ProviderRef sql.NullString `db:"provider_ref" json:"-"`
	Attempts    int            `db:"attempts" json:"attempts"`
	LastError   string         `db:"last_error" json:"-"`
	CreatedAt   time.Time      `db:"created_at" json:"created_at"`
	UpdatedAt   time.Time      `db:"updated_at" json:"updated_at"`
	// LastCallRefused: the latest provider call about the operation was
	// refused (it committed nothing) and no call has begun since, so nothing
	// about the operation is unknown (see NoteRefusal).
	LastCallRefused bool `db:"last_call_refused" json:"-"`
	// Unsent: no refund call about the operation can have reached the
	// payment provider: none has begun, or each one's answer proved it
	// committed nothing (see BeginSubmit and NoteRefusal). Its zero value
	// is the safe guess, "may have been sent", for an operation known only
	// from its events. Once the run's cancel is recorded it no longer
	// changes, unless the provider itself shows a refund (RecordOutcome),
	// so it keeps saying what that cancel was answered (CancelTooLate).
	Unsent bool `db:"unsent" json:"-"`
	// Recovered: the provider's outcome was found under the operation's
	// key after the database had lost its record of the refund (a
	// failover), not made now (RecordFound).
	Recovered bool `db:"recovered" json:"-"`
}

// facts are what every event about the operation says of it.
func (op *Operation) facts() OperationFacts {
	return OperationFacts{OperationID: op.ID, Amount: op.Amount, Currency: op.Currency}
}

const operationColumns = `id, run_id, order_id, kind, amount, currency, state, provider_ref, attempts,
    last_error, created_at, updated_at, last_call_refused, unsent, recovered`

// SubmitOperation records the intent to refund the run's amount before the
// provider is called: a submitted ledger row and operation.submitted, with
// the run in submitting. It happens once per run: a second call returns the
// existing operation and ErrAlreadyDone. Under the order's row lock it
// refuses an operation that would take the order's refunds past what was
// paid, whatever other runs do at the same time. Once a cancel is
// requested it creates none (ErrCancelRequested): RequestCancel answered
// that cancel as in time, under the same row lock, so the run must end
// canceled. The operation starts unsent: no call about it has begun.
func (s *Store) SubmitOperation(ctx context.Context, runID uuid.UUID) (*Operation, error) {
	var op Operation
	_, _, err := s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) {
		err := tx.GetContext(ctx, &op, `SELECT `+operationColumns+` FROM operations WHERE run_id = $1 AND kind = 'refund'`, r.ID)
		if err == nil {
			return "", nil, ErrAlreadyDone
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return "", nil, fmt.Errorf("store: load operation: %w", err)
		}
		if Terminal(r.State) {
			return "", nil, Refuse(CodeConflict, "refuse.run_already_ended", map[string]any{"State": r.State})
		}
		if r.CancelRequested() {
			return "", nil, ErrCancelRequested
		}
		// Lock first, then sum in a statement of its own: a statement that
		// waited for the lock still reads with the snapshot it started with
		// and would miss the operation whose commit released the lock.
		var paid, committed int64
		if err := tx.GetContext(ctx, &paid, `SELECT amount FROM orders WHERE id = $1 FOR UPDATE`, r.OrderID); err != nil {
			return "", nil, fmt.Errorf("store: lock order: %w", err)
		}
		if err := tx.GetContext(ctx, &committed, `SELECT COALESCE(sum(amount), 0) FROM operations
            WHERE order_id = $1 AND state <> 'failed'`, r.OrderID); err != nil {
			return "", nil, fmt.Errorf("store: committed refunds: %w", err)
		}
		if committed+r.Amount > paid {
			return "", nil, Refuse(CodeConflict, "refuse.past_paid",
				map[string]any{"Amount": Amount{r.Amount, r.Currency}, "Paid": Amount{paid, r.Currency}})
		}
		// The key a failover cannot make us forget (RefundKey).
		ns, err := s.installation(ctx, tx)
		if err != nil {
			return "", nil, err
		}
		id := refundKey(ns, r)
		if err := tx.GetContext(ctx, &op, `INSERT INTO operations (id, run_id, order_id, kind, amount, currency, state, unsent)
            VALUES ($1, $2, $3, 'refund', $4, $5, 'submitted', true) RETURNING `+operationColumns,
			id, r.ID, r.OrderID, r.Amount, r.Currency); err != nil {
			return "", nil, fmt.Errorf("store: create operation: %w", err)
		}
		s.opRuns.put(op.ID, r.ID)
		return StateSubmitting, []NewEvent{EventOf(OperationSubmitted{op.facts()})}, nil
	})
	if err != nil && !errors.Is(err, ErrAlreadyDone) {
		return nil, err
	}
	return &op, err
}

// ErrCancelRequested: a cancel was answered in time (before any call about
// the refund can have reached the payment provider), so the step was not
// taken: SubmitOperation created no operation, BeginSubmit began no call,
// FinishRun did not end the run otherwise. The run is to end canceled
// (FinishCanceled).
var ErrCancelRequested = errors.New("store: a cancel came in time; the run is to end canceled")

// Outcome is what became known about an operation.
type Outcome struct {
	State       string // succeeded, failed or reconciling
	ProviderRef string // required for succeeded
	Reason      string // why it failed, or why we are reconciling
	// Call, when set, is the provider call that answered it: the call is
	// recorded answered in the same transaction (EndProviderCall's work).
	Call *EndedCall
	// Refunded, when set, ends the run completed in the same transaction
	// if the outcome is a success, in the words it gives for the run as
	// locked: a cancel that came meanwhile is too late, the refund made.
	Refunded func(*Run) (Answer, []NewEvent)
}

// EndedCall is how provider call ID ended: the HTTP status of the answer
// (0 when none was read), how long it took and what it meant.
type EndedCall struct {
	ID int64
	FoundCall
}

// RecordOutcome commits what became known about an operation with its
// event: operation.succeeded, operation.failed or operation.reconciling (the
// run moves to reconciling). A succeeded or failed operation is final:
// recording an outcome again returns ErrAlreadyDone and changes nothing, as
// does reporting reconciling twice in a row (only the attempt count grows).
// A success, or an outcome being verified, says a call may have reached the
// provider: the operation is no longer unsent. With out.Call the call that
// answered is recorded in the same transaction; with out.Refunded a
// success also ends the run, completed.
func (s *Store) RecordOutcome(ctx context.Context, opID uuid.UUID, out Outcome) (*Operation, error) {
	runID, err := s.runOfOperation(ctx, opID)
	if err != nil {
		return nil, err
	}
	var op Operation
	_, _, err = s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) {
		if err := tx.GetContext(ctx, &op, `SELECT `+operationColumns+` FROM operations WHERE id = $1 FOR UPDATE`, opID); err != nil {
			return "", nil, fmt.Errorf("store: load operation: %w", err)
		}
		if op.State == OpSucceeded || op.State == OpFailed {
			return "", nil, ErrAlreadyDone
		}
		prevState := op.State
		var (
			ref      sql.NullString
			newState string
			news     Payload
		)
		switch out.State {
		case OpSucceeded:
			if out.ProviderRef == "" {
				return "", nil, errors.New("store: record outcome: a success needs the provider's reference")
			}
			ref = sql.NullString{String: out.ProviderRef, Valid: true}
			news = OperationSucceeded{OperationFacts: op.facts(), ProviderRef: out.ProviderRef}
		case OpFailed:
			news = OperationFailed{OperationFacts: op.facts(), Reason: out.Reason}
		case OpReconciling:
			news = OperationReconciling{op.facts(), out.Reason}
			newState = StateReconciling
		default:
			return "", nil, fmt.Errorf("store: record outcome: unknown state %q", out.State)
		}
		if err := tx.GetContext(ctx, &op, `UPDATE operations SET state = $2, provider_ref = COALESCE($3, provider_ref),
            last_error = $4, attempts = attempts + 1, last_call_refused = false,
            unsent = unsent AND $2 NOT IN ('succeeded', 'reconciling'), updated_at = now()
            WHERE id = $1 RETURNING `+operationColumns,
			op.ID, out.State, ref, out.Reason); err != nil {
			return "", nil, fmt.Errorf("store: record outcome: %w", err)
		}
		if out.Call != nil {
			if err := endProviderCall(ctx, tx, *out.Call); err != nil {
				return "", nil, err
			}
		}
		if out.State == OpReconciling && prevState == OpReconciling {
			// Still unknown: no new fact for the log.
			return "", nil, nil
		}
		if Terminal(r.State) {
			newState = ""
		} else if out.State == OpSucceeded && out.Refunded != nil {
			message, extra := out.Refunded(r)
			return finishLocked(ctx, tx, r, StateCompleted, message, RunCompleted{State: StateCompleted},
				slices.Concat([]NewEvent{EventOf(news)}, extra)...)
		}
		return newState, []NewEvent{EventOf(news)}, nil
	})
	if err != nil && !errors.Is(err, ErrAlreadyDone) {
		return nil, err
	}
	return &op, err
}

// Refusal is how long the payment provider has been refusing an operation.
type Refusal struct {
	Count int           // refusals so far, this one included
	For   time.Duration // since the operation's first refusal, by the database's clock
}

// NoteRefusal records that the provider refused a call about the operation
// and committed nothing (a 503 or 429, a refused connection), with the
// reason. The outage budget is counted from the first refusal, kept in the
// row, so neither a resume nor a reconcile pass spends it, whichever worker
// makes them. It also marks that no call is in flight: until BeginSubmit, a
// resumed worker knows the operation committed nothing and may call again
// with the same key. While the operation was never in doubt (submitted,
// not reconciling) the refusal makes it unsent again, so a cancel is in time
// once more; not once the run's cancel is recorded, whose answer it keeps.
// It takes the run's row lock, as a cancel does, so the cancel's answer and
// this change are made one after the other.
func (s *Store) NoteRefusal(ctx context.Context, opID uuid.UUID, reason string) (Refusal, error) {
	runID, err := s.runOfOperation(ctx, opID)
	if err != nil {
		return Refusal{}, err
	}
	var r struct {
		Count  int   `db:"refusals"`
		Micros int64 `db:"micros"`
	}
	_, _, err = s.mutate(ctx, runID, func(tx *txn, run *Run) (string, []NewEvent, error) {
		err := tx.GetContext(ctx, &r, `UPDATE operations SET refusals = refusals + 1, attempts = attempts + 1,
                first_refused_at = COALESCE(first_refused_at, now()), last_call_refused = true,
                unsent = unsent OR (state = 'submitted' AND NOT $3), last_error = $2, updated_at = now()
            WHERE id = $1 AND state IN ('submitted', 'reconciling')
            RETURNING refusals, (extract(epoch FROM now() - first_refused_at) * 1e6)::bigint AS micros`,
			opID, reason, run.CancelRequested())
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil, ErrAlreadyDone
		}
		if err != nil {
			return "", nil, fmt.Errorf("store: note refusal: %w", err)
		}
		return "", nil, nil
	})
	if err != nil {
		return Refusal{}, err
	}
	return Refusal{Count: r.Count, For: time.Duration(r.Micros) * time.Microsecond}, nil
}

// BeginSubmit records that a refund call about the operation is about to
// be made, before it is, and returns the call's ID for EndProviderCall. It
// is decided under the run's row lock, as a cancel is, so the two never
// cross: once a cancel was answered in time (every operation of the run
// unsent) no call begins, and it returns ErrCancelRequested; otherwise the
// operation is no longer unsent (from now on a cancel is too late) and no
// longer waits after a refused call (a worker that resumes it must ask the
// provider before anything else).
func (s *Store) BeginSubmit(ctx context.Context, opID uuid.UUID) (int64, error) {
	runID, err := s.runOfOperation(ctx, opID)
	if err != nil {
		return 0, err
	}
	var id int64
	_, _, err = s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) {
		if r.CancelRequested() {
			ops, err := operationsByRun(ctx, tx, r.ID)
			if err != nil {
				return "", nil, err
			}
			if !CancelTooLate(ops) {
				return "", nil, ErrCancelRequested
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE operations SET unsent = false, last_call_refused = false, updated_at = now()
            WHERE id = $1`, opID); err != nil {
			return "", nil, fmt.Errorf("store: begin submit: %w", err)
		}
		if err := tx.GetContext(ctx, &id, `INSERT INTO provider_calls (operation_id, kind) VALUES ($1, $2) RETURNING id`,
			opID, CallSubmit); err != nil {
			return "", nil, fmt.Errorf("store: begin submit: %w", err)
		}
		return "", nil, nil
	})
	return id, err
}

// runOfOperation is the run the operation belongs to. An operation never
// changes run, so the answer is kept (opRuns): the executor asks it for
// every call it begins and every outcome it records.
func (s *Store) runOfOperation(ctx context.Context, opID uuid.UUID) (uuid.UUID, error) {
	if runID, ok := s.opRuns.get(opID); ok {
		return runID, nil
	}
	var runID uuid.UUID
	if err := s.db.GetContext(ctx, &runID, `SELECT run_id FROM operations WHERE id = $1`, opID); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return uuid.Nil, ErrNotFound
		}
		return uuid.Nil, fmt.Errorf("store: load operation: %w", err)
	}
	s.opRuns.put(opID, runID)
	return runID, nil
}

// opRunCache maps operations to their runs, at most maxOpRuns of them (a
// full cache starts again empty: the operations asked about are those of
// the runs in flight).
type opRunCache struct {
	mu sync.Mutex
	m  map[uuid.UUID]uuid.UUID
}

const maxOpRuns = 4096

func (c *opRunCache) get(op uuid.UUID) (uuid.UUID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	run, ok := c.m[op]
	return run, ok
}

func (c *opRunCache) put(op, run uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxOpRuns {
		c.m = make(map[uuid.UUID]uuid.UUID)
	}
	c.m[op] = run
}

// OperationsByRun lists a run's ledger rows.
func (s *Store) OperationsByRun(ctx context.Context, runID uuid.UUID) ([]Operation, error) {
	return operationsByRun(ctx, s.db, runID)
}

const operationsByRunSQL = `SELECT ` + operationColumns + ` FROM operations WHERE run_id = $1 ORDER BY created_at`

func operationsByRun(ctx context.Context, q sqlx.QueryerContext, runID uuid.UUID) ([]Operation, error) {
	ops := []Operation{}
	if err := sqlx.SelectContext(ctx, q, &ops, operationsByRunSQL, runID); err != nil {
		return nil, fmt.Errorf("store: list operations: %w", err)
	}
	return ops, nil
}

// AllOperations lists the whole ledger, oldest first, for verification.
func (s *Store) AllOperations(ctx context.Context) ([]Operation, error) {
	ops := []Operation{}
	if err := s.db.SelectContext(ctx, &ops, `SELECT `+operationColumns+` FROM operations ORDER BY created_at`); err != nil {
		return nil, fmt.Errorf("store: list operations: %w", err)
	}
	return ops, nil
}
