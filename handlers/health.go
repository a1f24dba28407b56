package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/store"
)

// readyTimeout bounds /readyz: a probe that waits longer than its prober
// has already failed.
const readyTimeout = 2 * time.Second

// readyFresh is how long one readiness check answers every probe: a flood
// of probes (a load balancer's, during a reconnect wave) costs at most one
// check a second, and a database that went away is seen within a second.
const readyFresh = time.Second

// healthz says the process is up; it touches nothing else, the database
// least of all.
func (h *Handler) healthz(c echo.Context) error {
	return c.String(http.StatusOK, "ok")
}

// readyz says whether this instance can serve: the database answers and
// every migration is applied.
func (h *Handler) readyz(c echo.Context) error {
	if err := h.ready.check(c.Request().Context(), h.store, h.log); err != nil {
		return c.String(http.StatusServiceUnavailable, "not ready")
	}
	return c.String(http.StatusOK, "ok")
}

// readiness is the last readiness check's result, shared by every probe.
// At most one check runs at a time; probes that arrive meanwhile wait for
// it instead of starting their own.
type readiness struct {
	mu      sync.Mutex
	err     error
	at      time.Time     // when the last check ended; zero before the first
	running chan struct{} // closed when the check in flight ends; nil if none
}

// check answers from the last check if it ended within readyFresh, else
// from a new one (or the one already in flight). It returns within
// readyTimeout even when the database stalls: lib/pq returns from a query
// only once the server answers (its cancel request included), so the check
// runs aside and is not waited for past the deadline; it ends when the
// database lets go. A probe whose own request ends first stops waiting.
// A failed check is logged once, not once per probe.
func (r *readiness) check(ctx context.Context, st *store.Store, logger *slog.Logger) error {
	r.mu.Lock()
	if r.running == nil && !r.at.IsZero() && time.Since(r.at) < readyFresh {
		err := r.err
		r.mu.Unlock()
		return err
	}
	if r.running == nil {
		r.running = make(chan struct{})
		go r.run(st, logger)
	}
	done := r.running
	r.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("readiness check: %w", context.Cause(ctx))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// run checks the store once, for every probe waiting, and records the
// result.
func (r *readiness) run(st *store.Store, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	checked := make(chan error, 1)
	go func() { checked <- st.Ready(ctx) }()
	var err error
	select {
	case err = <-checked:
	case <-ctx.Done():
		err = fmt.Errorf("readiness check: no answer within %s: %w", readyTimeout, context.Cause(ctx))
	}
	if err != nil {
		logger.Warn("not ready", "err", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err, r.at = err, time.Now()
	close(r.running)
	r.running = nil
}

// metrics serves the process's Prometheus metrics to a scraper on the same
// host only: they are counts, but counts of one company's refunds. Behind
// a proxy the peer is the proxy, so scrape each instance directly.
func (h *Handler) metrics(c echo.Context) error {
	if !fromLoopback(c) {
		return c.String(http.StatusForbidden, "metrics are served to this host only\n")
	}
	metrics.Handler().ServeHTTP(c.Response(), c.Request())
	return nil
}

// profile serves Go's profiles (/debug/pprof/...) to this host only, like
// the metrics: a heap profile names what the process holds.
func (h *Handler) profile(c echo.Context) error {
	if !fromLoopback(c) {
		return c.String(http.StatusForbidden, "profiles are served to this host only\n")
	}
	switch name := c.Param("*"); name {
	case "", "/":
		pprof.Index(c.Response(), c.Request())
	case "profile":
		pprof.Profile(c.Response(), c.Request())
	case "trace":
		pprof.Trace(c.Response(), c.Request())
	default:
		pprof.Handler(name).ServeHTTP(c.Response(), c.Request())
	}
	return nil
}

func fromLoopback(c echo.Context) bool {
	ip := net.ParseIP(c.RealIP())
	return ip != nil && ip.IsLoopback()
}
