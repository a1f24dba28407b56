package handlers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/views"
)

// refuseBusy answers a stream refused at a cap (or during shutdown) in a
// way each client backs off on. A page's stream gets a 200 event stream
// that says, as the SSE retry hint, when to come back, and names the
// reason in a "busy" event the page shows; then it ends, and the browser's
// own EventSource reconnects after the hint (htmx-ext-sse re-creates the
// EventSource only after an error status, so a 4xx or 5xx would have it
// retry from half a second on). A program gets 429 (or 503) JSON with
// Retry-After.
func (h *Handler) refuseBusy(c echo.Context, f streamFormat, refused stream.Refused) error {
	cfg := h.engine.Config()
	wait := cfg.Busy
	status, code := http.StatusTooManyRequests, "too_many_streams"
	l := viewerLang(c)
	var msg string
	switch refused {
	case stream.RefusedUserCap:
		msg = l.T("refuse.busy_user", map[string]any{"Max": cfg.MaxPerUser, "Wait": seconds(l, wait)})
	case stream.RefusedProcessCap:
		msg = l.T("refuse.busy_process", map[string]any{"Wait": seconds(l, wait)})
	default:
		wait = cfg.RetryHint()
		status, code = http.StatusServiceUnavailable, codeUnavailable
		msg = l.T("refuse.busy_restarting")
	}
	if !f.answersDenialInStream() {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(max(wait.Seconds(), 1))))
		return c.JSON(status, apiError{Error: apiErrorBody{Code: code, Message: msg}})
	}
	data, err := renderBytes(c.Request().Context(), views.StreamBusy(msg, wait.Milliseconds()))
	if err != nil {
		return err
	}
	return h.engine.Answer(c, wait, "busy", data)
}

// seconds says a wait in l's words: "30 seconds".
func seconds(l views.Lang, d time.Duration) string {
	return l.T("refuse.seconds", map[string]any{"Count": int(max(d.Seconds(), 1))})
}
