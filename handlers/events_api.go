package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
)

// apiEventsPage is GET /api/runs/{id}/events: up to limit events with
// seq > after, in order. next is the cursor to ask with next time.
type apiEventsPage struct {
	RunID  uuid.UUID     `json:"run_id"`
	After  int64         `json:"after"`
	Next   int64         `json:"next"`
	More   bool          `json:"more"`
	Events []store.Event `json:"events"`
}

// goneBody is the 410 answer to a cursor whose events are gone (or never
// existed): the snapshot to start again from, with the error beside it.
func goneBody(e apiErrorBody, snapshot any) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	b, err := json.Marshal(snapshot)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err == nil {
		out["error"], err = json.Marshal(e)
	}
	if err != nil {
		return nil, fmt.Errorf("handlers: gone body: %w", err)
	}
	return out, nil
}

// apiListEvents is GET /api/runs/{id}/events?after=N&limit=M: a page of
// events, or 410 with a fresh snapshot when the cursor is expired, from
// the future or malformed. Status-only viewers see no history: 403.
func (h *Handler) apiListEvents(c echo.Context) error {
	run, access, err := h.loadRun(c)
	if err != nil {
		return err
	}
	if access != AccessFull {
		return store.Refuse(store.CodeForbidden, "refuse.events_status_only", nil)
	}
	ctx := c.Request().Context()
	limit := store.MaxPage / 2
	if raw := c.QueryParam("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n <= 0 {
			return apiBadRequest(c, "invalid_limit", "api.invalid_limit")
		}
		limit = min(n, store.MaxPage)
	}
	after, err := store.ParseCursor(c.QueryParam("after"))
	if err != nil {
		// Not a cursor at all is the caller's mistake (400); a cursor this
		// log cannot serve, expired or from the future, is 410 below.
		return apiRefuse(c, store.CodeCursorInvalid, err)
	}
	evs, err := h.store.EventsAfter(ctx, run.ID, after, limit+1)
	switch code := store.ErrorCode(err); {
	case code == store.CodeCursorExpired || code == store.CodeCursorInvalid:
		snap, serr := h.store.SnapshotState(ctx, run.ID)
		if serr != nil {
			return serr
		}
		p := problemIn(err, viewerLang(c))
		body, err := goneBody(apiErrorBody{Code: p.code, Message: p.message}, newAPISnapshot(snap, access, viewerLang(c)))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusGone, body)
	case err != nil:
		return err
	}
	page := apiEventsPage{RunID: run.ID, After: after, Next: after, Events: evs}
	if len(evs) > limit {
		page.Events, page.More = evs[:limit], true
	}
	if n := len(page.Events); n > 0 {
		page.Next = page.Events[n-1].Seq
	}
	if page.Events == nil {
		page.Events = []store.Event{}
	}
	return c.JSON(http.StatusOK, page)
}
