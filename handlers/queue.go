package handlers

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// queuePageSize is how many runs one page of the approval queue shows.
const queuePageSize = 50

// queueReadGap is the least time between two reads of one stream's page: a
// flood of requests and decisions costs each open queue at most a few
// reads a second, and a change still shows within a second.
const queueReadGap = 200 * time.Millisecond

// queueStart reads where the page of the queue starts (the queue_after
// or start parameter: a queue version, 0 for the first page).
func queueStart(raw string) (int64, error) {
	after, err := store.ParseCursor(raw)
	if err != nil {
		return 0, store.Errorf(store.CodeInvalid, "That is not a page of the approval queue. Open the first page from the home page.")
	}
	return after, nil
}

// approvalQueue is the page of the queue the home page shows an approver.
func (h *Handler) approvalQueue(c echo.Context) (*store.QueuePage, error) {
	after, err := queueStart(c.QueryParam("queue_after"))
	if err != nil {
		return nil, err
	}
	return h.store.ApprovalQueue(c.Request().Context(), after, queuePageSize)
}

// Why a queue stream ends for good, in the words its page shows.
const (
	msgQueueSignedOut = "Your session has ended. Log in again to follow the queue."
	msgQueueDenied    = "The approval queue is not available to you: it is for approvers."
)

// streamQueue is GET /queue/events: the approval queue, live. The cursor
// (Last-Event-ID, or ?after= for a re-created EventSource) is the queue
// version the page shows; ?start= keeps the page's place in the queue.
//
//   - A cursor equal to the current version resumes: nothing is sent until
//     the queue changes.
//   - Any other cursor (older, from the future, malformed) gets event: reset
//     with the page as it is now; the queue is a state, not a history, so
//     what changed meanwhile is shown, not replayed.
//   - Each change (woken by NOTIFY on the queue, or a poll without a
//     listener) is one message with the new version as its id: the cards
//     that left, the cards that joined, the count and the pager.
//
// Access is checked on every request and re-checked when the user's grants
// change and every Recheck; a viewer who is no longer an approver gets
// event: close.
func (h *Handler) streamQueue(c echo.Context) error {
	w, err := openStream(c, &h.cfg.Stream)
	if err != nil {
		return err
	}
	u := currentUser(c)
	switch {
	case u == nil:
		return queueClose(c, w, msgQueueSignedOut)
	case u.Role != store.RoleApprover:
		return queueClose(c, w, msgQueueDenied)
	}
	if refused := h.streams.hold(u.ID); refused != "" {
		// At a cap: no close (that would stop the page for good), only the
		// time to come back after; the queue shown stays as it is.
		w.retry(h.cfg.Stream.Busy)
		w.comment("busy: " + refused)
		return w.flush()
	}
	defer h.streams.release(u.ID)
	start, err := queueStart(c.QueryParam("start"))
	if err != nil {
		return queueClose(c, w, err.Error())
	}
	ctx, cancel := context.WithCancelCause(c.Request().Context())
	defer cancel(nil)
	defer h.streams.endOnShutdown(cancel)()

	// Subscribe before the first read: a change that commits after it
	// wakes us for the next one.
	queueWake, userWake, unsubscribe := h.subscribeQueue(u.ID)
	defer unsubscribe()
	page, err := h.store.ApprovalQueue(ctx, start, queuePageSize)
	if err != nil {
		return err
	}
	q := &queueStream{h: h, c: c, w: w, start: start, shown: page}
	if cursor, err := store.ParseCursor(cursorParam(c.Request())); err != nil || cursor != page.Version {
		if err := q.send(ctx, "reset", page.Version, views.QueueBody(page, true)); err != nil {
			return nil
		}
	}
	err = q.follow(ctx, queueWake, userWake)
	if err != nil && !errors.Is(err, errShuttingDown) && c.Request().Context().Err() == nil {
		h.log.Info("queue stream ended", "err", err)
	}
	return nil
}

// subscribeQueue wakes the queue stream when the queue changes or the
// user's grants do. Without a listener the channels never fire and the
// stream polls.
func (h *Handler) subscribeQueue(userID int64) (queue, user <-chan struct{}, unsubscribe func()) {
	l := h.cfg.Listener
	if l == nil {
		return nil, nil, func() {}
	}
	queue, unQueue := l.Subscribe(store.Queue)
	user, unUser := l.Subscribe(store.UserTopic(strconv.FormatInt(userID, 10)))
	return queue, user, func() { unQueue(); unUser() }
}

// queueStream is one open queue stream: what its page shows now.
type queueStream struct {
	h     *Handler
	c     echo.Context
	w     *sseWriter
	start int64
	shown *store.QueuePage
	// lastRead is when the page was last read, to space reads out.
	lastRead time.Time
}

// follow sends each new version of the page until the client leaves, the
// server stops, or the viewer may no longer see the queue.
func (q *queueStream) follow(ctx context.Context, queueWake, userWake <-chan struct{}) error {
	cfg := &q.h.cfg.Stream
	hb := time.NewTicker(cfg.Heartbeat)
	defer hb.Stop()
	recheck := time.NewTicker(cfg.Recheck)
	defer recheck.Stop()
	var poll <-chan time.Time
	if q.h.cfg.Listener == nil {
		t := time.NewTicker(cfg.Poll)
		defer t.Stop()
		poll = t.C
	}
	for {
		var err error
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-hb.C:
			q.w.comment("ping")
			err = q.w.flush()
		case <-queueWake:
			err = q.update(ctx)
		case <-poll:
			err = q.update(ctx)
		case <-userWake:
			err = q.recheck(ctx)
		case <-recheck.C:
			err = q.recheck(ctx)
		}
		if err != nil {
			return err
		}
	}
}

// update reads the page again and, if the queue changed, sends the change.
// Wake-ups that arrive within queueReadGap of the last read coalesce into
// the next one (the listener's channel holds one).
func (q *queueStream) update(ctx context.Context) error {
	if wait := time.Until(q.lastRead.Add(queueReadGap)); wait > 0 {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(wait):
		}
	}
	q.lastRead = time.Now()
	next, err := q.h.store.ApprovalQueue(ctx, q.start, queuePageSize)
	if err != nil || next.Version == q.shown.Version {
		return err
	}
	removed, added, ok := queueDiff(q.shown, next)
	var c templ.Component = views.QueueDelta(next, removed, added)
	event := ""
	if !ok {
		c, event = views.QueueBody(next, true), "reset"
	}
	q.shown = next
	return q.send(ctx, event, next.Version, c)
}

// queueDiff is what changed between two versions of a page: the cards to
// remove and the cards to append. ok is false when appending cannot give
// the new page's order; the page is then sent whole.
func queueDiff(shown, next *store.QueuePage) (removed []string, added []*store.QueueItem, ok bool) {
	was := make(map[string]bool, len(shown.Items))
	for _, it := range shown.Items {
		was[it.ID.String()] = true
	}
	is := make(map[string]bool, len(next.Items))
	var last int64 // the last card kept
	for i := range next.Items {
		it := &next.Items[i]
		is[it.ID.String()] = true
		if !was[it.ID.String()] {
			added = append(added, it)
			continue
		}
		if len(added) > 0 {
			return nil, nil, false // a new card before a kept one
		}
		last = it.Version
	}
	for _, it := range shown.Items {
		if !is[it.ID.String()] {
			removed = append(removed, views.QueueItemID(it.ID))
		}
	}
	return removed, added, len(added) == 0 || added[0].Version > last
}

// recheck reloads the user through the stream's credential; one who signed
// out or is no longer an approver gets the close event.
func (q *queueStream) recheck(ctx context.Context) error {
	u, err := q.h.reloadUser(q.c)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return q.close(ctx, msgQueueSignedOut)
	case err != nil:
		return err
	case u.Role != store.RoleApprover || u.Disabled():
		return q.close(ctx, msgQueueDenied)
	}
	return nil
}

func (q *queueStream) close(ctx context.Context, msg string) error {
	if err := q.send(ctx, "close", -1, views.QueueClose(msg)); err != nil {
		return err
	}
	return errQueueClosed
}

// errQueueClosed ends a stream that sent its close event.
var errQueueClosed = errors.New("handlers: queue stream closed")

func (q *queueStream) send(ctx context.Context, event string, id int64, c templ.Component) error {
	var buf bytes.Buffer
	if err := c.Render(ctx, &buf); err != nil {
		return err
	}
	q.w.message(event, id, buf.Bytes())
	return q.w.flush()
}

// queueClose answers a stream that may not follow the queue with the close
// event, so the browser stops asking.
func queueClose(c echo.Context, w *sseWriter, msg string) error {
	var buf bytes.Buffer
	if err := views.QueueClose(msg).Render(c.Request().Context(), &buf); err != nil {
		return err
	}
	w.message("close", -1, buf.Bytes())
	return w.flush()
}
