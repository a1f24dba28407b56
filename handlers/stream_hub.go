package handlers

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/refundd/refundd/store"
)

// StreamConfig tunes the live streams. Zero values take the defaults.
type StreamConfig struct {
	Heartbeat time.Duration // a comment when nothing was sent for this long; default 15s
	Recheck   time.Duration // access is re-checked at least this often; default 30s
	Poll      time.Duration // store reads without a Listener; default 1s
	Retry     time.Duration // the SSE retry hint for browsers; default 2s
	PageSize  int           // events per store read; default 500
	// Buffer and BufferBytes bound what one subscriber may have queued
	// (events, payload bytes). A full buffer coalesces narration; one that
	// stays full for SlowAfter closes the connection, and the client
	// replays from the store when it reconnects.
	Buffer      int           // default 512
	BufferBytes int           // default 1 MiB
	SlowAfter   time.Duration // also the deadline of each write; default 10s
}

func (c *StreamConfig) fill() {
	c.Heartbeat = cmp.Or(c.Heartbeat, 15*time.Second)
	c.Recheck = cmp.Or(c.Recheck, 30*time.Second)
	c.Poll = cmp.Or(c.Poll, time.Second)
	c.Retry = cmp.Or(c.Retry, 2*time.Second)
	c.PageSize = cmp.Or(c.PageSize, 500)
	c.Buffer = cmp.Or(c.Buffer, 512)
	c.BufferBytes = cmp.Or(c.BufferBytes, 1<<20)
	c.SlowAfter = cmp.Or(c.SlowAfter, 10*time.Second)
}

// Causes a stream ends with.
var (
	errShuttingDown = errors.New("handlers: server shutting down")
	errSlowReader   = errors.New("handlers: stream subscriber too slow")
)

// streamHub owns the open streams' lifetime: Close ends them all at once
// (graceful shutdown registers it) and refuses new ones.
type streamHub struct {
	cfg  *StreamConfig
	ctx  context.Context
	stop context.CancelCauseFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func newStreamHub(cfg *StreamConfig) *streamHub {
	cfg.fill()
	ctx, stop := context.WithCancelCause(context.Background())
	return &streamHub{cfg: cfg, ctx: ctx, stop: stop}
}

// begin registers a stream; false once the hub is closed.
func (hub *streamHub) begin() bool {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	if hub.closed {
		return false
	}
	hub.wg.Add(1)
	return true
}

func (hub *streamHub) end() { hub.wg.Done() }

// Close ends every open stream now and waits until their handlers have
// returned. Safe to call twice.
func (hub *streamHub) Close() {
	hub.mu.Lock()
	hub.closed = true
	hub.mu.Unlock()
	hub.stop(errShuttingDown)
	hub.wg.Wait()
}

// streamCursor is where a stream resumes. Last-Event-ID wins over ?after=:
// a browser's own reconnect goes to the original URL, whose after= is
// stale by then. ok is false for a malformed cursor.
func streamCursor(r *http.Request) (cursor int64, ok bool) {
	raw := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if raw == "" {
		raw = strings.TrimSpace(r.URL.Query().Get("after"))
	}
	if raw == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// subscribe wakes the stream when the run's log grows (run) or the user's
// grants change (user). Without a listener the channels never fire and the
// stream polls.
func (h *Handler) subscribe(runID string, userID int64) (run, user <-chan struct{}, unsubscribe func()) {
	l := h.cfg.Listener
	if l == nil {
		return nil, nil, func() {}
	}
	run, unRun := l.Subscribe(store.RunTopic(runID))
	user, unUser := l.Subscribe(store.UserTopic(strconv.FormatInt(userID, 10)))
	return run, user, func() { unRun(); unUser() }
}

// outbox is one subscriber's bounded queue between the store reader and the
// connection writer. Pushing never blocks the runtime: the reader reads
// from the store, so waiting here only delays this subscriber.
type outbox struct {
	max, maxBytes int
	slow          time.Duration

	mu      sync.Mutex
	items   []item
	bytes   int
	ready   chan struct{} // something to write
	drained chan struct{} // the writer took what was queued
}

func newOutbox(cfg *StreamConfig) *outbox {
	return &outbox{max: cfg.Buffer, maxBytes: cfg.BufferBytes, slow: cfg.SlowAfter,
		ready: make(chan struct{}, 1), drained: make(chan struct{}, 1)}
}

type itemKind int

const (
	itemEvent itemKind = iota
	itemReset
	itemClose
)

// item is one thing for the writer to send.
type item struct {
	kind   itemKind
	ev     store.Event
	snap   *store.Snapshot // reset
	access Access          // reset
	banner bool            // reset: "the run continued while you were offline"
	reason closeReason     // close
}

func (it item) size() int { return len(it.ev.Payload) + 64 }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// push queues it. A full queue first coalesces narration; if that does not
// make room before slow has passed, push fails with errSlowReader.
func (o *outbox) push(ctx context.Context, it item) error {
	var timer *time.Timer
	for {
		o.mu.Lock()
		if o.fits(it) {
			o.items = append(o.items, it)
			o.bytes += it.size()
			o.mu.Unlock()
			signal(o.ready)
			return nil
		}
		merged := o.coalesce(it)
		o.mu.Unlock()
		if merged {
			signal(o.ready)
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(o.slow)
			defer timer.Stop()
		}
		select {
		case <-o.drained:
		case <-timer.C:
			return errSlowReader
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (o *outbox) fits(it item) bool {
	return len(o.items) == 0 || (len(o.items) < o.max && o.bytes+it.size() <= o.maxBytes)
}

// coalesce makes room in a full queue by merging runs of narration deltas
// into one delta each, then tries to merge it into the tail. It reports
// whether it was taken.
func (o *outbox) coalesce(it item) bool {
	out := o.items[:0]
	for _, x := range o.items {
		if n := len(out); n > 0 && isNarration(out[n-1]) && isNarration(x) {
			out[n-1] = mergeNarration(out[n-1], x)
			continue
		}
		out = append(out, x)
	}
	clear(o.items[len(out):])
	o.items = out
	if n := len(o.items); isNarration(it) && n > 0 && isNarration(o.items[n-1]) && o.bytes+it.size() <= o.maxBytes {
		o.items[n-1] = mergeNarration(o.items[n-1], it)
		o.bytes += it.size()
		return true
	}
	if o.fits(it) {
		o.items = append(o.items, it)
		o.bytes += it.size()
		return true
	}
	return false
}

func isNarration(it item) bool {
	return it.kind == itemEvent && it.ev.Type == store.EventNarrationDelta
}

// take hands everything queued to the writer.
func (o *outbox) take() []item {
	o.mu.Lock()
	items := o.items
	o.items, o.bytes = nil, 0
	o.mu.Unlock()
	signal(o.drained)
	return items
}
