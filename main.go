// Command refundd runs AI refund agents whose progress people watch in the
// browser. The package is wiring only: main.go dispatches subcommands and
// maps errors to exit codes, commands.go holds each subcommand, wiring.go
// opens the database and starts the parts they share. The parts themselves
// live in store/, handlers/, views/, agent/ and payments/.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/refundd/refundd/internal/devdb"
)

const usage = `usage: refundd <command>

commands:
  dev       run everything locally: a private PostgreSQL under DATA_DIR (unless
            DATABASE_URL is set), migrations, demo data, the web server
  serve     serve the web app (needs SESSION_KEY)
  worker    run refund agents
  provider  run the simulated payment provider
  migrate   apply database migrations, nothing else
  events    print a run's committed events as JSON lines (--run ID [--after N]
            [--follow]; --run PARENT --children: a request's every run)
  verify    check the system's invariants over the database

Configuration comes from environment variables; see README.md.
`

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
	// GOGC as config read it: refundd's default (400) unless set.
	debug.SetGCPercent(cfg.GCPercent)
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
	case errors.Is(err, devdb.ErrNoPostgres):
		fmt.Fprintf(stderr, "refundd %s: %v\n", name, devdb.ErrNoPostgres)
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
