package views

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// QueueItemID is the stable element ID of a run's card in the approval
// queue: the page, the stream's deltas and its resets all use it.
func QueueItemID(runID uuid.UUID) string { return "queue-item-" + runID.String() }

// QueueStreamURL is the queue stream of the page p shows: it resumes after
// p's version and keeps p's place in the queue.
func QueueStreamURL(p *store.QueuePage) string {
	q := url.Values{"after": {strconv.FormatInt(p.Version, 10)}}
	if p.After.Version > 0 {
		q.Set("start", p.After.String())
	}
	return "/queue/events?" + q.Encode()
}

// QueueDecidedID is the element that says who decided a run that left the
// queue while it was shown.
func QueueDecidedID(runID uuid.UUID) string { return "queue-decided-" + runID.String() }

// QueueGone is a card that left the page of the queue, and the decision
// that took it off (nil when it left for another reason, such as a page
// boundary moving).
type QueueGone struct {
	Item     *store.QueueItem
	Decision *store.Event
	Viewer   int64 // the approver looking: their own decision reads "You"
}

// Said is who decided what about the card's run, with the reason given,
// in l, "" when no decision took it off or the viewer made it (their own
// answer already says so).
func (g QueueGone) Said(l Lang) string {
	if g.Decision == nil {
		return ""
	}
	d := store.DeciderOf(*g.Decision)
	if d != nil && d.UserID == g.Viewer {
		return ""
	}
	who := (&RunView{Viewer: Viewer{UserID: g.Viewer, Staff: true, Lang: l}}).Who(d, l.T("who.approver"))
	key := "queue.decided.approved"
	if g.Decision.Type == store.EventCancelRequested {
		key = "queue.decided.canceled"
	}
	reason := ""
	if d != nil {
		reason = ReasonSuffixIn(d.Reason, l)
	}
	s := l.T(key, map[string]any{"Who": who, "Amount": l.Money(g.Item.Amount, g.Item.Currency), "Item": g.Item.Item, "Reason": reason})
	r := []rune(s)
	return strings.ToUpper(string(r[0])) + string(r[1:])
}

// queuePageURL is the home page showing the queue after that place.
func queuePageURL(after store.QueuePlace) string {
	if after.Version <= 0 {
		return "/#approval-queue"
	}
	return "/?queue_after=" + after.String() + "#approval-queue"
}

// queueCount says how much of the queue the page shows, in l.
func queueCount(p *store.QueuePage, l Lang) string {
	n := len(p.Items)
	data := map[string]any{"Count": n, "Shown": n, "Total": p.Total, "From": p.Before + 1, "To": p.Before + n,
		"Order": queueOrderWords(p, l)}
	switch {
	case p.Total == 0:
		return l.T("queue.none")
	case n == 0:
		return l.N("queue.left", p.Total)
	case p.Before == 0 && n == p.Total:
		return l.N("queue.all", n, data)
	case p.Before == 0:
		return l.T("queue.showing", data)
	}
	return l.T("queue.showing_range", data)
}

// queueOrderWords says in which order the page lists its refunds: by
// deadline when any has one (store.QueuePlace), otherwise by age, which
// is then the same order.
func queueOrderWords(p *store.QueuePage, l Lang) string {
	for i := range p.Items {
		if p.Items[i].Deadline.Valid {
			return l.T("queue.order.due")
		}
	}
	return l.T("queue.order.age")
}

// dueSoonShare is how close to its deadline a decision is marked due soon:
// within a tenth of the time it was given.
const dueSoonShare = 10

// DueSoonMark is the mark of a card whose decision is due soon, in
// English ("queue.due_soon" in the viewer's language).
const DueSoonMark = "Due soon"

// dueSoonAt is when the item's decision becomes due soon; false when it
// has no deadline.
func dueSoonAt(it *store.QueueItem) (time.Time, bool) {
	if !it.Deadline.Valid {
		return time.Time{}, false
	}
	window := it.Deadline.Time.Sub(it.RequestedAt)
	return it.Deadline.Time.Add(-window / dueSoonShare), true
}

// queueDueSoon says whether the item's decision is due soon at now.
func queueDueSoon(it *store.QueueItem, now time.Time) bool {
	at, ok := dueSoonAt(it)
	return ok && !now.Before(at)
}

// queueSoonIn says in how many milliseconds after now the item's decision
// becomes due soon (data-soon-in), for static/live.js to mark it then
// without asking the server; nothing when it has no deadline or already is.
func queueSoonIn(it *store.QueueItem, now time.Time) templ.Attributes {
	at, ok := dueSoonAt(it)
	if !ok || !now.Before(at) {
		return nil
	}
	return templ.Attributes{"data-soon-in": strconv.FormatInt(at.Sub(now).Milliseconds(), 10)}
}

// nextAfter is where the page after p starts: after its last item.
func nextAfter(p *store.QueuePage) store.QueuePlace {
	if len(p.Items) == 0 {
		return p.After
	}
	return p.Items[len(p.Items)-1].Place()
}

// oobIf marks a component for an out-of-band swap when it is sent over the
// stream, and not when it is part of the page.
func oobIf(b bool) templ.Attributes {
	if b {
		return templ.Attributes{"hx-swap-oob": "true"}
	}
	return nil
}

// QueueRequestID is the stable element ID of a request's group of children
// in the approval queue.
func QueueRequestID(parentID uuid.UUID) string { return "queue-request-" + parentID.String() }

// QueueEntry is one entry of the queue's list, in the list's order: a run
// of its own (Parent is uuid.Nil, one item), or the children of one
// request that wait on this page, grouped under it.
type QueueEntry struct {
	Parent uuid.UUID
	Items  []*store.QueueItem
}

// first is the entry's first item: a request's customer, total and
// currency are read from any of its children.
func (e QueueEntry) first() *store.QueueItem { return e.Items[0] }

// waiting is the sum the entry's items ask for.
func (e QueueEntry) waiting() int64 {
	var n int64
	for _, it := range e.Items {
		n += it.Amount
	}
	return n
}

// requestTitle names a request in the queue, in l: its orders and its
// total.
func (e QueueEntry) requestTitle(l Lang) string {
	it := e.first()
	return l.T("queue.request_title", map[string]any{"Count": it.RequestChildren, "Amount": l.Money(it.RequestAmount, it.Currency)})
}

// requestWaiting says how many of the request's refunds wait here, in l.
func (e QueueEntry) requestWaiting(l Lang) string {
	it := e.first()
	return l.N("queue.request_waiting", len(e.Items), map[string]any{"Count": len(e.Items), "Total": it.RequestChildren,
		"Amount": l.Money(e.waiting(), it.Currency)})
}

// QueueEntries groups a page's items: each request's children under it,
// where its first child waiting on the page stands; runs of their own as
// they are.
func QueueEntries(p *store.QueuePage) []QueueEntry {
	var out []QueueEntry
	at := map[uuid.UUID]int{}
	for i := range p.Items {
		it := &p.Items[i]
		if !it.ParentRunID.Valid {
			out = append(out, QueueEntry{Items: []*store.QueueItem{it}})
			continue
		}
		if j, ok := at[it.ParentRunID.UUID]; ok {
			out[j].Items = append(out[j].Items, it)
			continue
		}
		at[it.ParentRunID.UUID] = len(out)
		out = append(out, QueueEntry{Parent: it.ParentRunID.UUID, Items: []*store.QueueItem{it}})
	}
	return out
}

// QueueChange is how a stream message takes the list from one page to the
// next, entry by entry: Appended entries join the list's end (runs of
// their own that joined, and requests new to the page); Redrawn requests
// are drawn again whole, in place (a child joined or left them); Dropped
// requests have no child left on the page. A run of its own that left is
// removed by its card, as before requests were grouped.
type QueueChange struct {
	Appended []QueueEntry
	Redrawn  []QueueEntry
	Dropped  []uuid.UUID
}

// NewQueueChange is the change from shown to next, where added are the
// items new to next.
func NewQueueChange(shown, next *store.QueuePage, added []*store.QueueItem) QueueChange {
	was := map[uuid.UUID]string{}
	for _, e := range QueueEntries(shown) {
		if e.Parent != uuid.Nil {
			was[e.Parent] = e.ids()
		}
	}
	isNew := map[uuid.UUID]bool{}
	for _, it := range added {
		isNew[it.ID] = true
	}
	var c QueueChange
	for _, e := range QueueEntries(next) {
		ids, existed := was[e.Parent]
		delete(was, e.Parent)
		switch {
		case e.Parent == uuid.Nil && isNew[e.first().ID], e.Parent != uuid.Nil && !existed:
			c.Appended = append(c.Appended, e)
		case e.Parent != uuid.Nil && ids != e.ids():
			c.Redrawn = append(c.Redrawn, e)
		}
	}
	for parent := range was {
		c.Dropped = append(c.Dropped, parent)
	}
	return c
}

// ids lists the entry's item IDs, to tell whether it changed.
func (e QueueEntry) ids() string {
	var b strings.Builder
	for _, it := range e.Items {
		b.WriteString(it.ID.String())
	}
	return b.String()
}
