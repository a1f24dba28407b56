package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
// provider's idempotency key: every call about it carries that ID.
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
}

// facts are what every event about the operation says of it.
func (op *Operation) facts() OperationFacts {
	return OperationFacts{OperationID: op.ID, Amount: op.Amount, Currency: op.Currency}
}

const operationColumns = `id, run_id, order_id, kind, amount, currency, state, provider_ref, attempts,
    last_error, created_at, updated_at, last_call_refused`

// SubmitOperation records the intent to refund the run's amount before the
// provider is called: a submitted ledger row and operation.submitted, with
// the run in submitting. It happens once per run: a second call returns the
// existing operation and ErrAlreadyDone. Under the order's row lock it
// refuses an operation that would take the order's refunds past what was
// paid, whatever other runs do at the same time. Once a cancel is
// requested it creates none (ErrCancelRequested): RequestCancel answered
// that cancel as in time, under the same row lock, so the run must end
// canceled.
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
			return "", nil, Errorf(CodeConflict, "the run has already %s", r.State)
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
			return "", nil, Errorf(CodeConflict, "refunding %s would take this order's refunds past the %s paid",
				FormatMoney(r.Amount, r.Currency), FormatMoney(paid, r.Currency))
		}
		id, err := uuid.NewV7()
		if err != nil {
			return "", nil, fmt.Errorf("store: operation id: %w", err)
		}
		if err := tx.GetContext(ctx, &op, `INSERT INTO operations (id, run_id, order_id, kind, amount, currency, state)
            VALUES ($1, $2, $3, 'refund', $4, $5, 'submitted') RETURNING `+operationColumns,
			id, r.ID, r.OrderID, r.Amount, r.Currency); err != nil {
			return "", nil, fmt.Errorf("store: create operation: %w", err)
		}
		return StateSubmitting, []NewEvent{EventOf(OperationSubmitted{op.facts()})}, nil
	})
	if err != nil && !errors.Is(err, ErrAlreadyDone) {
		return nil, err
	}
	return &op, err
}

// ErrCancelRequested: SubmitOperation found a cancel requested before any
// operation existed; the run is to end canceled.
var ErrCancelRequested = errors.New("store: cancel requested before the refund was submitted")

// Outcome is what became known about an operation.
type Outcome struct {
	State       string // succeeded, failed or reconciling
	ProviderRef string // required for succeeded
	Reason      string // why it failed, or why we are reconciling
}

// RecordOutcome commits what became known about an operation with its
// event: operation.succeeded, operation.failed or operation.reconciling (the
// run moves to reconciling). A succeeded or failed operation is final:
// recording an outcome again returns ErrAlreadyDone and changes nothing, as
// does reporting reconciling twice in a row (only the attempt count grows).
func (s *Store) RecordOutcome(ctx context.Context, opID uuid.UUID, out Outcome) (*Operation, error) {
	var runID uuid.UUID
	if err := s.db.GetContext(ctx, &runID, `SELECT run_id FROM operations WHERE id = $1`, opID); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("store: load operation: %w", err)
	}
	var op Operation
	_, _, err := s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) {
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
			news = OperationSucceeded{op.facts(), out.ProviderRef}
		case OpFailed:
			news = OperationFailed{op.facts(), out.Reason}
		case OpReconciling:
			news = OperationReconciling{op.facts(), out.Reason}
			newState = StateReconciling
		default:
			return "", nil, fmt.Errorf("store: record outcome: unknown state %q", out.State)
		}
		if err := tx.GetContext(ctx, &op, `UPDATE operations SET state = $2, provider_ref = COALESCE($3, provider_ref),
            last_error = $4, attempts = attempts + 1, last_call_refused = false, updated_at = now()
            WHERE id = $1 RETURNING `+operationColumns,
			op.ID, out.State, ref, out.Reason); err != nil {
			return "", nil, fmt.Errorf("store: record outcome: %w", err)
		}
		if out.State == OpReconciling && prevState == OpReconciling {
			// Still unknown: no new fact for the log.
			return "", nil, nil
		}
		if Terminal(r.State) {
			newState = ""
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
// and committed nothing (a 503 or 429), with the reason. The outage budget
// is counted from the first refusal, kept in the row, so neither a resume
// nor a reconcile pass spends it, whichever worker makes them. It also marks
// that no call is in flight: until BeginRetry, a resumed worker knows the
// operation committed nothing and may call again with the same key.
func (s *Store) NoteRefusal(ctx context.Context, opID uuid.UUID, reason string) (Refusal, error) {
	var r struct {
		Count  int   `db:"refusals"`
		Micros int64 `db:"micros"`
	}
	err := s.db.GetContext(ctx, &r, `UPDATE operations SET refusals = refusals + 1, attempts = attempts + 1,
            first_refused_at = COALESCE(first_refused_at, now()), last_call_refused = true,
            last_error = $2, updated_at = now()
        WHERE id = $1 AND state IN ('submitted', 'reconciling')
        RETURNING refusals, (extract(epoch FROM now() - first_refused_at) * 1e6)::bigint AS micros`, opID, reason)
	if errors.Is(err, sql.ErrNoRows) {
		return Refusal{}, ErrAlreadyDone
	}
	if err != nil {
		return Refusal{}, fmt.Errorf("store: note refusal: %w", err)
	}
	return Refusal{Count: r.Count, For: time.Duration(r.Micros) * time.Microsecond}, nil
}

// BeginRetry records that a call about a refused operation is about to
// begin. From here on the outcome is unknown again until the call answers:
// a worker that resumes the operation after this must ask the provider
// before anything else.
func (s *Store) BeginRetry(ctx context.Context, opID uuid.UUID) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE operations SET last_call_refused = false, updated_at = now()
        WHERE id = $1`, opID); err != nil {
		return fmt.Errorf("store: begin retry: %w", err)
	}
	return nil
}

// OperationsByRun lists a run's ledger rows.
func (s *Store) OperationsByRun(ctx context.Context, runID uuid.UUID) ([]Operation, error) {
	return operationsByRun(ctx, s.db, runID)
}

func operationsByRun(ctx context.Context, q sqlx.QueryerContext, runID uuid.UUID) ([]Operation, error) {
	ops := []Operation{}
	if err := sqlx.SelectContext(ctx, q, &ops, `SELECT `+operationColumns+` FROM operations WHERE run_id = $1 ORDER BY created_at`, runID); err != nil {
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
