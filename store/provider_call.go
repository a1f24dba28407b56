package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// Kinds of provider call.
const (
	CallSubmit = "submit"
	CallLookup = "lookup"
)

// ProviderCall is one call made to the payment provider about an
// operation. A call whose worker died before it ended has Ended false.
type ProviderCall struct {
	ID          int64         `db:"id" json:"id"`
	OperationID uuid.UUID     `db:"operation_id" json:"operation_id"`
	Kind        string        `db:"kind" json:"kind"`
	StartedAt   time.Time     `db:"started_at" json:"started_at"`
	Ended       bool          `db:"answered" json:"ended"`
	HTTPStatus  sql.NullInt64 `db:"http_status" json:"-"`
	DurationUS  sql.NullInt64 `db:"duration_us" json:"-"`
	Result      string        `db:"result" json:"result"`
}

// Duration is how long the call took, 0 if it never ended.
func (c ProviderCall) Duration() time.Duration {
	return time.Duration(c.DurationUS.Int64) * time.Microsecond
}

const providerCallColumns = `id, operation_id, kind, started_at, answered, http_status, duration_us, result`

// BeginProviderCall records that a call of kind about the operation is
// about to be made, before it is, and returns its ID for EndProviderCall.
func (s *Store) BeginProviderCall(ctx context.Context, opID uuid.UUID, kind string) (int64, error) {
	var id int64
	if err := s.db.GetContext(ctx, &id, `INSERT INTO provider_calls (operation_id, kind) VALUES ($1, $2) RETURNING id`,
		opID, kind); err != nil {
		return 0, fmt.Errorf("store: begin provider call: %w", err)
	}
	return id, nil
}

// EndProviderCall records how call id ended: the HTTP status of the
// answer (0 when none was read), how long it took and what it meant.
func (s *Store) EndProviderCall(ctx context.Context, id int64, status int, took time.Duration, result string) error {
	return endProviderCall(ctx, s.db, EndedCall{ID: id, FoundCall: FoundCall{HTTPStatus: status, Took: took, Result: result}})
}

func endProviderCall(ctx context.Context, q sqlx.ExecerContext, c EndedCall) error {
	if _, err := q.ExecContext(ctx, `UPDATE provider_calls SET answered = true,
        http_status = NULLIF($2, 0), duration_us = $3, result = $4 WHERE id = $1`,
		c.ID, c.HTTPStatus, c.Took.Microseconds(), c.Result); err != nil {
		return fmt.Errorf("store: end provider call: %w", err)
	}
	return nil
}

// ProviderCallsBegun counts the calls about the operation that were ever
// begun, answered or not.
func (s *Store) ProviderCallsBegun(ctx context.Context, opID uuid.UUID) (int, error) {
	var n int
	if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM provider_calls WHERE operation_id = $1`, opID); err != nil {
		return 0, fmt.Errorf("store: provider calls begun: %w", err)
	}
	return n, nil
}

const providerCallsByRunSQL = `SELECT ` + providerCallColumns + ` FROM provider_calls
        WHERE operation_id IN (SELECT id FROM operations WHERE run_id = $1) ORDER BY id`

func providerCallsByRun(ctx context.Context, q sqlx.QueryerContext, runID uuid.UUID) ([]ProviderCall, error) {
	calls := []ProviderCall{}
	if err := sqlx.SelectContext(ctx, q, &calls, providerCallsByRunSQL, runID); err != nil {
		return nil, fmt.Errorf("store: provider calls: %w", err)
	}
	return calls, nil
}
