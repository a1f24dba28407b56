package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// healthz says the process is up; it touches nothing else.
func (h *Handler) healthz(c echo.Context) error {
	return c.String(http.StatusOK, "ok")
}

// readyz says whether this instance can serve: the database answers and
// every migration is applied.
func (h *Handler) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := h.store.Ready(ctx); err != nil {
		h.log.WarnContext(ctx, "not ready", "err", err)
		return c.String(http.StatusServiceUnavailable, "not ready")
	}
	return c.String(http.StatusOK, "ok")
}
