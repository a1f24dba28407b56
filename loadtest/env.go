package main

// The environment a measurement runs in: refundd (its own processes on a
// private PostgreSQL, or one given by -url) and the store handle the load
// test appends through.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

type env struct {
	o          *options
	log        *slog.Logger
	progress   io.Writer
	dir        string // logs, binary, the own cluster
	bin        string
	dbURL      string
	st         *store.Store
	sessionKey string
	cleanup    []func()
	seq        int // names process logs
}

// newEnv opens the database and, without -url, makes the own cluster:
// migrated, with the demo users and orders.
func newEnv(ctx context.Context, o *options, progress io.Writer, logger *slog.Logger) (*env, error) {
	e := &env{o: o, log: logger, progress: progress}
	raiseFileLimit()
	key := make([]byte, 32)
	rand.Read(key)
	e.sessionKey = hex.EncodeToString(key)
	e.dir = o.dataDir
	if e.dir == "" {
		d, err := os.MkdirTemp("", "loadtest-")
		if err != nil {
			return nil, err
		}
		e.dir = d
		e.cleanup = append(e.cleanup, func() { os.RemoveAll(d) })
	}
	// PostgreSQL runs as its own user and must reach its folder.
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return nil, err
	}
	os.Chmod(e.dir, 0o755)
	if o.url != "" {
		st, err := store.Open(ctx, o.databaseURL, store.PoolSize(20), store.WithAnswers(views.Answers{}))
		if err != nil {
			e.Close()
			return nil, err
		}
		e.st, e.dbURL = st, o.databaseURL
		e.cleanup = append(e.cleanup, func() { st.Close() })
		return e, nil
	}
	if err := e.ownDatabase(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *env) ownDatabase(ctx context.Context) error {
	e.bin = e.o.bin
	if e.bin == "" {
		fmt.Fprintln(e.progress, "loadtest: building refundd…")
		bin, err := buildRefundd(ctx, e.dir)
		if err != nil {
			return err
		}
		e.bin = bin
	}
	fmt.Fprintf(e.progress, "loadtest: starting PostgreSQL under %s…\n", e.dir)
	st, closeDB, err := devdb.OpenPrivate(ctx, e.dir, e.log)
	if err != nil {
		return err
	}
	e.cleanup = append(e.cleanup, closeDB)
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	if err := devdb.SeedDemo(ctx, st); err != nil {
		return err
	}
	e.st, e.dbURL = st, st.URL()
	if e.o.mode == "family" || e.o.statements {
		if err := e.countStatements(ctx); err != nil {
			return err
		}
	}
	return e.moreOrders(ctx)
}

// countStatements restarts the own cluster with pg_stat_statements loaded,
// so family mode can count the statements each side costs.
func (e *env) countStatements(ctx context.Context) error {
	db, err := sql.Open("postgres", e.dbURL)
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, `ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`)
	db.Close()
	if err != nil {
		return fmt.Errorf("load pg_stat_statements: %w", err)
	}
	// ownDatabase's last cleanup is OpenPrivate's: it closes the pool and
	// stops the cluster, which then starts again with the library.
	closeDB := e.cleanup[len(e.cleanup)-1]
	e.cleanup = e.cleanup[:len(e.cleanup)-1]
	closeDB()
	st, closeDB, err := devdb.OpenPrivate(ctx, e.dir, e.log)
	if err != nil {
		return err
	}
	e.cleanup = append(e.cleanup, closeDB)
	e.st, e.dbURL = st, st.URL()
	return nil
}

// moreOrders gives each customer -orders more orders: starts on one order
// serialize on its row lock, so five demo orders would make the load test
// measure that lock more than refundd.
func (e *env) moreOrders(ctx context.Context) error {
	for _, email := range e.o.emails {
		u, err := e.st.UserByEmail(ctx, email)
		if err != nil {
			return fmt.Errorf("add orders for %s: %w", email, err)
		}
		for i := range e.o.orders {
			if _, err := e.st.CreateOrder(ctx, u.ID, fmt.Sprintf("Load test order %d", i+1), 1_000_000, "EUR"); err != nil {
				return fmt.Errorf("add orders for %s: %w", email, err)
			}
		}
	}
	return nil
}

// Close stops what newEnv started, last first.
func (e *env) Close() {
	for i := len(e.cleanup) - 1; i >= 0; i-- {
		e.cleanup[i]()
	}
	e.cleanup = nil
}

// refunddEnv is the settings every own refundd process gets: approvals and
// start limits off, stream caps above the load.
func (e *env) refunddEnv(extra map[string]string) []string {
	set := map[string]string{
		"DATABASE_URL": e.dbURL,
		"SESSION_KEY":  e.sessionKey,
		// What dev keeps on disk (its mailbox) goes in the load test's
		// folder, not under the working directory.
		"DATA_DIR": filepath.Join(e.dir, "refundd-data"),
		// dev's provider and the workers outside dev share it.
		"PROVIDER_SECRET":      "provider-" + e.sessionKey,
		"ADDR":                 "127.0.0.1:0",
		"PROVIDER_ADDR":        "127.0.0.1:0",
		"LOG_LEVEL":            "warn",
		"START_RATE_PER_USER":  "0",
		"APPROVAL_THRESHOLD":   "1000000000",
		"MAX_STREAMS_PER_USER": "20000",
		"MAX_STREAMS":          "19000",
	}
	for k, v := range extra {
		set[k] = v
	}
	return environ(set)
}

// startRefundd starts `refundd <sub>` and, for dev and serve, waits for
// its URL.
func (e *env) startRefundd(ctx context.Context, sub string, extra map[string]string) (*proc, error) {
	e.seq++
	prefix := "refundd is running at "
	if sub == "worker" {
		prefix = "refundd worker running"
	}
	log := filepath.Join(e.dir, fmt.Sprintf("%02d-refundd-%s.log", e.seq, sub))
	return startProc(ctx, "refundd "+sub, []string{e.bin, sub}, e.refunddEnv(extra), prefix, log)
}

// startBare starts the bare reference server as a child process of this
// program.
func (e *env) startBare(ctx context.Context) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	e.seq++
	log := filepath.Join(e.dir, fmt.Sprintf("%02d-bare.log", e.seq))
	return startProc(ctx, "bare server", []string{self, "bare-serve", "-database-url", e.dbURL}, os.Environ(), "bare is running at ", log)
}

// client signs in as the i-th customer (or uses the token) against base.
func (e *env) client(ctx context.Context, base string, i int) (*apiClient, error) {
	c := newAPIClient(base, newTransport())
	if e.o.token != "" {
		c.token = e.o.token
		return c, nil
	}
	return c, c.login(ctx, e.o.emails[i%len(e.o.emails)], e.o.password)
}

// raiseFileLimit lifts the soft limit on open files to the hard one: every
// stream is a file descriptor here and in the server.
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

func fileLimit() uint64 {
	var l syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	return l.Cur
}

// measure runs the chosen mode and prints its summary.
func measure(ctx context.Context, o *options, stdout, stderr io.Writer, logger *slog.Logger) error {
	progress := stderr
	if !o.jsonOut {
		progress = stdout
	}
	raiseFileLimit()
	if need := uint64(o.watchers) + 200; (o.mode == "watchers" || o.mode == "approvals") && fileLimit() < need {
		return fmt.Errorf("%d watchers need %d open files, but the limit is %d (raise `ulimit -n`)", o.watchers, need, fileLimit())
	}
	if need := stormFiles(o.watchers); o.mode == "storm" && fileLimit() < need {
		return fmt.Errorf("a storm of %d streams needs %d open files in this process and as many in the serve it starts (a descriptor per stream in each, and the serve's reserve), but the limit is %d: run it under `ulimit -n %d` or more, or lower -watchers",
			o.watchers, need, fileLimit(), need)
	}
	if o.mode == "family" {
		// A family names one order per child.
		o.orders = max(o.orders, o.children)
	}
	e, err := newEnv(ctx, o, progress, logger)
	if err != nil {
		return err
	}
	defer e.Close()
	var summary fmt.Stringer
	switch o.mode {
	case "watchers":
		var s *watchersSummary
		if s, err = runWatchers(ctx, e); s != nil {
			summary = s
		}
	case "runs":
		var s *runsSummary
		if s, err = runRuns(ctx, e); s != nil {
			summary = s
		}
	case "storm":
		var s *stormSummary
		if s, err = runStorm(ctx, e); s != nil {
			summary = s
		}
	case "approvals":
		var s *approvalsSummary
		if s, err = runApprovals(ctx, e); s != nil {
			summary = s
		}
	case "family":
		var s *familySummary
		if s, err = runFamily(ctx, e); s != nil {
			summary = s
		}
	case "webhooks":
		var s *webhooksSummary
		if s, err = runWebhooks(ctx, e); s != nil {
			summary = s
		}
	}
	// A summary of the rounds measured comes even with an error.
	if summary != nil {
		if perr := printSummary(o, summary, stdout, stderr); err == nil {
			err = perr
		}
	}
	return err
}

func printSummary(o *options, summary fmt.Stringer, stdout, stderr io.Writer) error {
	if !o.jsonOut {
		_, err := fmt.Fprint(stdout, summary.String())
		return err
	}
	b, err := json.Marshal(summary)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, string(b))
	fmt.Fprint(stderr, summary.String())
	return nil
}

// meta is what every summary records about where it was measured.
type meta struct {
	Mode     string    `json:"mode"`
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	LoadAvg  [2]string `json:"load_avg_start_end"`
	Args     []string  `json:"args"`
	External bool      `json:"external"`
}

func newMeta(o *options) meta {
	return meta{Mode: o.mode, Started: time.Now().UTC(), LoadAvg: [2]string{strconv.FormatFloat(loadAvg(), 'f', 2, 64)},
		Args: os.Args[1:], External: o.url != ""}
}

func (m *meta) finish() {
	m.Seconds = time.Since(m.Started).Seconds()
	m.LoadAvg[1] = strconv.FormatFloat(loadAvg(), 'f', 2, 64)
}
