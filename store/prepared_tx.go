package store

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"
)

// preparedTx is a transaction that runs the statements already prepared for
// the main pool (see prepared) as prepared statements of its own
// connection: an unnamed statement is parsed and planned by the server at
// every call, a prepared one once per connection (database/sql keeps each
// connection's handle). A statement not prepared yet runs as it is:
// preparing waits for a pool connection, which a transaction holding one
// must never do (see warm). The helpers that take a sqlx.QueryerContext (getRun,
// operationsByRun…) go through it too.
//
// Its statements run without their context's cancellation: lib/pq watches
// a transaction's context from BEGIN to its end, and cancels whatever
// statement the connection is running when it ends. A statement's own
// watch would start one more goroutine for each statement, for nothing.
type preparedTx struct {
	*sqlx.Tx
	s *Store
}

// stmt is query prepared on tx's connection, or nil if the pool has not
// prepared it.
func (tx preparedTx) stmt(ctx context.Context, query string) *sqlx.Stmt {
	tx.s.mu.Lock()
	st := tx.s.stmts[stmtKey{tx.s.db, query}]
	tx.s.mu.Unlock()
	if st == nil {
		return nil
	}
	return tx.Tx.StmtxContext(ctx, st)
}

func (tx preparedTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = context.WithoutCancel(ctx) // see preparedTx
	if st := tx.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return tx.Tx.QueryContext(ctx, query, args...)
}

func (tx preparedTx) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	ctx = context.WithoutCancel(ctx) // see preparedTx
	if st := tx.stmt(ctx, query); st != nil {
		return st.QueryxContext(ctx, args...)
	}
	return tx.Tx.QueryxContext(ctx, query, args...)
}

func (tx preparedTx) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	ctx = context.WithoutCancel(ctx) // see preparedTx
	if st := tx.stmt(ctx, query); st != nil {
		return st.QueryRowxContext(ctx, args...)
	}
	return tx.Tx.QueryRowxContext(ctx, query, args...)
}

func (tx preparedTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = context.WithoutCancel(ctx) // see preparedTx
	if st := tx.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return tx.Tx.ExecContext(ctx, query, args...)
}

// GetContext and SelectContext are sqlx's, through the methods above (the
// embedded Tx's own would pass the bare Tx).
func (tx preparedTx) GetContext(ctx context.Context, dest any, query string, args ...any) error {
	return sqlx.GetContext(ctx, tx, dest, query, args...)
}

func (tx preparedTx) SelectContext(ctx context.Context, dest any, query string, args ...any) error {
	return sqlx.SelectContext(ctx, tx, dest, query, args...)
}
