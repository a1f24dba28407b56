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
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/net/netutil"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// openDatabase connects to DATABASE_URL or, when it is unset, to the private
// cluster under DATA_DIR, starting it (and creating its database) if needed.
// The returned close function closes the pool and stops the cluster if this
// call started it; it uses its own deadline, so it works after ctx ended.
func openDatabase(ctx context.Context, cfg Config, logger *slog.Logger) (*store.Store, func(), error) {
	var (
		st      *store.Store
		closeDB func()
		err     error
	)
	if cfg.DatabaseURL == "" {
		st, closeDB, err = devdb.OpenPrivate(ctx, cfg.DataDir, logger)
	} else {
		st, err = store.Open(ctx, cfg.DatabaseURL, store.PoolSize(cfg.DBPoolSize), store.StreamPoolSize(cfg.DBStreamPoolSize),
			store.WithAnswers(views.Answers{}))
		closeDB = func() { st.Close() }
	}
	if err != nil {
		return nil, nil, err
	}
	// The pools' statistics in /metrics, for as long as they are open.
	pools := st.PoolCollectors()
	for _, c := range pools {
		if err := metrics.Registry.Register(c); err != nil {
			logger.Warn("database pool statistics not in /metrics", "err", err)
		}
	}
	return st, func() {
		for _, c := range pools {
			metrics.Registry.Unregister(c)
		}
		closeDB()
	}, nil
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
// the executor, the pruner and the outbound engine (demo: dev's, whose
// webhook receivers may be on this machine). stop ends them in reverse
// order.
func startWorker(ctx context.Context, cfg Config, st *store.Store, listener *store.Listener, logger *slog.Logger, demo bool) (stop func()) {
	var narrator agent.Narrator
	if cfg.ModelBaseURL != "" {
		narrator = &agent.OpenAI{BaseURL: cfg.ModelBaseURL, Model: cfg.ModelName, APIKey: cfg.ModelAPIKey}
	}
	provider := payments.NewClient(cfg.ProviderURL, 0).WithSecret(cfg.ProviderSecret)
	x := agent.New(agent.Config{Answers: views.Answers{}, ApprovalThreshold: cfg.ApprovalThreshold, ApprovalDeadline: cfg.ApprovalDeadline,
		MaxAmount: cfg.MaxRefund, Lease: cfg.WorkerLease,
		OutageBudget: cfg.ProviderOutageBudget, Concurrency: cfg.WorkerSlots, NarrationDelay: cfg.NarrationPace},
		st, provider, narrator, listener, logger.With("part", "worker"))
	x.Start(ctx)
	pruner := &store.Pruner{Store: st, Logger: logger.With("part", "pruner"),
		Retention: store.Retention{Presentation: cfg.ReplayWindow, Business: cfg.BusinessRetention}}
	pruner.Start(ctx)
	out := outbound.New(outboundConfig(cfg, st, logger, demo), st, logger.With("part", "outbound"))
	out.Start(ctx)
	return func() {
		out.Stop()
		x.Stop()
		pruner.Stop()
		provider.Close()
	}
}

// webhookPolicy is where webhooks may go: dev's receivers run on this
// machine; serve's and worker's are on the internet.
func webhookPolicy(cfg Config, demo bool) outbound.Policy {
	return outbound.Policy{AllowHTTP: demo, AllowLoopback: demo, AllowHosts: cfg.WebhookAllowHosts}
}

// outboundConfig is the outbound engine's: webhooks always, email when
// SMTP_URL is set (the log says which).
func outboundConfig(cfg Config, st *store.Store, logger *slog.Logger, demo bool) outbound.Config {
	oc := outbound.Config{Workers: cfg.WebhookWorkers, PerEndpoint: cfg.WebhookPerEndpoint, Timeout: cfg.WebhookTimeout,
		Schedule: cfg.WebhookSchedule, DisableAfter: cfg.WebhookDisableAfter, Policy: webhookPolicy(cfg, demo)}
	if cfg.SMTPURL == "" {
		logger.Info("SMTP_URL is not set: no email is sent")
		return oc
	}
	mailer, err := outbound.NewSMTPMailer(cfg.SMTPURL, cfg.MailFrom)
	if err != nil { // LoadConfig refused it already
		logger.Error("no email is sent", "err", err)
		return oc
	}
	mailer.Timeout = cfg.MailLease / 2
	logger.Info("emails are sent", "smtp", mailer.Config().String(), "from", cfg.MailFrom)
	oc.Planner = &outbound.MailPlanner{Store: st, PublicURL: cfg.PublicURL}
	oc.Sinks = []outbound.Sink{&outbound.MailSink{Store: st, Mailer: mailer, Logger: logger.With("part", "mail"), Lease: cfg.MailLease}}
	return oc
}

// startListener opens the process's one LISTEN connection.
func startListener(ctx context.Context, st *store.Store, logger *slog.Logger) (*store.Listener, error) {
	l := store.NewListener(st.URL(), logger.With("part", "listener"))
	if err := l.Start(ctx); err != nil {
		return nil, fmt.Errorf("listen for notifications: %w", err)
	}
	// What this process commits wakes its own streams at once.
	st.WakeLocal(l)
	return l, nil
}

// startProvider serves the simulated payment provider on cfg.ProviderAddr,
// keeping its ledger in the database at databaseURL through a pool of its
// own; its writes and fault switch need cfg.ProviderSecret. stop stops the server, then closes that pool.
func startProvider(ctx context.Context, cfg Config, databaseURL string, logger *slog.Logger) (srv *payments.Server, stop func(), err error) {
	sim, err := payments.OpenSim(ctx, databaseURL, payments.Faults{})
	if err != nil {
		return nil, nil, err
	}
	if err := sim.SetSecret(cfg.ProviderSecret); err != nil {
		return nil, nil, errors.Join(err, sim.CloseDB())
	}
	if host, _, err := net.SplitHostPort(cfg.ProviderAddr); err == nil && host != "" {
		sim.AllowHost(host)
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
		MaxFamilySize:     cfg.MaxFamilySize,
		Stream: stream.Config{MaxStreams: cfg.MaxStreams, MaxPerUser: cfg.MaxStreamsPerUser,
			Retry: cfg.StreamRetry, RetrySpread: cfg.StreamRetrySpread, Drain: cfg.StreamDrain},
		APIPageLimit:      cfg.APIPageLimit,
		MaxBodyBytes:      int64(cfg.MaxBodyBytes),
		MaxJSONDepth:      cfg.MaxJSONDepth,
		ApprovalThreshold: cfg.ApprovalThreshold,
		ProviderLedger:    providerLedger{payments.NewClient(cfg.ProviderURL, 5*time.Second).WithSecret(cfg.ProviderSecret)},
		// dev's receivers run on this machine; serve's are on the internet.
		WebhookPolicy: webhookPolicy(cfg, demo),
		MaxWebhooks:   cfg.MaxWebhooks,
	}, st, logger)
}

// providerLedger reads the payment provider's ledger (PROVIDER_URL) for
// support's page of refunds no run of ours explains.
type providerLedger struct{ c *payments.Client }

var _ handlers.ProviderLedger = providerLedger{}

func (l providerLedger) Refunds(ctx context.Context) ([]store.ProviderRefund, error) {
	rcs, err := l.c.Ledger(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]store.ProviderRefund, len(rcs))
	for i, rc := range rcs {
		out[i] = store.ProviderRefund{Key: rc.Key, Ref: rc.Ref, OrderRef: rc.OrderRef, Amount: rc.Amount,
			Currency: rc.Currency, Status: rc.Status, CreatedAt: rc.CreatedAt}
	}
	return out, nil
}

// serveHTTP serves e on cfg.Addr, holding at most cfg.MaxConnections
// connections, and, when cfg.HealthAddr is set, its health checks and
// metrics on a listener of their own (serveHealth). It serves until ctx
// ends, then shuts down gracefully: it stops accepting, lets requests in
// flight finish (up to a deadline) and returns. ready gets the base URLs
// once the listeners are open (health is "" without HEALTH_ADDR).
func serveHTTP(ctx context.Context, e *echo.Echo, cfg Config, logger *slog.Logger, ready func(web, health string)) error {
	ln, err := listen(ctx, cfg.Addr, listenBusyFor, logger)
	if err != nil {
		return err
	}
	var health *http.Server
	var healthLn net.Listener
	if cfg.HealthAddr != "" {
		if healthLn, err = listen(ctx, cfg.HealthAddr, listenBusyFor, logger); err != nil {
			ln.Close()
			return err
		}
		health = newHealthServer(e, logger)
	}
	// echo's own Server, so handlers can RegisterOnShutdown (streams).
	srv := e.Server
	srv.Handler = e
	counted := capConnections(ln, srv, cfg.MaxConnections)
	ln = counted
	setTimeouts(srv, cfg, logger)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url, healthURL := baseURL(ln.Addr()), ""
	logger.Info("http server listening", "url", url)
	healthServed := make(chan error, 1)
	if health != nil {
		go func() { healthServed <- health.Serve(netutil.LimitListener(healthLn, healthMaxConnections)) }()
		healthURL = baseURL(healthLn.Addr())
		logger.Info("health server listening", "url", healthURL)
	}
	ready(url, healthURL)

	var failed error
	select {
	case err := <-served:
		failed = fmt.Errorf("http server: %w", err)
	case err := <-healthServed:
		failed = fmt.Errorf("health server: %w", err)
	case <-ctx.Done():
		logger.Info("shutting down", "cause", context.Cause(ctx))
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// Health first: a load balancer sees this instance go at once, while
	// its requests and streams still finish.
	if health != nil {
		if err := health.Shutdown(shutdownCtx); err != nil && failed == nil {
			failed = fmt.Errorf("health shutdown: %w", err)
		}
	}
	err = srv.Shutdown(shutdownCtx)
	if failed != nil {
		return failed
	}
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

// setTimeouts bounds what a client can hold of the web server.
func setTimeouts(srv *http.Server, cfg Config, logger *slog.Logger) {
	// A connection that sends no request, or sits idle between requests,
	// is closed soon: neither may hold a slot that pages need.
	srv.ReadHeaderTimeout = 10 * time.Second
	srv.ReadTimeout = 30 * time.Second
	srv.IdleTimeout = 30 * time.Second
	// A client that stops reading (pipelined requests, never a read) is
	// cut, and counted (countedConn.Write). Event streams clear it and
	// set one per write of their own.
	srv.WriteTimeout = cfg.WriteTimeout
	srv.ConnState = func(c net.Conn, state http.ConnState) {
		if cc, ok := c.(*countedConn); ok && state == http.StateHijacked {
			cc.hijacked.Store(true)
		}
	}
	srv.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
}

// healthMaxConnections caps the health listener's connections. They come
// out of the reserve MAX_CONNECTIONS leaves below the open-file limit; a
// load balancer's probes and one scraper need a few.
const healthMaxConnections = 32

// newHealthServer serves e's health checks and metrics, and nothing else,
// for serveHTTP's health listener. Its connections are not counted against
// MAX_CONNECTIONS and its accept queue holds no stream opens, so probes
// answer while a reconnect wave fills the web server's. The requests still
// go through e, so they are logged, and answered, as on ADDR.
func newHealthServer(e *echo.Echo, logger *slog.Logger) *http.Server {
	mux := http.NewServeMux()
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		mux.Handle("GET "+path, e)
	}
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       30 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// listenBusyFor is how long listen retries an address in use: a
// supervisor that restarts serve at once may find the old process still
// holding it for a moment.
const listenBusyFor = 10 * time.Second

// listenBusyEvery is how often listen tries a busy address again.
const listenBusyEvery = 200 * time.Millisecond

// listen opens a TCP listener on addr. While another socket listens there
// (EADDRINUSE) it tries again every listenBusyEvery for up to busyFor,
// saying so once, then fails. Connections left in TIME_WAIT by a previous
// process do not count: Go sets SO_REUSEADDR on its listeners on Linux
// (listen_test.go checks).
func listen(ctx context.Context, addr string, busyFor time.Duration, logger *slog.Logger) (net.Listener, error) {
	deadline := time.Now().Add(busyFor)
	var retry *time.Ticker
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%w (still, after retrying for %s)", err, busyFor)
		}
		if retry == nil {
			logger.Warn(fmt.Sprintf("address in use; retrying for up to %s", busyFor), "addr", addr)
			retry = time.NewTicker(listenBusyEvery)
			defer retry.Stop()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (stopped while retrying: %w)", err, context.Cause(ctx))
		case <-retry.C:
		}
	}
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
	// hijacked: a stream took the connection; its cuts are the stream's
	// own (refundd_stream_slow_cuts_total).
	hijacked atomic.Bool
	timedOut atomic.Bool
}

// Write counts, once per connection, a response cut by the server's
// WriteTimeout: its client stopped reading.
func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && !c.hijacked.Load() && c.timedOut.CompareAndSwap(false, true) {
		metrics.WriteTimeouts.Inc()
	}
	return n, err
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
