package handlers_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

// countedDriver is lib/pq with every statement sent to PostgreSQL counted
// (a query, an exec, a prepared statement's run; not BEGIN or COMMIT):
// what a page costs the database, whatever the store's code looks like.
// While a recorder is set (recordInto), every statement, with its
// arguments, and every transaction's begin and end are also written to it.
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
	sent(q, args)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	sent(q, args)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	s, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return &countingStmt{s, q}, nil
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	record(beginSQL(opts))
	return recordedTx{tx}, nil
}

// recordedTx records its transaction's end.
type recordedTx struct{ driver.Tx }

func (t recordedTx) Commit() error   { record("COMMIT"); return t.Tx.Commit() }
func (t recordedTx) Rollback() error { record("ROLLBACK"); return t.Tx.Rollback() }

// beginSQL is the BEGIN lib/pq sends for opts.
func beginSQL(opts driver.TxOptions) string {
	q := "BEGIN"
	switch sql.IsolationLevel(opts.Isolation) {
	case sql.LevelReadCommitted:
		q += " ISOLATION LEVEL READ COMMITTED"
	case sql.LevelRepeatableRead:
		q += " ISOLATION LEVEL REPEATABLE READ"
	case sql.LevelSerializable:
		q += " ISOLATION LEVEL SERIALIZABLE"
	}
	if opts.ReadOnly {
		q += " READ ONLY"
	}
	return q
}

// recorder, while set, receives every statement sent, its parameters
// written in as literals.
var (
	recorderMu sync.Mutex
	recorder   *[]string
)

// recordInto makes the driver write what it sends into out until the
// returned stop is called.
func recordInto(out *[]string) (stop func()) {
	recorderMu.Lock()
	recorder = out
	recorderMu.Unlock()
	return func() {
		recorderMu.Lock()
		recorder = nil
		recorderMu.Unlock()
	}
}

// sent counts a statement and records it with its arguments.
func sent(q string, args []driver.NamedValue) {
	statements.Add(1)
	recorderMu.Lock()
	defer recorderMu.Unlock()
	if recorder != nil {
		*recorder = append(*recorder, withLiterals(q, args))
	}
}

func record(q string) {
	recorderMu.Lock()
	defer recorderMu.Unlock()
	if recorder != nil {
		*recorder = append(*recorder, q)
	}
}

// withLiterals is q with each $n replaced by its argument as a quoted
// literal, untyped as a parameter is, so PostgreSQL infers the same types.
func withLiterals(q string, args []driver.NamedValue) string {
	return placeholder.ReplaceAllStringFunc(q, func(m string) string {
		n, _ := strconv.Atoi(m[1:])
		if n < 1 || n > len(args) {
			return m
		}
		switch v := args[n-1].Value.(type) {
		case nil:
			return "NULL"
		case []byte:
			return `'\x` + hex.EncodeToString(v) + `'`
		case time.Time:
			return pq.QuoteLiteral(v.Format(time.RFC3339Nano))
		default:
			return pq.QuoteLiteral(fmt.Sprint(v))
		}
	})
}

var placeholder = regexp.MustCompile(`\$[0-9]+`)

func (c *countingConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }
func (c *countingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}
func (c *countingConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }
func (c *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

type countingStmt struct {
	driver.Stmt
	q string
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	sent(s.q, args)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	sent(s.q, args)
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
