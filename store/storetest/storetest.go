// Package storetest gives tests a real, private PostgreSQL: one throwaway
// cluster per test process on tmpfs, a migrated template database, and a
// fresh clone of it for every test (through pgtestdb), so tests can run in
// parallel and never see each other's rows.
package storetest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/peterldowns/pgtestdb"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/migrations"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

var (
	once    sync.Once
	cluster *devdb.Cluster
	dataDir string
	initErr error
)

// Main runs a package's tests and removes the cluster afterwards. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cluster.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "storetest:", err)
		}
		os.RemoveAll(dataDir)
	}
	return code
}

func start() {
	base := "/dev/shm"
	if st, err := os.Stat(base); err != nil || !st.IsDir() {
		base = os.TempDir()
	}
	reapOrphans(base)
	dataDir, initErr = os.MkdirTemp(base, "refundd-test-")
	if initErr != nil {
		return
	}
	// Who owns this cluster: a later test process reaps it if this one dies
	// without cleaning up (a test timeout's panic skips Main's cleanup).
	if initErr = os.WriteFile(filepath.Join(dataDir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); initErr != nil {
		return
	}
	// The postgres user must be able to reach the cluster below it.
	if initErr = os.Chmod(dataDir, 0o755); initErr != nil {
		return
	}
	cluster, initErr = devdb.NewCluster(dataDir, 5432)
	if initErr != nil {
		return
	}
	cluster.Fast = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, initErr = cluster.Start(ctx)
}

// reapOrphans stops and removes the clusters of test processes that died
// without cleaning up, so they do not pile up in memory across runs.
func reapOrphans(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, "refundd-test-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue // being set up right now, or not ours
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // its owner is alive
		}
		c, err := devdb.NewCluster(dir, 5432)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := c.Kill(ctx); err == nil {
			os.RemoveAll(dir)
		}
		cancel()
	}
}

// URL returns the connection string of a fresh, migrated database that is
// dropped when the test ends.
func URL(tb testing.TB) string {
	tb.Helper()
	once.Do(start)
	if initErr != nil {
		tb.Fatalf("storetest: start PostgreSQL: %v", initErr)
	}
	conf := pgtestdb.Config{
		DriverName: "postgres",
		User:       "postgres",
		Password:   "unused",
		Database:   "postgres",
		Options:    fmt.Sprintf("host=%s&port=%d&sslmode=disable", url.QueryEscape(cluster.SocketDir), cluster.Port),
		// Crash tests kill processes that leave connections behind.
		ForceTerminateConnections: true,
	}
	return pgtestdb.Custom(tb, conf, migrator{}).URL()
}

// MustOpen returns a Store over a fresh, migrated database.
func MustOpen(tb testing.TB) *store.Store {
	tb.Helper()
	u := URL(tb)
	st, err := store.Open(context.Background(), u, store.WithAnswers(views.Answers{}))
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	// The test's own pool, for DB. Opening dials nothing: a test that
	// never reads rows directly costs no connection.
	pool := open(tb, u)
	pools.Store(st, pool)
	tb.Cleanup(func() { pools.Delete(st) })
	return st
}

// pools holds each open Store's test pool, for DB.
var pools sync.Map // *store.Store → *sqlx.DB

// DB is a pool over st's database for a test to read and change rows
// directly, as no code outside the store may. A Store from MustOpen has one,
// closed when the test that opened the Store ends; any other Store gets a
// new pool per call, closed when tb ends. It is never the store's own pool,
// so closing the store leaves it working.
func DB(tb testing.TB, st *store.Store) *sqlx.DB {
	tb.Helper()
	if pool, ok := pools.Load(st); ok {
		return pool.(*sqlx.DB)
	}
	return open(tb, st.URL())
}

// open opens a pool that is closed when the test ends.
func open(tb testing.TB, url string) *sqlx.DB {
	tb.Helper()
	db, err := sqlx.Open("postgres", url)
	if err != nil {
		tb.Fatalf("storetest: open: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// migrator builds pgtestdb's template with refundd's goose migrations.
type migrator struct{}

func (migrator) Hash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		h.Write([]byte(path + "\x00" + strconv.Itoa(len(b)) + "\x00"))
		h.Write(b)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:16], err
}

func (migrator) Migrate(ctx context.Context, db *sql.DB, _ pgtestdb.Config) error {
	return store.Migrate(ctx, db)
}

// Parties are who a refund needs: a customer holding refund_access with one
// paid order, and an approver.
type Parties struct {
	Customer, Approver *store.User
	Order              *store.Order
}

// MustSeedParties creates c@example.com, a customer with an order of
// amount euro cents ("Shoes"), and a@example.com, an approver; both have
// the password "pw".
func MustSeedParties(tb testing.TB, st *store.Store, amount int64) Parties {
	tb.Helper()
	ctx := context.Background()
	c, err := st.CreateUser(ctx, "c@example.com", "C", store.RoleCustomer, "pw", store.GrantRefundAccess)
	if err != nil {
		tb.Fatalf("storetest: customer: %v", err)
	}
	a, err := st.CreateUser(ctx, "a@example.com", "A", store.RoleApprover, "pw")
	if err != nil {
		tb.Fatalf("storetest: approver: %v", err)
	}
	o, err := st.CreateOrder(ctx, c.ID, "Shoes", amount, "EUR")
	if err != nil {
		tb.Fatalf("storetest: order: %v", err)
	}
	return Parties{Customer: c, Approver: a, Order: o}
}
