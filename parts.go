package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// startWorker starts what a worker process runs: the listener that wakes it,
// the executor, and the pruner. stop ends them in reverse order.
func startWorker(ctx context.Context, cfg Config, st *store.Store, listener *store.Listener, logger *slog.Logger) (stop func()) {
	var narrator agent.Narrator
	if cfg.ModelBaseURL != "" {
		narrator = &agent.OpenAI{BaseURL: cfg.ModelBaseURL, Model: cfg.ModelName, APIKey: cfg.ModelAPIKey}
	}
	provider := payments.NewClient(cfg.ProviderURL, 0)
	x := agent.New(agent.Config{ApprovalThreshold: cfg.ApprovalThreshold, MaxAmount: cfg.MaxRefund, Lease: cfg.WorkerLease,
		NarrationDelay: 40 * time.Millisecond},
		st, provider, narrator, listener, logger.With("part", "worker"))
	x.Start(ctx)
	pruner := &store.Pruner{Store: st, Logger: logger.With("part", "pruner"),
		Retention: store.Retention{Presentation: cfg.ReplayWindow, Business: cfg.BusinessRetention}}
	pruner.Start(ctx)
	return func() {
		x.Stop()
		pruner.Stop()
		provider.Close()
	}
}

// startListener opens the process's one LISTEN connection.
func startListener(ctx context.Context, st *store.Store, logger *slog.Logger) (*store.Listener, error) {
	l := store.NewListener(st.URL(), logger.With("part", "listener"))
	if err := l.Start(ctx); err != nil {
		return nil, fmt.Errorf("listen for notifications: %w", err)
	}
	return l, nil
}

// startProvider serves the simulated payment provider on cfg.ProviderAddr.
func startProvider(ctx context.Context, cfg Config, st *store.Store) (*payments.Server, error) {
	sim, err := payments.NewSim(sqlx.NewDb(st.DB().DB, "postgres"), payments.Faults{})
	if err != nil {
		return nil, err
	}
	srv := payments.NewServer(cfg.ProviderAddr, sim)
	if err := srv.Start(ctx); err != nil {
		return nil, fmt.Errorf("provider: %w", err)
	}
	return srv, nil
}

// openReady opens the database for a part that must not run on an
// unmigrated schema.
func openReady(ctx context.Context, cfg Config, logger *slog.Logger) (*store.Store, func(), error) {
	st, closeDB, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	if err := st.Ready(ctx); err != nil {
		closeDB()
		return nil, nil, fmt.Errorf("%w (run `refundd migrate`)", err)
	}
	return st, closeDB, nil
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
	stop := startWorker(ctx, cfg, st, listener, logger)
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
	st, closeDB, err := openReady(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	srv, err := startProvider(ctx, cfg, st)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "simulated payment provider running at %s\n", srv.URL())
	<-ctx.Done()
	srv.Stop()
	logger.Info("provider stopped")
	return nil
}

// runEvents prints a run's committed events as JSON lines; with --follow it
// keeps printing new ones as they commit, until interrupted.
func runEvents(ctx context.Context, cfg Config, args []string, logger *slog.Logger, stdout io.Writer) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runArg := fs.String("run", "", "run ID")
	after := fs.Int64("after", 0, "print events with seq above this")
	follow := fs.Bool("follow", false, "keep printing new events")
	if err := fs.Parse(args); err != nil {
		return usageError{fmt.Sprintf("%v (usage: refundd events --run ID [--after N] [--follow])", err)}
	}
	if err := noArgs(fs.Args()); err != nil {
		return err
	}
	runID, err := uuid.Parse(*runArg)
	if err != nil {
		return usageError{fmt.Sprintf("--run must be a run ID, got %q", *runArg)}
	}
	st, closeDB, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	var wake <-chan struct{}
	if *follow {
		listener, err := startListener(ctx, st, logger)
		if err != nil {
			return err
		}
		defer listener.Stop()
		// Subscribe before reading, so nothing commits unnoticed between.
		var unsubscribe func()
		wake, unsubscribe = listener.Subscribe(store.RunTopic(runID.String()))
		defer unsubscribe()
	}
	enc := json.NewEncoder(stdout)
	cursor := *after
	for {
		evs, err := st.EventsAfter(ctx, runID, cursor, store.MaxPage)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("no run %s", runID)
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		}
		for _, e := range evs {
			if err := enc.Encode(e); err != nil {
				return err
			}
			cursor = e.Seq
		}
		if len(evs) == store.MaxPage {
			continue
		}
		if !*follow {
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
	problems, err := st.Verify(ctx)
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
