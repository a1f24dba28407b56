package handlers

import (
	"context"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// queuePageSize is how many runs one page of the approval queue shows.
const queuePageSize = 50

// queueStart reads where the page of the queue starts (the queue_after
// or start parameter: a place in the queue, empty for the first page).
func queueStart(raw string) (store.QueuePlace, error) {
	after, err := store.ParseQueuePlace(raw)
	if err == nil {
		return after, nil
	}
	// A number past int64 is a 400, as every out-of-range integer is.
	if rerr := outOfRange("queue_after", err); rerr != nil {
		return after, rerr
	}
	return after, store.Refuse(store.CodeInvalid, "refuse.queue_page", nil)
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
	keyQueueSignedOut = "refuse.queue_signed_out" // catalogue keys
	keyQueueDenied    = "refuse.queue_denied"
)

// streamQueue is GET /queue/events: the approval queue, live, as a state
// stream of the engine (handlers/stream): its version is the cursor
// (Last-Event-ID, or ?after= for a re-created EventSource); ?start= keeps
// the page's place in the queue. Each change is the cards that left, the
// cards that joined, the count and the pager. Access is checked on every
// request and re-checked when the user's grants change and every Recheck;
// a viewer who is no longer an approver gets event: close.
func (h *Handler) streamQueue(c echo.Context) error {
	g := roleGate{h: h, cred: h.streamCredential(c, uuid.Nil), role: store.RoleApprover,
		signedOut: keyQueueSignedOut, denied: keyQueueDenied}
	if refused, err := g.refuse(c, currentUser(c)); refused {
		return err
	}
	start, err := queueStart(c.QueryParam("start"))
	if err != nil {
		return g.answer(c, langOf(c).Refusal(err))
	}
	sc := h.engine.NewConn(c, currentUser(c).ID)
	defer sc.End()
	if refused := sc.AddState("approval queue", g.cred, cursorParam(c), &queueView{roleGate: g, start: start, viewer: currentUser(c).ID, lang: langOf(c)}); refused != "" {
		return h.refuseBusy(c, htmlStream{}, refused)
	}
	return sc.Serve()
}

// queueView is the approval queue as one approver's stream shows it
// (stream.StateView).
type queueView struct {
	roleGate
	start  store.QueuePlace
	viewer int64      // the approver looking: their own decisions read "you"
	lang   views.Lang // the page's, fixed when the stream opens
}

// Closing is the gate's, in the page's language.
func (q *queueView) Closing(ctx context.Context, r stream.Reason) ([]byte, error) {
	return q.roleGate.Closing(views.WithLang(ctx, q.lang), r)
}

// queueState is a page of the queue as a stream's state.
type queueState struct{ page *store.QueuePage }

func (s queueState) Version() int64   { return s.page.Version }
func (s queueState) Topics() []string { return []string{store.Queue} }

func (q *queueView) Read(ctx context.Context) (stream.State, error) {
	page, err := q.h.store.ApprovalQueue(ctx, q.start, queuePageSize)
	if err != nil {
		return nil, err
	}
	return queueState{page}, nil
}

func (q *queueView) Render(ctx context.Context, shown, next stream.State) (string, []byte, error) {
	ctx = views.WithLang(ctx, q.lang)
	to := next.(queueState).page
	if shown != nil {
		if removed, added, ok := queueDiff(shown.(queueState).page, to); ok {
			gone, err := q.gone(ctx, removed)
			if err != nil {
				return "", nil, err
			}
			change := views.NewQueueChange(shown.(queueState).page, to, added)
			data, err := renderBytes(ctx, views.QueueDelta(to, gone, change))
			return "", data, err
		}
	}
	data, err := renderBytes(ctx, views.QueueBody(to, true))
	return "reset", data, err
}

// gone says, of each card that left the page, who decided its run, so an
// approver who was looking at it reads what happened instead of seeing it
// vanish.
func (q *queueView) gone(ctx context.Context, removed []*store.QueueItem) ([]views.QueueGone, error) {
	if len(removed) == 0 {
		return nil, nil
	}
	ids := make([]uuid.UUID, len(removed))
	for i, it := range removed {
		ids[i] = it.ID
	}
	decided, err := q.h.store.LastDecisions(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]views.QueueGone, len(removed))
	for i, it := range removed {
		out[i] = views.QueueGone{Item: it, Viewer: q.viewer}
		if ev, ok := decided[it.ID]; ok {
			out[i].Decision = &ev
		}
	}
	return out, nil
}

// queueDiff is what changed between two versions of a page: the cards to
// remove and the cards to append. ok is false when appending cannot give
// the new page's order; the page is then sent whole.
func queueDiff(shown, next *store.QueuePage) (removed, added []*store.QueueItem, ok bool) {
	was := make(map[string]bool, len(shown.Items))
	for _, it := range shown.Items {
		was[it.ID.String()] = true
	}
	is := make(map[string]bool, len(next.Items))
	var last store.QueuePlace // the last card kept
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
		last = it.Place()
	}
	for i := range shown.Items {
		if it := &shown.Items[i]; !is[it.ID.String()] {
			removed = append(removed, it)
		}
	}
	return removed, added, len(added) == 0 || last.Before(added[0].Place())
}
