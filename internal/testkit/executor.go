package testkit

import (
	"cmp"
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// Provider is a simulated payment provider served on loopback, and a
// client of it.
type Provider struct {
	Sim    *payments.Sim
	URL    string
	Client *payments.Client
}

// StartProvider serves a simulated provider with faults, keeping its
// ledger through db, until the test ends. Its client gives up on a request
// after timeout (0: the client's default).
func StartProvider(tb testing.TB, db *sqlx.DB, faults payments.Faults, timeout time.Duration) *Provider {
	tb.Helper()
	sim, err := payments.NewSim(db, faults)
	if err != nil {
		tb.Fatalf("testkit: simulated provider: %v", err)
	}
	srv := httptest.NewServer(sim.Handler())
	tb.Cleanup(srv.Close)
	// Cleanups run last-in first-out: end held answers before srv.Close
	// waits for them.
	tb.Cleanup(sim.Close)
	c := payments.NewClient(srv.URL, timeout).WithSecret(sim.Secret())
	tb.Cleanup(c.Close)
	return &Provider{Sim: sim, URL: srv.URL, Client: c}
}

// StartExecutor runs the real executor over st against provider until the
// test ends. What cfg leaves zero that a test would wait for is made short:
// it looks for work every 20 ms and retries after 20 ms, backing off to at
// most a second (a lookup outage must not push a retry past the test's
// deadline on a loaded machine). Unless the test says, it works on four
// runs at once (agent has no default of its own). l wakes it on new
// work; nil gives it a Listener of its own. It logs warnings to the test's
// output.
func StartExecutor(tb testing.TB, st *store.Store, l *store.Listener, provider payments.Provider, narrator agent.Narrator, cfg agent.Config) *agent.Executor {
	tb.Helper()
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 4)
	cfg.Poll = cmp.Or(cfg.Poll, 20*time.Millisecond)
	cfg.RetryBase = cmp.Or(cfg.RetryBase, 20*time.Millisecond)
	cfg.RetryMax = cmp.Or(cfg.RetryMax, time.Second)
	log := Logger(tb, slog.LevelWarn)
	if l == nil {
		l = store.NewListener(st.URL(), log)
		if err := l.Start(context.Background()); err != nil {
			tb.Fatalf("testkit: listener: %v", err)
		}
		tb.Cleanup(l.Stop)
	}
	cfg.Answers = cmp.Or[agent.Answers](cfg.Answers, views.Answers{})
	x := agent.New(cfg, st, provider, narrator, l, log)
	x.Start(context.Background())
	tb.Cleanup(x.Stop)
	return x
}

// Logger writes records at level and above to the test's output, shown
// when the test fails or runs with -v.
func Logger(tb testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: level}))
}
