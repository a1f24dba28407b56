package handlers

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/internal/metrics"
)

// readyTimeout bounds /readyz: a probe that waits longer than its prober
// has already failed.
const readyTimeout = 2 * time.Second

// healthz says the process is up; it touches nothing else.
func (h *Handler) healthz(c echo.Context) error {
	return c.String(http.StatusOK, "ok")
}

// readyz says whether this instance can serve: the database answers and
// every migration is applied. It answers within readyTimeout even when the
// database stalls: lib/pq returns from a query only once the server answers
// (its cancel request included), so the check runs aside and is not waited
// for past the deadline; it ends when the database lets go.
func (h *Handler) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
	defer cancel()
	checked := make(chan error, 1)
	go func() { checked <- h.store.Ready(ctx) }()
	var err error
	select {
	case err = <-checked:
	case <-ctx.Done():
		err = fmt.Errorf("readiness check: no answer within %s: %w", readyTimeout, context.Cause(ctx))
	}
	if err != nil {
		h.log.WarnContext(ctx, "not ready", "err", err)
		return c.String(http.StatusServiceUnavailable, "not ready")
	}
	return c.String(http.StatusOK, "ok")
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
