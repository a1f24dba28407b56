package handlers

import (
	"log/slog"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// logRequests writes one structured line per request, after the error (if
// any) has been turned into a response, so the logged status is the sent one.
func (h *Handler) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		h.logRequest(c, start)
		return nil
	}
}

// logRequest is logRequests' line. It is a function of its own so that
// its frame is not on the stack while the handler runs: a stream's open
// is deep, and a goroutine's stack (2 KB at first) is copied whole each
// time it outgrows its size.
func (h *Handler) logRequest(c echo.Context, start time.Time) {
	req, res := c.Request(), c.Response()
	level := slog.LevelInfo
	switch {
	case res.Status >= 500:
		level = slog.LevelError
	case req.URL.Path == "/healthz" || req.URL.Path == "/readyz" || len(req.URL.Path) > 8 && req.URL.Path[:8] == "/static/":
		// Probes and assets would drown the log.
		level = slog.LevelDebug
	case res.Status == 200 && strings.HasPrefix(res.Header().Get(echo.HeaderContentType), "text/event-stream"):
		// A stream that opened: a restart's reconnecting clients
		// open thousands at once, and this line is written when the
		// stream is handed over, not when it ends. The engine logs
		// streams that end abnormally; /metrics counts the open ones.
		level = slog.LevelDebug
	}
	if !h.log.Enabled(req.Context(), level) {
		// Most lines of a busy server are streams that opened: their
		// attributes are not built to be thrown away.
		return
	}
	attrs := []any{
		"method", req.Method,
		"path", req.URL.Path,
		"status", res.Status,
		"bytes", res.Size,
		"duration", time.Since(start),
	}
	if u := currentUser(c); u != nil {
		attrs = append(attrs, "user_id", u.ID)
	}
	h.log.Log(req.Context(), level, "http", attrs...)
}
