package main

// Wiring shared by the subcommands: opening the database (DATABASE_URL or
// the private cluster), and starting the long-lived parts (the LISTEN
// connection, the web server, the worker, the simulated provider), each
// with the function that stops it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/net/netutil"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// openDatabase connects to DATABASE_URL or, when it is unset, to the private
// cluster under DATA_DIR, starting it (and creating its database) if needed.
// The returned close function closes the pool and stops the cluster if this
// call started it; it uses its own deadline, so it works after ctx ended.
func openDatabase(ctx context.Context, cfg Config, logger *slog.Logger) (*store.Store, func(), error) {
	if cfg.DatabaseURL == "" {
		return devdb.OpenPrivate(ctx, cfg.DataDir, logger)
	}
	st, err := store.Open(ctx, cfg.DatabaseURL, store.PoolSize(cfg.DBPoolSize))
	if err != nil {
		return nil, nil, err
	}
	return st, func() { st.Close() }, nil
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

// startWorker starts what a worker process runs: the listener that wakes it,
// the executor, and the pruner. stop ends them in reverse order.
func startWorker(ctx context.Context, cfg Config, st *store.Store, listener *store.Listener, logger *slog.Logger) (stop func()) {
	var narrator agent.Narrator
	if cfg.ModelBaseURL != "" {
		narrator = &agent.OpenAI{BaseURL: cfg.ModelBaseURL, Model: cfg.ModelName, APIKey: cfg.ModelAPIKey}
	}
	provider := payments.NewClient(cfg.ProviderURL, 0)
	x := agent.New(agent.Config{ApprovalThreshold: cfg.ApprovalThreshold, MaxAmount: cfg.MaxRefund, Lease: cfg.WorkerLease,
		OutageBudget: cfg.ProviderOutageBudget, Concurrency: cfg.WorkerSlots, NarrationDelay: cfg.NarrationPace},
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

// startProvider serves the simulated payment provider on cfg.ProviderAddr,
// keeping its ledger in the database at databaseURL through a pool of its
// own. stop stops the server, then closes that pool.
func startProvider(ctx context.Context, cfg Config, databaseURL string, logger *slog.Logger) (srv *payments.Server, stop func(), err error) {
	sim, err := payments.OpenSim(ctx, databaseURL, payments.Faults{})
	if err != nil {
		return nil, nil, err
	}
	srv = payments.NewServer(cfg.ProviderAddr, sim)
	if err := srv.Start(ctx); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("provider: %w", err), sim.CloseDB())
	}
	return srv, func() {
		srv.Stop()
		if err := sim.CloseDB(); err != nil {
			logger.Error("stop provider", "err", err)
		}
	}, nil
}

// newWeb builds the web server. Its live streams wait on listener; an
// HTTP shutdown ends them at once (handlers registers that itself).
func newWeb(cfg Config, st *store.Store, listener *store.Listener, logger *slog.Logger, demo bool) (*echo.Echo, error) {
	return handlers.New(handlers.Config{
		SessionKey:     cfg.SessionKey,
		CookieSecure:   cfg.CookieSecure,
		DemoLogins:     demo,
		Listener:       listener,
		AllowedHosts:   cfg.AllowedHosts,
		RequestTimeout: cfg.RequestTimeout,
		// A customer without refund_access sees their runs' status, or
		// nothing at all.
		RevokedSeeNothing: cfg.RevokedAccess == "none",
		StartRatePerUser:  cfg.StartRatePerUser,
		Stream: stream.Config{MaxStreams: cfg.MaxStreams, MaxPerUser: cfg.MaxStreamsPerUser,
			Retry: cfg.StreamRetry, RetrySpread: cfg.StreamRetrySpread, Drain: cfg.StreamDrain},
		APIPageLimit: cfg.APIPageLimit,
	}, st, logger)
}

// serveHTTP serves e on addr, holding at most maxConns connections, until
// ctx ends, then shuts down gracefully: it stops accepting, lets requests in
// flight finish (up to a deadline) and returns. ready gets the base URL once
// the listener is open.
func serveHTTP(ctx context.Context, e *echo.Echo, addr string, maxConns int, logger *slog.Logger, ready func(url string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// echo's own Server, so handlers can RegisterOnShutdown (streams).
	srv := e.Server
	srv.Handler = e
	counted := capConnections(ln, srv, maxConns)
	ln = counted
	// A connection that sends no request, or sits idle between requests,
	// is closed soon: neither may hold a slot that pages need.
	srv.ReadHeaderTimeout = 10 * time.Second
	srv.ReadTimeout = 30 * time.Second
	srv.IdleTimeout = 30 * time.Second
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
	// Shutdown does not wait for the streams that detached their
	// connections; they were told to end (RegisterOnShutdown) and close
	// their connections themselves.
	if werr := counted.waitClosed(shutdownCtx); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	logger.Info("http server stopped")
	return nil
}

// capConnections holds at most max connections open on srv at once
// (netutil.LimitListener): past the cap, new connections wait in the
// kernel's backlog instead of taking the file descriptors the database
// pool and the listener need. Near the cap (nine tenths) keep-alive is
// turned off, which closes idle connections at once, so clients that hold
// connections without using them cannot keep pages and health checks out;
// it comes back on below three quarters. Connections are counted from
// accept to close, so a stream that detached its connection from the
// server (handlers/stream/writer.go) still counts.
func capConnections(ln net.Listener, srv *http.Server, max int) *countedListener {
	high, low := int64(max)*9/10, int64(max)*3/4
	return &countedListener{Listener: netutil.LimitListener(ln, max), change: func(n int64, opened bool) {
		switch {
		case opened && n == high:
			srv.SetKeepAlivesEnabled(false)
		case !opened && n == low:
			srv.SetKeepAlivesEnabled(true)
		}
	}}
}

// countedListener counts its open connections and tells change each time
// the count moves.
type countedListener struct {
	net.Listener
	open   atomic.Int64
	change func(n int64, opened bool)
}

func (l *countedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.change(l.open.Add(1), true)
	return &countedConn{Conn: c, l: l}, nil
}

// waitClosed waits until every connection is closed, or ctx ends.
func (l *countedListener) waitClosed(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for l.open.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d connections still open: %w", l.open.Load(), context.Cause(ctx))
		case <-t.C:
		}
	}
	return nil
}

type countedConn struct {
	net.Conn
	l      *countedListener
	closed atomic.Bool
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.l.change(c.l.open.Add(-1), false)
	}
	return err
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
