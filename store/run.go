package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Run states. The last three are terminal.
const (
	StateCreated          = "created"
	StatePlanning         = "planning"
	StateAwaitingApproval = "awaiting_approval"
	StateSubmitting       = "submitting"
	StateReconciling      = "reconciling"
	StateCompleted        = "completed"
	StateFailed           = "failed"
	StateCanceled         = "canceled"
)

// States are every run state, in the order a run passes through them; the
// last three are the terminal ones.
var States = []string{StateCreated, StatePlanning, StateAwaitingApproval, StateSubmitting,
	StateReconciling, StateCompleted, StateFailed, StateCanceled}

// Terminal reports whether a run in this state is finished for good.
func Terminal(state string) bool {
	return state == StateCompleted || state == StateFailed || state == StateCanceled
}

// Run is one refund request and the agent's work on it.
type Run struct {
	ID      uuid.UUID `db:"id" json:"id"`
	OwnerID int64     `db:"owner_id" json:"owner_id"`
	// Kind is KindRefund (one order's refund) or KindRequest (a family's
	// parent, which coordinates its children and has no order: OrderID 0).
	Kind string `db:"kind" json:"kind"`
	// ParentRunID is the family's parent, for a child; CorrelationID is the
	// family's root run (the run itself, for a root). Position is a child's
	// place in its family (1, 2, …; 0 for a root).
	ParentRunID     uuid.NullUUID `db:"parent_run_id" json:"parent_run_id"`
	CorrelationID   uuid.UUID     `db:"correlation_id" json:"correlation_id"`
	Position        int           `db:"position" json:"-"`
	OrderID         int64         `db:"order_ref" json:"order_id"`
	Amount          int64         `db:"amount" json:"amount"`
	Currency        string        `db:"currency" json:"currency"`
	Reason          string        `db:"reason" json:"reason"`
	ClientRequestID string        `db:"client_request_id" json:"-"`
	State           string        `db:"state" json:"state"`
	LastSeq         int64         `db:"last_seq" json:"last_seq"`
	// ReplayFloor is the highest seq retention removed: the log is whole
	// after it. Only retention raises it.
	ReplayFloor int64 `db:"replay_floor" json:"replay_floor"`
	// SeqGaps are where the seqs skipped after a PostgreSQL restart begin
	// (SkippedSeqs): no event ever had them, so they are not a loss.
	SeqGaps           pq.Int64Array `db:"seq_gaps" json:"-"`
	CancelRequestedAt sql.NullTime  `db:"cancel_requested_at" json:"-"`
	CreatedAt         time.Time     `db:"created_at" json:"created_at"`
	UpdatedAt         time.Time     `db:"updated_at" json:"updated_at"`
	FinishedAt        sql.NullTime  `db:"finished_at" json:"-"`
	// RetryOf is the run this one asks again for: an earlier request of
	// the same owner that ended without a refund (again.go). The old run
	// never changes when it is asked again; the link lives here alone.
	RetryOf uuid.NullUUID `db:"retry_of" json:"retry_of"`
	// ProviderCheck: before its next step the run asks the payment provider
	// what it holds under the run's key (RefundKey), because the database
	// changed timeline (CheckTimeline) and may have forgotten a refund it
	// made. Not in the approval queue meanwhile, and nobody may decide it.
	ProviderCheck bool `db:"provider_check" json:"-"`
	// Language is the one the customer asked in (a BCP 47 tag, "en" or
	// "zh-CN"; "" for runs from before languages, read as English): the
	// agent narrates in it.
	Language string `db:"language" json:"-"`
}

// Run kinds.
const (
	KindRefund  = "refund"
	KindRequest = "request"
)

// IsParent reports whether the run is a family's parent (a request).
func (r *Run) IsParent() bool { return r.Kind == KindRequest }

// CancelRequested reports whether someone asked to cancel the run.
func (r *Run) CancelRequested() bool { return r.CancelRequestedAt.Valid }

const runColumns = `id, kind, parent_run_id, correlation_id, position, owner_id, order_ref, amount, currency, reason, client_request_id, state,
    last_seq, replay_floor, seq_gaps, cancel_requested_at, created_at, updated_at, finished_at, retry_of, provider_check, language`

// Limits on what a start request may carry.
const (
	MaxReasonLen    = 2000
	MaxRequestIDLen = 200
)

// StartRequest is what a customer asks for.
type StartRequest struct {
	OwnerID         int64
	ClientRequestID string
	OrderID         int64
	Amount          int64 // minor units
	Reason          string
	// RetryOf, when valid, is the owner's run that ended without a refund
	// which this request asks again for (AskAgainOf).
	RetryOf uuid.NullUUID
	// Language is the customer's, as the page they asked from speaks it
	// (a BCP 47 tag; "" reads as English).
	Language string
	// RatePerMinute caps the new runs the owner may start in a minute; a
	// start that finds its existing run is never counted nor refused.
	// Zero means no limit.
	RatePerMinute int
}

// Validate checks what can be checked without the database.
func (r *StartRequest) Validate() error {
	r.Reason = strings.TrimSpace(r.Reason)
	r.ClientRequestID = strings.TrimSpace(r.ClientRequestID)
	idErr, reasonErr := ValidText(r.ClientRequestID, false), ValidText(r.Reason, true)
	switch {
	case r.ClientRequestID == "":
		return Refuse(CodeInvalid, "refuse.no_request_id", nil)
	case len(r.ClientRequestID) > MaxRequestIDLen:
		return Refuse(CodeInvalid, "refuse.request_id_long", map[string]any{"Max": MaxRequestIDLen})
	case idErr != nil:
		return Refuse(CodeInvalid, "refuse.request_id_text", map[string]any{"Why": idErr})
	case r.OrderID <= 0:
		return Refuse(CodeInvalid, "refuse.choose_order", nil)
	case r.Amount <= 0:
		return Refuse(CodeInvalid, "refuse.amount_not_positive", nil)
	case r.Reason == "":
		return Refuse(CodeInvalid, "refuse.no_reason", nil)
	case reasonErr != nil:
		return Refuse(CodeInvalid, "refuse.reason_text", map[string]any{"Why": reasonErr})
	case utf8.RuneCountInString(r.Reason) > MaxReasonLen:
		return Refuse(CodeInvalid, "refuse.reason_long", map[string]any{"Max": MaxReasonLen})
	}
	return nil
}

// ValidText says what keeps s from being stored and shown as text, or nil
// when nothing does. PostgreSQL refuses NUL and invalid UTF-8 outright;
// other control characters would be stored but hide in pages and logs.
// Multiline text may hold tabs and line breaks. The error's words follow
// the name of the field: "the reason " + err.
func ValidText(s string, multiline bool) error {
	if !utf8.ValidString(s) {
		return Refuse(CodeInvalid, "refuse.text.not_utf8", nil)
	}
	for _, r := range s {
		switch {
		case r == 0:
			return Refuse(CodeInvalid, "refuse.text.nul", nil)
		case multiline && (r == '\t' || r == '\n' || r == '\r'):
			// Line breaks and indentation are part of a longer text.
		case unicode.IsControl(r):
			return Refuse(CodeInvalid, "refuse.text.control", map[string]any{"Char": fmt.Sprintf("%U", r)})
		}
	}
	return nil
}

// StartRun creates a run, or returns the one this owner already created with
// the same client request ID (created=false). The same ID with different
// parameters is ErrIdempotencyConflict. Starts on one order are serialized by
// the order's row lock, so racing runs can never reserve more than was paid.
// A new run over req.RatePerMinute is a *RateLimitedError.
func (s *Store) StartRun(ctx context.Context, req StartRequest) (run *Run, created bool, err error) {
	if err := req.Validate(); err != nil {
		return nil, false, err
	}
	err = s.inTx(ctx, func(tx *txn) error {
		if run, err = existingRun(ctx, tx, req); !errors.Is(err, ErrNotFound) {
			return err
		}
		if err := checkAskAgain(ctx, tx, req.OwnerID, req.RetryOf); err != nil {
			return err
		}
		var o Order
		err := tx.GetContext(ctx, &o, `SELECT id, customer_id, amount, currency FROM orders WHERE id = $1 FOR UPDATE`, req.OrderID)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && o.CustomerID != req.OwnerID) {
			// Someone else's order is answered like a missing one.
			return Refuse(CodeInvalid, "refuse.no_such_order", map[string]any{"Order": req.OrderID})
		}
		if err != nil {
			return fmt.Errorf("store: lock order: %w", err)
		}
		// A racing start with the same ID may have committed while we
		// waited for the order's lock.
		if run, err = existingRun(ctx, tx, req); !errors.Is(err, ErrNotFound) {
			return err
		}
		if err := checkStartRate(ctx, tx, req.OwnerID, req.RatePerMinute, 1); err != nil {
			return err
		}
		var reserved int64
		if err := tx.GetContext(ctx, &reserved, `SELECT COALESCE(sum(amount), 0) FROM runs
            WHERE order_id = $1 AND state NOT IN ('failed', 'canceled')`, o.ID); err != nil {
			return fmt.Errorf("store: reserved amount: %w", err)
		}
		if left := o.Amount - reserved; req.Amount > left {
			return Refuse(CodeInvalid, "refuse.more_than_left", map[string]any{"Left": Amount{left, o.Currency}})
		}
		id, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("store: run id: %w", err)
		}
		var r Run
		err = tx.GetContext(ctx, &r, `
INSERT INTO runs (id, correlation_id, owner_id, order_id, amount, currency, reason, client_request_id, retry_of, language)
VALUES ($1, $1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (owner_id, client_request_id) WHERE parent_run_id IS NULL DO NOTHING
RETURNING `+runColumns, id, req.OwnerID, o.ID, req.Amount, o.Currency, req.Reason, req.ClientRequestID, req.RetryOf, req.Language)
		if errors.Is(err, sql.ErrNoRows) {
			// Same ID, another order, committed meanwhile.
			run, err = existingRun(ctx, tx, req)
			if errors.Is(err, ErrNotFound) {
				// Not the caller's "no such run": an invariant broke.
				return errors.New("store: start run: conflicting insert vanished")
			}
			return err
		}
		if err != nil {
			return fmt.Errorf("store: start run: %w", err)
		}
		evs, err := s.appendEvents(ctx, tx, r.ID, EventOf(RunCreated{
			OrderID: o.ID, Amount: req.Amount, Currency: o.Currency, Reason: req.Reason,
		}))
		if err != nil {
			return err
		}
		r.LastSeq = evs[len(evs)-1].Seq
		run, created = &r, true
		return notifyWork(ctx, tx)
	})
	if err != nil {
		return nil, false, err
	}
	return run, created, nil
}

// existingRun finds the owner's run with this client request ID: ErrNotFound
// when there is none, ErrIdempotencyConflict when that run was started with
// other parameters (asking again for another run, or for none, is another).
func existingRun(ctx context.Context, tx *txn, req StartRequest) (*Run, error) {
	r, err := rootByKey(ctx, tx, req.OwnerID, req.ClientRequestID)
	if err != nil {
		return nil, err
	}
	if r.OrderID != req.OrderID || r.Amount != req.Amount || r.Reason != req.Reason || r.RetryOf != req.RetryOf {
		return nil, Refuse(CodeIdempotencyConflict, "refuse.key_reused",
			map[string]any{"Order": r.OrderID, "Amount": Amount{r.Amount, r.Currency}})
	}
	return r, nil
}

// rootByKey finds the owner's root run (a lone run or a request) with this
// client request ID, or ErrNotFound: a key names one request, whatever it
// started.
func rootByKey(ctx context.Context, tx *txn, ownerID int64, key string) (*Run, error) {
	var r Run
	err := tx.GetContext(ctx, &r, `SELECT `+runColumns+` FROM runs WHERE owner_id = $1 AND client_request_id = $2 AND parent_run_id IS NULL`,
		ownerID, key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: find run by request id: %w", err)
	}
	return &r, nil
}

// RunByID loads a run.
func (s *Store) RunByID(ctx context.Context, id uuid.UUID) (*Run, error) {
	return getRun(ctx, s.db, id)
}

// runByIDSQL reads one run; a hot statement (snapshotSQL).
const runByIDSQL = `SELECT ` + runColumns + ` FROM runs WHERE id = $1`

// setRunStateSQL moves a run to state $2, ended when $3; a hot statement.
const setRunStateSQL = `UPDATE runs SET state = $2, finished_at = CASE WHEN $3 THEN now() END WHERE id = $1`

// getRun loads a run through q (the pool or a transaction).
func getRun(ctx context.Context, q sqlx.QueryerContext, id uuid.UUID) (*Run, error) {
	var r Run
	err := sqlx.GetContext(ctx, q, &r, runByIDSQL, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: load run: %w", err)
	}
	return &r, nil
}

// runForAccessSQL is prepared: every request about a run reads it first.
var runForAccessSQL = `SELECT ` + runColumns + `,
    ` + familyAskedApprovalSQL("runs") + ` AS has_approval
    FROM runs WHERE id = $1`

// RunForAccess loads a run and whether it ever asked for an approval (who
// may see it depends on that), in one read: every request and stream
// re-check about a run starts here.
func (s *Store) RunForAccess(ctx context.Context, id uuid.UUID) (*Run, bool, error) {
	var row struct {
		Run
		HasApproval bool `db:"has_approval"`
	}
	stmt, err := s.prepared(ctx, runForAccessSQL)
	if err != nil {
		return nil, false, err
	}
	err = stmt.GetContext(ctx, &row, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: load run: %w", err)
	}
	return &row.Run, row.HasApproval, nil
}

// RunsByOwner lists a user's runs, newest first.
func (s *Store) RunsByOwner(ctx context.Context, ownerID int64, limit int) ([]Run, error) {
	runs := []Run{}
	err := s.db.SelectContext(ctx, &runs, `SELECT `+runColumns+` FROM runs WHERE owner_id = $1
        ORDER BY created_at DESC LIMIT $2`, ownerID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	return runs, nil
}

const lockRunSQL = `SELECT ` + runColumns + ` FROM runs WHERE id = $1 FOR UPDATE`

// mutation is a change to a run made under its row lock. It may write other
// rows through tx; it returns the run's new state ("" keeps the state) and
// the events that record the change.
type mutation func(tx *txn, r *Run) (newState string, evs []NewEvent, err error)

// mutate locks the run, applies m, moves the run to the state m returns and
// appends m's events, all in one transaction. Terminal states are final: a
// mutation of a finished run that tries to change its state is ErrConflict.
func (s *Store) mutate(ctx context.Context, runID uuid.UUID, m mutation) (*Run, []Event, error) {
	var (
		run *Run
		out []Event
	)
	err := s.inTx(ctx, func(tx *txn) error {
		// Prepared like the append: mutate is the other hot path.
		stmt, err := s.prepared(ctx, lockRunSQL)
		if err != nil {
			return err
		}
		r := &Run{}
		if err := tx.StmtxContext(ctx, stmt).GetContext(ctx, r, runID); errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		} else if err != nil {
			return fmt.Errorf("store: lock run: %w", err)
		}
		to, evs, err := m(tx, r)
		if err != nil {
			return err
		}
		if to != "" && to != r.State {
			if Terminal(r.State) {
				return Refuse(CodeConflict, "refuse.run_already_ended", map[string]any{"State": r.State})
			}
			if !slices.Contains(States, to) {
				return fmt.Errorf("store: unknown run state %q", to)
			}
			if _, err := tx.ExecContext(ctx, setRunStateSQL, r.ID, to, Terminal(to)); err != nil {
				return fmt.Errorf("store: set run state: %w", err)
			}
			r.State = to
			if Terminal(to) && r.ParentRunID.Valid {
				if err := s.childEnded(ctx, tx, r); err != nil {
					return err
				}
			}
		}
		if out, err = s.appendEvents(ctx, tx, r.ID, evs...); err != nil {
			return err
		}
		if len(out) > 0 {
			r.LastSeq = out[len(out)-1].Seq
		}
		run = r
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return run, out, nil
}

// Transition moves a run from one state to another with the events that
// record it. A run no longer in from is ErrAlreadyDone: someone moved it.
func (s *Store) Transition(ctx context.Context, runID uuid.UUID, from, to string, evs ...NewEvent) (*Run, error) {
	run, _, err := s.mutate(ctx, runID, func(_ *txn, r *Run) (string, []NewEvent, error) {
		if r.State != from {
			return "", nil, ErrAlreadyDone
		}
		return to, evs, nil
	})
	return run, err
}
