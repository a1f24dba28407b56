package main

// The subcommands, one function each: what `refundd <command>` runs. Each
// parses its arguments, opens what it needs through wiring.go and runs
// until done or interrupted.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/mailbox"
	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// runDev runs everything on one machine for development: the private
// cluster (unless DATABASE_URL is set), migrations, demo data and the web
// server. It stops what it started on SIGINT/SIGTERM.
func runDev(ctx context.Context, cfg Config, args []string, logger *slog.Logger, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if sameAddr(cfg.HealthAddr, cfg.ProviderAddr) {
		return usageError{fmt.Sprintf("HEALTH_ADDR (%s) must differ from PROVIDER_ADDR, where dev's simulated provider listens", cfg.HealthAddr)}
	}
	if cfg.SessionKey == "" {
		key, err := handlers.DevSessionKey(cfg.DataDir)
		var short *handlers.ShortKeyError
		if errors.As(err, &short) {
			return usageError{err.Error()}
		}
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
	if err := devdb.SeedDemo(ctx, st); err != nil {
		return err
	}
	listener, err := startListener(ctx, st, logger)
	if err != nil {
		return err
	}
	defer listener.Stop()
	if cfg.ProviderSecret == "" {
		if cfg.ProviderSecret, err = devProviderSecret(cfg.DataDir); err != nil {
			return err
		}
	}
	provider, stopProvider, err := startProvider(ctx, cfg, st.URL(), logger)
	if err != nil {
		return err
	}
	defer stopProvider()
	// dev's worker, and support's page of the provider's refunds, talk to
	// dev's own provider, wherever it listens.
	cfg.ProviderURL = provider.URL()
	mailLine, stopMail, err := startDevMail(ctx, &cfg)
	if err != nil {
		return err
	}
	defer stopMail()
	e, err := newWeb(cfg, st, listener, logger, true)
	if err != nil {
		return err
	}
	stopWorker := startWorker(ctx, cfg, st, listener, logger, true)
	defer stopWorker()
	return serveHTTP(ctx, e, cfg, logger, func(url, health string) {
		fmt.Fprintf(stdout, "refundd is running at %s\n", url)
		printHealth(stdout, health)
		fmt.Fprintf(stdout, "Simulated payment provider at %s (its ledger: %s/refunds)\n", cfg.ProviderURL, cfg.ProviderURL)
		fmt.Fprintf(stdout, "%s\n\n", mailLine)
		fmt.Fprintf(stdout, "Demo logins, password %q:\n", devdb.DemoPassword)
		for _, d := range devdb.DemoUsers {
			fmt.Fprintf(stdout, "  %-24s %s\n", d.Email, d.Role)
		}
		if cfg.DatabaseURL == "" {
			fmt.Fprintf(stdout, "\nDatabase: psql %q\n", st.URL())
		}
		fmt.Fprintf(stdout, "\nPress Ctrl-C to stop.\n")
	})
}

// startDevMail runs dev's local mail server, unless SMTP_URL names
// another, with the page of what it received on a small listener of its
// own, and points cfg.SMTPURL at it. The mails are kept under
// DATA_DIR/mail, so they outlive a restart. line is what dev prints about
// it.
func startDevMail(ctx context.Context, cfg *Config) (line string, stop func(), err error) {
	if cfg.SMTPURL != "" {
		// Its password, if any, is never printed.
		c, err := outbound.ParseSMTPURL(cfg.SMTPURL)
		if err != nil {
			return "", nil, err
		}
		return "Emails go to " + c.String() + " (SMTP_URL)", func() {}, nil
	}
	mb, err := mailbox.Start(ctx, "127.0.0.1:0", filepath.Join(cfg.DataDir, "mail"))
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		mb.Close()
		return "", nil, fmt.Errorf("mail page: %w", err)
	}
	srv := &http.Server{Handler: mb.Handler(), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	cfg.SMTPURL = mb.URL()
	line = fmt.Sprintf("Local mail server at %s (what it received: http://%s/)", mb.URL(), ln.Addr())
	return line, func() {
		srv.Close()
		<-done
		mb.Close()
	}, nil
}

// warmConns is how many connections of each pool serve opens before it
// listens: a restart's reconnect wave found two and opened four more.
const warmConns = 6

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
	} else if err := st.Warm(ctx, warmConns); err != nil {
		logger.Warn("database pools not warmed", "err", err)
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
	return serveHTTP(ctx, e, cfg, logger, func(url, health string) {
		fmt.Fprintf(stdout, "refundd is running at %s\n", url)
		printHealth(stdout, health)
	})
}

// devProviderSecret makes a fresh secret for dev's simulated provider and
// keeps it, readable by its owner only, in dataDir/provider.secret, for a
// person who switches the provider's faults with curl. It is never printed.
func devProviderSecret(dataDir string) (string, error) {
	secret := rand.Text()
	path := filepath.Join(dataDir, "provider.secret")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	// A new file each time, renamed into place: WriteFile keeps an
	// existing file's mode, and one made readable by others (0644) would
	// stay so.
	tmp, err := os.CreateTemp(dataDir, "provider.secret.*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.WriteString(secret + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return secret, nil
}

// printHealth names the health listener (HEALTH_ADDR), if there is one.
func printHealth(stdout io.Writer, url string) {
	if url != "" {
		fmt.Fprintf(stdout, "Health checks at %s (/healthz, /readyz, /metrics)\n", url)
	}
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

// runWorker runs refund agents until stopped. Any number of workers can
// share one database: they claim runs with leases.
func runWorker(ctx context.Context, cfg Config, args []string, logger *slog.Logger, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	st, closeDB, err := openReady(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	listener, err := startListener(ctx, st, logger)
	if err != nil {
		return err
	}
	defer listener.Stop()
	stop := startWorker(ctx, cfg, st, listener, logger, false)
	fmt.Fprintf(stdout, "refundd worker running; payment provider at %s\n", cfg.ProviderURL)
	<-ctx.Done()
	stop()
	logger.Info("worker stopped")
	return nil
}

// runProvider serves the simulated payment provider until stopped.
func runProvider(ctx context.Context, cfg Config, args []string, logger *slog.Logger, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if cfg.ProviderSecret == "" {
		return usageError{fmt.Sprintf("PROVIDER_SECRET is required (at least %d characters, e.g. from `openssl rand -hex 32`): the workers send it with every refund", payments.MinSecret)}
	}
	st, closeDB, err := openReady(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	srv, stopProvider, err := startProvider(ctx, cfg, st.URL(), logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "simulated payment provider running at %s\n", srv.URL())
	<-ctx.Done()
	stopProvider()
	logger.Info("provider stopped")
	return nil
}

// runEvents prints a run's committed events as JSON lines; with --follow it
// keeps printing new ones as they commit, until interrupted.
func runEvents(ctx context.Context, cfg Config, args []string, logger *slog.Logger, stdout io.Writer) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runArg := fs.String("run", "", "run ID")
	afterArg := fs.String("after", "", "print events with seq above this")
	follow := fs.Bool("follow", false, "keep printing new events")
	children := fs.Bool("children", false, "with --run PARENT: print every run of the request, each after its own seq")
	if err := fs.Parse(args); err != nil {
		return usageError{fmt.Sprintf("%v (usage: refundd events --run ID [--after N] [--follow], or refundd events --run PARENT --children [--follow])", err)}
	}
	if err := noArgs(fs.Args()); err != nil {
		return err
	}
	runID, err := uuid.Parse(*runArg)
	if err != nil {
		return usageError{fmt.Sprintf("--run must be a run ID, got %q", *runArg)}
	}
	if *children && *afterArg != "" {
		return usageError{"--after names a seq of one run's log and cannot go with --children, where each run has its own: " +
			"every run of the request is printed from its start (resume one run with --run ID --after N)"}
	}
	after, err := store.ParseCursor(*afterArg)
	if err != nil {
		return usageError{fmt.Sprintf("--after: %v", err)}
	}
	st, closeDB, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	if *children {
		return familyEvents(ctx, st, logger, runID, *follow, stdout)
	}
	enc := json.NewEncoder(stdout)
	f := &store.Follower{RunID: runID, Cursor: after, Deliver: func(_ context.Context, evs []store.Event) error {
		for _, e := range evs {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}}
	if *follow {
		listener, err := startListener(ctx, st, logger)
		if err != nil {
			return err
		}
		defer listener.Stop()
		// Subscribe before the first read, so nothing commits unnoticed between.
		wake, unsubscribe := listener.Subscribe(store.RunTopic(runID.String()))
		defer unsubscribe()
		f.Wait = func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-wake:
			case <-time.After(30 * time.Second): // a safety net under NOTIFY
			}
			return nil
		}
	}
	switch err := st.Follow(ctx, f); {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("no run %s", runID)
	case err != nil && ctx.Err() != nil:
		return nil
	default:
		return err
	}
}

// familyEvents is `refundd events --run PARENT --children`: the committed
// events of the request and of each of its children, as JSON lines, the
// parent's log first, then each child's in the family's order. Nothing
// orders events across runs: each line's run_id and seq are its cursor,
// and with follow each run is read again strictly after its own last seq
// whenever any run of the family may have grown, until interrupted.
func familyEvents(ctx context.Context, st *store.Store, logger *slog.Logger, parentID uuid.UUID, follow bool, stdout io.Writer) error {
	fam, err := st.FamilyOf(ctx, parentID)
	if errors.Is(err, store.ErrNotFound) {
		return notAFamily(ctx, st, parentID)
	}
	if err != nil {
		return err
	}
	runs := append([]store.Run{*fam.Parent}, fam.Children...)
	enc := json.NewEncoder(stdout)
	deliver := func(_ context.Context, evs []store.Event) error {
		for _, e := range evs {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}
	followers := make([]*store.Follower, len(runs))
	topics := make([]string, len(runs))
	for i, r := range runs {
		followers[i] = &store.Follower{RunID: r.ID, Deliver: deliver}
		topics[i] = store.RunTopic(r.ID.String())
	}
	var wake <-chan struct{}
	if follow {
		listener, err := startListener(ctx, st, logger)
		if err != nil {
			return err
		}
		defer listener.Stop()
		// Subscribed before the first read, so nothing commits unnoticed.
		var unsubscribe func()
		wake, unsubscribe = listener.Subscribe(topics...)
		defer unsubscribe()
	}
	for {
		for _, f := range followers {
			// No Wait: each run is read up to now, then the next.
			if err := st.Follow(ctx, f); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("run %s: %w", f.RunID, err)
			}
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-time.After(30 * time.Second): // a safety net under NOTIFY
		}
	}
}

// notAFamily says why --children found no family at id: no such run, or a
// run that is a request's child (name the parent) or has no children.
func notAFamily(ctx context.Context, st *store.Store, id uuid.UUID) error {
	r, err := st.RunByID(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("no run %s", id)
	case err != nil:
		return err
	case r.ParentRunID.Valid:
		return usageError{fmt.Sprintf("run %s is one of request %s's refunds: use --run %s --children, or drop --children", id, r.ParentRunID.UUID, r.ParentRunID.UUID)}
	}
	return usageError{fmt.Sprintf("run %s is a refund of its own, not a request: it has no children (drop --children)", id)}
}

// runVerify checks every invariant over the database, and our ledger
// against the provider's when the provider answers. It exits 1 listing each
// violation.
func runVerify(ctx context.Context, cfg Config, args []string, logger *slog.Logger, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	st, closeDB, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	var checks []store.VerifyOption
	if cfg.SMTPURL != "" {
		checks = append(checks, store.WithMailCheck())
	}
	problems, err := st.Verify(ctx, checks...)
	if err != nil {
		return err
	}
	client := payments.NewClient(cfg.ProviderURL, 5*time.Second)
	defer client.Close()
	if more, err := agent.VerifyLedger(ctx, st, client); err != nil {
		fmt.Fprintf(stdout, "skipped: the provider's ledger at %s: %v\n", cfg.ProviderURL, err)
	} else {
		problems = append(problems, more...)
	}
	for _, p := range problems {
		fmt.Fprintln(stdout, "violation:", p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d invariant violation(s)", len(problems))
	}
	fmt.Fprintln(stdout, "ok: every invariant holds")
	return nil
}
