// Package store owns everything refundd keeps in PostgreSQL: users and grants,
// orders, runs and their ordered event logs, snapshots, the operation ledger,
// retention, and the LISTEN/NOTIFY plumbing. It is plain SQL over sqlx.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	neturl "net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq" // also the PostgreSQL driver
	"github.com/pressly/goose/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/refundd/refundd/migrations"
)

// ErrNotFound is returned when a row the caller asked for does not exist (or
// is not visible to them).
var ErrNotFound = errors.New("store: not found")

// Store is refundd's one handle on PostgreSQL.
type Store struct {
	db  *sqlx.DB
	url string
	// streams is the stream pool: the delivery path's own connections (the
	// streams' log reads, the notifier's wake-ups), so that it never waits
	// for a connection behind the writers of the main pool.
	streams *sqlx.DB

	// answers words the final answers the store writes in transactions
	// of its own (WithAnswers).
	answers Answers

	mu     sync.Mutex
	stmts  map[stmtKey]*sqlx.Stmt // prepared hot-path statements
	warmed atomic.Bool            // every hot statement is in stmts (warm)

	narration *batcher[narrationPiece]
	notifier  *batcher[notice]
	opens     *batcher[*openRequest]    // stream_open.go
	openReads atomic.Int64              // statements the stream-open readers ran, for tests
	local     atomic.Pointer[Listener]  // WakeLocal
	install   atomic.Pointer[uuid.UUID] // installation.id, read once (RefundKey)
	opRuns    opRunCache                // each operation's run (runOfOperation)
}

// Option adjusts how Open sets up the pool.
type Option func(*options)

type options struct {
	poolSize, streamPoolSize int
	driver                   string
	answers                  Answers
}

// Answers words the final answers the store writes itself, in the
// transaction that ends a run: a decision nobody made by its deadline and
// a request whose last refund ended. The store keeps facts; the words are
// the words table's (views.Answers), given to Open by WithAnswers.
type Answers interface {
	Expired(window time.Duration) Answer
	Request(children []ChildEnding, currency string) Answer
}

// WithAnswers gives the store the words of the final answers it writes.
// Without it, ending a run by its deadline or a request by its last refund
// fails (ErrNoAnswers).
func WithAnswers(a Answers) Option {
	return func(o *options) { o.answers = a }
}

// ErrNoAnswers: the store was opened without WithAnswers and was asked to
// write a final answer.
var ErrNoAnswers = errors.New("store: no final answers' words (open the store WithAnswers)")

// Driver opens the pools with the database/sql driver registered under
// name, one that reaches PostgreSQL through lib/pq (a test's wrapper that
// counts statements); "" keeps lib/pq's own, "postgres". The name must
// be bound to sqlx's $n placeholders (sqlx.BindDriver).
func Driver(name string) Option {
	return func(o *options) {
		if name != "" {
			o.driver = name
		}
	}
}

// DefaultPoolSize is the pool's size when Open is given no PoolSize
// (DB_POOL_SIZE).
const DefaultPoolSize = 16

// PoolSize caps the connections this process opens: processes × pool size
// must fit PostgreSQL's max_connections, so many worker processes need a
// smaller pool each. n < 1 keeps the default.
func PoolSize(n int) Option {
	return func(o *options) {
		if n >= 1 {
			o.poolSize = n
		}
	}
}

// DefaultStreamPoolSize is the stream pool's size when Open is given no
// StreamPoolSize (DB_STREAM_POOL_SIZE).
const DefaultStreamPoolSize = 4

// StreamPoolSize caps the stream pool's connections, besides PoolSize's.
// n < 1 keeps the default.
func StreamPoolSize(n int) Option {
	return func(o *options) {
		if n >= 1 {
			o.streamPoolSize = n
		}
	}
}

// oneRoundTrip is url with lib/pq's binary_parameters on, unless url sets
// it: a statement with parameters is then sent in one round trip (Parse,
// Bind, Execute together), where lib/pq otherwise waits for the Parse's
// answer before it binds, two round trips for every such statement. Its
// other effect, []byte parameters sent as binary data, is why no statement
// here passes JSON or text as []byte: they go as strings.
func oneRoundTrip(url string) (string, error) {
	const key = "binary_parameters"
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		u, err := neturl.Parse(url)
		if err != nil {
			return "", errors.New("the database URL does not parse") // the URL may hold a password: not echoed
		}
		q := u.Query()
		if q.Has(key) {
			return url, nil
		}
		q.Set(key, "yes")
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	if strings.Contains(url, key+"=") {
		return url, nil
	}
	return strings.TrimSpace(url + " " + key + "=yes"), nil
}

// Open connects to the database at url and checks it answers.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	o := options{poolSize: DefaultPoolSize, streamPoolSize: DefaultStreamPoolSize, driver: "postgres"}
	for _, opt := range opts {
		opt(&o)
	}
	conn, err := oneRoundTrip(url)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	db, err := sqlx.Open(o.driver, conn)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	streams, err := sqlx.Open(o.driver, conn)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}
	for _, p := range []struct {
		db   *sqlx.DB
		size int
	}{{db, o.poolSize}, {streams, o.streamPoolSize}} {
		p.db.SetMaxOpenConns(p.size)
		// Every connection may stay idle, until five idle minutes close it:
		// with fewer, a burst past them closes connections as it ends and
		// opens them again for the next (a server process each, and every
		// prepared statement again), which under a steady load of streams
		// was most of the database's work.
		p.db.SetMaxIdleConns(p.size)
		p.db.SetConnMaxIdleTime(5 * time.Minute)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		db.Close()
		streams.Close()
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	s := &Store{db: db, url: url, streams: streams, answers: o.answers}
	s.narration = newBatcher(maxNarrationBatch, 1, maxNarrationBatch, s.writeNarration)
	s.notifier = newBatcher(4*maxNotices, 1, maxNotices, s.sendNotices)
	s.opens = newBatcher(maxOpenBatch, openReaders, maxOpenBatch, s.answerOpens)
	s.opens.pace = openBatchPace
	return s, nil
}

// Close closes the pool.
//
// The pool closes first, so nothing starts on it once Close is called
// (a caller whose narration is refused must not go on with other writes);
// then the narration and notice writers and the stream-open readers stop,
// failing what still waits.
func (s *Store) Close() error {
	s.mu.Lock()
	for _, st := range s.stmts {
		st.Close()
	}
	s.mu.Unlock()
	err := errors.Join(s.db.Close(), s.streams.Close())
	s.narration.stop()
	s.notifier.stop()
	s.opens.stop()
	return err
}

// prepared returns query prepared once for the main pool: database/sql
// prepares it on each connection the first time that connection runs it,
// and the server plans it once per connection instead of on every call.
func (s *Store) prepared(ctx context.Context, query string) (*sqlx.Stmt, error) {
	return s.preparedOn(ctx, s.db, query)
}

// preparedOn is prepared for the pool db (the main one or the streams').
// Preparing waits for a connection of the pool, so it never holds s.mu:
// a transaction holding the pool's last connection needs s.mu for its
// own statements, and a prepare that held it while it waited for that
// connection stalled every transaction for good. Two first calls may
// both prepare; one statement is kept.
func (s *Store) preparedOn(ctx context.Context, db *sqlx.DB, query string) (*sqlx.Stmt, error) {
	key := stmtKey{db, query}
	s.mu.Lock()
	st, ok := s.stmts[key]
	s.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := db.PreparexContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("store: prepare: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if kept, ok := s.stmts[key]; ok {
		st.Close()
		return kept, nil
	}
	if s.stmts == nil {
		s.stmts = map[stmtKey]*sqlx.Stmt{}
	}
	s.stmts[key] = st
	return st, nil
}

type stmtKey struct {
	db    *sqlx.DB
	query string
}

// PoolCollectors are the two pools' statistics for /metrics (go_sql_*,
// db_name "main" and "streams"): connections open and in use, and the
// waits for one.
func (s *Store) PoolCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		collectors.NewDBStatsCollector(s.db.DB, "main"),
		collectors.NewDBStatsCollector(s.streams.DB, "streams"),
	}
}

// URL is the connection string the store was opened with; a Listener needs
// it for its own connection.
func (s *Store) URL() string { return s.url }

func newMigrator(db *sql.DB) (*goose.Provider, error) {
	// Out of order: migrations are numbered when a change begins and may
	// land in another order (00017 before 00015 and 00016); a database
	// migrated in between takes the lower ones afterwards, instead of
	// refusing to start. Each migration stands on its own.
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithAllowOutofOrder(true))
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	return p, nil
}

// Migrate applies every embedded migration that has not been applied yet.
func Migrate(ctx context.Context, db *sql.DB) error {
	p, err := newMigrator(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}

// Migrate applies pending migrations to this store's database.
func (s *Store) Migrate(ctx context.Context) error { return Migrate(ctx, s.db.DB) }

// Ready reports whether the database answers, takes writes (a standby, or
// a primary being switched over, does not) and has every migration applied.
func (s *Store) Ready(ctx context.Context) error {
	var standby bool
	if err := s.db.GetContext(ctx, &standby, `SELECT pg_is_in_recovery()`); err != nil {
		return fmt.Errorf("store: ready: %w", err)
	}
	if standby {
		return ErrStandby
	}
	p, err := newMigrator(s.db.DB)
	if err != nil {
		return err
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("store: ready: %w", err)
	}
	if pending {
		return errors.New("store: ready: migrations pending")
	}
	return nil
}

// ErrStandby: the database is a standby (in recovery), which takes no
// writes: the connection string leads to the wrong server, or a failover is
// under way.
var ErrStandby = errors.New("store: ready: the database is a standby and takes no writes")

// hot are the statements prepared once per pool (see prepared), that
// every transaction then runs prepared (preparedTx): the ones a run's
// steps send most, a snapshot's, and a stream open's.
var hot = slices.Concat([]string{appendSQL, lockRunSQL, setRunStateSQL}, snapshotSQL,
	streamOpenBatchSQL[:], streamOpenOneSQL[:])

// warm prepares the hot statements before a transaction takes its
// connection. Preparing on the pool takes a connection of its own: a
// transaction that waited for one while holding another would deadlock a
// full pool (16 starts racing for one order's lock did). Once all are
// prepared, it has nothing to do.
func (s *Store) warm(ctx context.Context) error {
	if s.warmed.Load() {
		return nil
	}
	for _, q := range hot {
		if _, err := s.prepared(ctx, q); err != nil {
			return err
		}
	}
	s.warmed.Store(true)
	return nil
}

// Warm readies the pools for the first requests of a server just
// started, the reconnecting streams of a restart: it opens up to n
// connections of each pool at once (a PostgreSQL process each, which the
// first wave would otherwise wait for and pay within it) and prepares the
// hot statements (warm), a stream open's among them. A connection that
// fails is left to the pool to open again later; the error says why.
func (s *Store) Warm(ctx context.Context, n int) error {
	var errs []error
	for _, p := range []*sqlx.DB{s.db, s.streams} {
		conns := make([]*sql.Conn, 0, n)
		for range min(n, p.Stats().MaxOpenConnections) {
			c, err := p.Conn(ctx)
			if err != nil {
				errs = append(errs, err)
				break
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			errs = append(errs, c.PingContext(ctx), c.Close())
		}
	}
	if err := errors.Join(append(errs, s.warm(ctx))...); err != nil {
		return fmt.Errorf("store: warm: %w", err)
	}
	return nil
}

// affected is how many rows res changed, for the operation named what.
func affected(res sql.Result, what string) (int64, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: %s: %w", what, err)
	}
	return n, nil
}

// inTx runs fn in one transaction, committing when it returns nil. A
// transaction PostgreSQL chose as a deadlock's victim rolled back whole, so
// it is run again from the start, up to txAttempts times: every fn is
// database work only, and what it computes is set afresh on each attempt.
func (s *Store) inTx(ctx context.Context, fn func(tx *txn) error) error {
	var err error
	for range txAttempts {
		if err = s.inTxOnce(ctx, fn); !isDeadlock(err) {
			return err
		}
	}
	return err
}

// txAttempts bounds how often inTx runs a transaction that deadlocked.
const txAttempts = 3

// isDeadlock reports PostgreSQL's deadlock_detected (40P01).
func isDeadlock(err error) bool {
	var pe *pq.Error
	return errors.As(err, &pe) && pe.Code == "40P01"
}

func (s *Store) inTxOnce(ctx context.Context, fn func(tx *txn) error) error {
	if err := s.warm(ctx); err != nil {
		return err
	}
	sqlTx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	tx := &txn{preparedTx: preparedTx{sqlTx, s}}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	s.notify(tx.notices...)
	return nil
}

// txn is one transaction of inTx and the notices it will send once it
// has committed (see notify.go): what a transaction announces travels with
// it, and a rolled-back one announces nothing.
type txn struct {
	preparedTx
	notices []notice
}

// noteAfterCommit queues n to be sent once tx commits.
func (tx *txn) noteAfterCommit(n notice) { tx.notices = append(tx.notices, n) }
