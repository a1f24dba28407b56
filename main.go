// Command refundd runs AI refund agents whose progress people watch in the
// browser. This file is wiring only: it reads the configuration, opens the
// database and starts the parts each subcommand needs; the parts live in
// store/, handlers/, views/, agent/ and payments/.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/lib/pq"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

const usage = `usage: refundd <command>

commands:
  dev       run everything locally: a private PostgreSQL under DATA_DIR (unless
            DATABASE_URL is set), migrations, demo data, the web server
  serve     serve the web app (needs SESSION_KEY)
  worker    run refund agents
  provider  run the simulated payment provider
  migrate   apply database migrations, nothing else
  events    print a run's committed events as JSON lines
  verify    check the system's invariants over the database

Configuration comes from environment variables; see README.md.
`

// devPort names the private cluster's socket file. The cluster listens on
// no TCP port, so it clashes with nothing.
const devPort = 5433

// devDatabase is the database refundd uses in the private cluster.
const devDatabase = "refundd"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal starts a graceful stop, a second one kills.
	go func() { <-ctx.Done(); stop() }()
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program, with its surroundings passed in so tests can run
// it in-process. It returns the exit code: 0 success, 1 failure, 2 bad usage
// or configuration.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	name, args := args[0], args[1:]
	if name == "help" || name == "-h" || name == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "refundd: %v\n", err)
		return 2
	}
	logger := newLogger(cfg, stderr)

	switch name {
	case "dev":
		err = runDev(ctx, cfg, args, logger, stdout)
	case "serve":
		err = runServe(ctx, cfg, args, logger, stdout)
	case "migrate":
		err = runMigrate(ctx, cfg, args, logger, stdout)
	case "worker":
		err = runWorker(ctx, cfg, args, logger, stdout)
	case "provider":
		err = runProvider(ctx, cfg, args, logger, stdout)
	case "events":
		err = runEvents(ctx, cfg, args, logger, stdout)
	case "verify":
		err = runVerify(ctx, cfg, args, logger, stdout)
	default:
		fmt.Fprintf(stderr, "refundd: unknown command %q\n\n%s", name, usage)
		return 2
	}
	return exitCode(name, err, stderr)
}

// usageError is a mistake the caller can fix (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func exitCode(name string, err error, stderr io.Writer) int {
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "refundd %s: %s\n", name, ue.msg)
		return 2
	case errors.Is(err, store.ErrNoPostgres):
		fmt.Fprintf(stderr, "refundd %s: %v\n", name, store.ErrNoPostgres)
		return 1
	default:
		fmt.Fprintf(stderr, "refundd %s: %v\n", name, err)
		return 1
	}
}

func noArgs(args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Sprintf("unexpected arguments %q", args)}
	}
	return nil
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// runDev runs everything on one machine for development: the private
// cluster (unless DATABASE_URL is set), migrations, demo data and the web
// server. It stops what it started on SIGINT/SIGTERM.
func runDev(ctx context.Context, cfg Config, args []string, logger *slog.Logger, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if cfg.SessionKey == "" {
		key, err := devSessionKey(cfg.DataDir)
		if err != nil {
			return err
		}
		cfg.SessionKey = key
	}
	st, closeDB, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	if err := st.SeedDemo(ctx); err != nil {
		return err
	}
	listener, err := startListener(ctx, st, logger)
	if err != nil {
		return err
	}
	defer listener.Stop()
	e, err := newWeb(cfg, st, listener, logger, true)
	if err != nil {
		return err
	}
	provider, err := startProvider(ctx, cfg, st)
	if err != nil {
		return err
	}
	defer provider.Stop()
	// dev's worker talks to dev's own provider, wherever it listens.
	cfg.ProviderURL = provider.URL()
	stopWorker := startWorker(ctx, cfg, st, listener, logger)
	defer stopWorker()
	return serveHTTP(ctx, e, cfg.Addr, logger, func(url string) {
		fmt.Fprintf(stdout, "refundd is running at %s\n", url)
		fmt.Fprintf(stdout, "Simulated payment provider at %s (its ledger: %s/refunds)\n\n", cfg.ProviderURL, cfg.ProviderURL)
		fmt.Fprintf(stdout, "Demo logins, password %q:\n", store.DemoPassword)
		for _, d := range store.DemoUsers {
			fmt.Fprintf(stdout, "  %-24s %s\n", d.Email, d.Role)
		}
		if cfg.DatabaseURL == "" {
			fmt.Fprintf(stdout, "\nDatabase: psql %q\n", st.URL())
		}
		fmt.Fprintf(stdout, "\nPress Ctrl-C to stop.\n")
	})
}

// runServe serves the web app. Several serve processes can share one
// database; they must share SESSION_KEY too.
func runServe(ctx context.Context, cfg Config, args []string, logger *slog.Logger, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if cfg.SessionKey == "" {
		return usageError{"SESSION_KEY is required (at least 32 characters, e.g. from `openssl rand -hex 32`); every serve process must use the same one"}
	}
	st, closeDB, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	if err := st.Ready(ctx); err != nil {
		// Serve anyway: /readyz reports it, and `refundd migrate` fixes it.
		logger.Warn("database not ready; run `refundd migrate`", "err", err)
	}
	listener, err := startListener(ctx, st, logger)
	if err != nil {
		return err
	}
	defer listener.Stop()
	e, err := newWeb(cfg, st, listener, logger, false)
	if err != nil {
		return err
	}
	return serveHTTP(ctx, e, cfg.Addr, logger, func(url string) {
		fmt.Fprintf(stdout, "refundd is running at %s\n", url)
	})
}

// runMigrate applies the embedded migrations and nothing else.
func runMigrate(ctx context.Context, cfg Config, args []string, logger *slog.Logger, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	st, closeDB, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "refundd: migrations applied; the database is up to date")
	return nil
}

// newWeb builds the web server. Its live streams wait on listener; an
// HTTP shutdown ends them at once (handlers registers that itself).
func newWeb(cfg Config, st *store.Store, listener *store.Listener, logger *slog.Logger, demo bool) (*echo.Echo, error) {
	return handlers.New(handlers.Config{
		SessionKey:   cfg.SessionKey,
		CookieSecure: cfg.CookieSecure,
		DemoLogins:   demo,
		Listener:     listener,
		// A customer without refund_access sees their runs' status, or
		// nothing at all.
		RevokedSeeNothing: cfg.RevokedAccess == "none",
	}, st, logger)
}

// openDatabase connects to DATABASE_URL or, when it is unset, to the private
// cluster under DATA_DIR, starting it (and creating its database) if needed.
// The returned close function closes the pool and stops the cluster if this
// call started it; it uses its own deadline, so it works after ctx ended.
func openDatabase(ctx context.Context, cfg Config, logger *slog.Logger) (*store.Store, func(), error) {
	if cfg.DatabaseURL != "" {
		st, err := store.Open(ctx, cfg.DatabaseURL)
		if err != nil {
			return nil, nil, err
		}
		return st, func() { st.Close() }, nil
	}

	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("data dir: %w", err)
	}
	clusterHome, err := clusterHome(cfg.DataDir)
	if err != nil {
		return nil, nil, err
	}
	if clusterHome != cfg.DataDir {
		logger.Warn("DATA_DIR is inside a folder the postgres user cannot enter; keeping the cluster elsewhere (set DATA_DIR to a reachable folder to choose)",
			"data_dir", cfg.DataDir, "cluster_home", clusterHome)
	}
	cluster, err := store.NewCluster(clusterHome, devPort)
	if err != nil {
		return nil, nil, err
	}
	t0 := time.Now()
	started, err := cluster.Start(ctx)
	if err != nil {
		return nil, nil, err
	}
	stopCluster := func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := cluster.Stop(stopCtx); err != nil {
			logger.Error("stop PostgreSQL", "err", err)
		} else if started {
			logger.Info("PostgreSQL stopped", "dir", cluster.Dir)
		}
	}
	if started {
		logger.Info("PostgreSQL started", "dir", cluster.Dir, "took", time.Since(t0).Round(time.Millisecond))
	} else {
		logger.Info("PostgreSQL already running; reusing it and leaving it running", "dir", cluster.Dir)
	}
	if err := createDatabase(ctx, cluster.URL("postgres"), devDatabase); err != nil {
		stopCluster()
		return nil, nil, err
	}
	st, err := store.Open(ctx, cluster.URL(devDatabase))
	if err != nil {
		stopCluster()
		return nil, nil, err
	}
	return st, func() { st.Close(); stopCluster() }, nil
}

// clusterHome is the folder the private cluster lives under: DATA_DIR,
// unless we are root and the postgres user (which the server runs as) cannot
// reach it, e.g. a checkout under /root. Then it is a folder under /var/tmp
// named after DATA_DIR, so the same DATA_DIR finds the same cluster again.
func clusterHome(dataDir string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	if os.Geteuid() != 0 {
		return dataDir, nil
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		return dataDir, nil // no postgres user: Start reports what is missing
	}
	for dir := abs; ; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if err != nil {
			return "", fmt.Errorf("data dir: %w", err)
		}
		owner := ""
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			owner = strconv.FormatUint(uint64(sys.Uid), 10)
		}
		if st.Mode().Perm()&0o001 == 0 && owner != pg.Uid {
			sum := sha256.Sum256([]byte(abs))
			home := filepath.Join("/var/tmp", "refundd-"+hex.EncodeToString(sum[:6]))
			if err := os.MkdirAll(home, 0o755); err != nil {
				return "", fmt.Errorf("cluster home: %w", err)
			}
			return home, nil
		}
		if dir == filepath.Dir(dir) {
			return dataDir, nil
		}
	}
}

// createDatabase creates database name unless it exists. It is the only SQL
// outside store/: it runs against the cluster's maintenance database before
// refundd's own database exists.
func createDatabase(ctx context.Context, maintenanceURL, name string) error {
	admin, err := store.Open(ctx, maintenanceURL)
	if err != nil {
		return err
	}
	defer admin.Close()
	var exists bool
	if err := admin.DB().GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = admin.DB().ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(name))
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code == "42P04" {
		// Another process created it first.
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// devSessionKey returns the session key kept in DATA_DIR/session.key,
// creating it on first use, so dev logins survive restarts.
func devSessionKey(dataDir string) (string, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dataDir, "session.key")
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	key := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, werr := f.WriteString(key + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return "", fmt.Errorf("write %s: %w", path, werr)
		}
		return key, nil
	case errors.Is(err, fs.ErrExist):
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", path, err)
		}
		key = strings.TrimSpace(string(b))
		if len(key) < 32 {
			return "", usageError{fmt.Sprintf("%s holds a key shorter than 32 characters: delete it to get a new one", path)}
		}
		return key, nil
	default:
		return "", fmt.Errorf("create %s: %w", path, err)
	}
}

// serveHTTP serves e on addr until ctx ends, then shuts down gracefully:
// it stops accepting, lets requests in flight finish (up to a deadline) and
// returns. ready gets the base URL once the listener is open.
func serveHTTP(ctx context.Context, e *echo.Echo, addr string, logger *slog.Logger, ready func(url string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// echo's own Server, so handlers can RegisterOnShutdown (streams).
	srv := e.Server
	srv.Handler = e
	srv.ReadHeaderTimeout = 10 * time.Second
	srv.ReadTimeout = 30 * time.Second
	srv.IdleTimeout = 2 * time.Minute
	// No WriteTimeout: event streams stay open for as long as the client
	// watches; handlers that need one set it per request.
	srv.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := baseURL(ln.Addr())
	logger.Info("http server listening", "url", url)
	ready(url)

	select {
	case err := <-served:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down", "cause", context.Cause(ctx))
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	<-served // Serve has returned http.ErrServerClosed
	if err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	logger.Info("http server stopped")
	return nil
}

// baseURL is the address people can open: an unspecified listen address
// (0.0.0.0, ::) is shown as localhost.
func baseURL(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return "http://" + a.String()
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(tcp.Port))
}
