package handlers_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

// countedDriver is lib/pq with every statement sent to PostgreSQL counted
// (a query, an exec, a prepared statement's run; not BEGIN or COMMIT):
// what a page costs the database, whatever the store's code looks like.
const countedDriver = "postgres-counted"

var (
	statements   atomic.Int64
	registerOnce sync.Once
)

func registerCountedDriver() {
	registerOnce.Do(func() {
		sql.Register(countedDriver, counting{})
		sqlx.BindDriver(countedDriver, sqlx.DOLLAR)
	})
}

type counting struct{}

func (counting) Open(name string) (driver.Conn, error) {
	c, err := pq.Driver{}.Open(name)
	if err != nil {
		return nil, err
	}
	return &countingConn{c}, nil
}

// countingConn forwards to lib/pq's conn the interfaces it implements.
type countingConn struct{ driver.Conn }

func (c *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	statements.Add(1)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	statements.Add(1)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	s, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return &countingStmt{s}, nil
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *countingConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }
func (c *countingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}
func (c *countingConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }
func (c *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

type countingStmt struct{ driver.Stmt }

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	statements.Add(1)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	statements.Add(1)
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

// TestFamilyPage_QueriesDoNotGrowWithChildren counts the statements a
// request's page sends to PostgreSQL for a family of 3 children and for
// one of 20, each child started and one refunded: a per-child read (a
// snapshot, a run, the words' data) makes the second cost more.
func TestFamilyPage_QueriesDoNotGrowWithChildren(t *testing.T) {
	registerCountedDriver() // not parallel: statements counts the whole process
	a := newApp(t, handlers.Config{}, withStoreOptions(store.Driver(countedDriver)))
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	cost := func(n int) int64 {
		amounts := make([]int64, n)
		for i := range amounts {
			amounts[i] = 100
		}
		fam := a.startFamily(t, amounts...)
		b.childRefunded(&fam.Children[0])
		b.childCanceled(&fam.Children[n-1])
		path := "/runs/" + fam.Parent.ID.String()
		wantStatus(t, a.get(t, c, path), http.StatusOK) // warm: prepared statements
		// The fewest of three loads: a load that lands on a connection
		// the pool has not used yet prepares its statements there again.
		spent := int64(-1)
		for range 3 {
			before := statements.Load()
			r := a.get(t, c, path)
			n0 := statements.Load() - before
			wantStatus(t, r, http.StatusOK)
			if got := r.doc(t).Find(".child").Length(); got != n {
				t.Fatalf("%d cards, want %d", got, n)
			}
			if spent < 0 || n0 < spent {
				spent = n0
			}
		}
		return spent
	}
	three, twenty := cost(3), cost(20)
	t.Logf("statements per page: %d for 3 children, %d for 20", three, twenty)
	if three != twenty || three == 0 {
		t.Errorf("statements = %d for 3 children, %d for 20; want the same, more than none", three, twenty)
	}
}
