package stream

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/store"
)

// tails is the process's fan-out of run logs to its streams: one tail per
// run that has watchers here. A wake-up (a notification, a poll) makes the
// tail read the run's log ONCE from its head and hand the page to every
// Sub's outbox, so a run's store reads do not grow with its
// watchers. Wake-ups that arrive while a read is in flight coalesce into
// one more read.
//
// A tail holds no goroutine while idle: the listener calls wake, and a
// read runs on a goroutine that exits when the tail has caught up.
//
// What a Sub is sent is still ordered by seq and deduplicated by
// the Sub itself (log.go): it joins the tail before it reads
// what it is behind on from the store, so the tail's pages and its own
// reads overlap and nothing falls between them.
type tails struct {
	ctx      context.Context // ends the tails' reads at shutdown
	store    *store.Store
	listener *store.Listener // nil: every tail polls
	page     int
	poll     time.Duration
	log      *slog.Logger

	mu   sync.Mutex
	runs map[uuid.UUID]*tail
}

func newTails(ctx context.Context, st *store.Store, l *store.Listener, cfg *Config, log *slog.Logger) *tails {
	return &tails{ctx: ctx, store: st, listener: l, page: cfg.PageSize, poll: cfg.Poll, log: log,
		runs: map[uuid.UUID]*tail{}}
}

// tail is one run's shared reader.
type tail struct {
	ts    *tails
	runID uuid.UUID
	stop  func() // ends the wake-ups

	mu      sync.Mutex
	head    int64 // the last seq read
	subs    map[*Sub]struct{}
	reading bool  // a read goroutine is running
	again   bool  // woken during that read for anything new: read once more
	wanted  int64 // the highest seq a wake-up named: read again unless head reached it
	closed  bool
	poller  *time.Timer // without a listener
}

// join adds sub to runID's tail, making the tail if it is the run's first
// watcher here; head is where a new tail starts reading (the run's last
// seq as the Sub loaded it). from is the last seq the tail had
// handed over when sub joined: it hands sub everything after it. leave
// undoes the join.
//
// A new tail reads once at once: a notification sent between the
// Sub's read of the run and the tail's subscription would be lost.
func (ts *tails) join(runID uuid.UUID, head int64, sub *Sub) (leave func(), from int64) {
	ts.mu.Lock()
	t := ts.runs[runID]
	created := t == nil
	if created {
		t = &tail{ts: ts, runID: runID, head: head, subs: map[*Sub]struct{}{}}
		ts.runs[runID] = t
		if ts.listener != nil {
			t.stop = ts.listener.SubscribeFunc(store.RunTopic(runID.String()), t.wake)
		} else {
			t.poller = time.AfterFunc(ts.poll, t.wakeUnknown)
			t.stop = func() { t.poller.Stop() }
		}
	}
	t.mu.Lock()
	t.subs[sub] = struct{}{}
	from = t.head
	t.mu.Unlock()
	ts.mu.Unlock()
	if created {
		t.wake(store.SeqUnknown)
	}
	return func() { ts.leave(t, sub) }, from
}

func (ts *tails) leave(t *tail, sub *Sub) {
	ts.mu.Lock()
	t.mu.Lock()
	delete(t.subs, sub)
	last := len(t.subs) == 0
	if last {
		t.closed = true
		delete(ts.runs, t.runID)
	}
	t.mu.Unlock()
	ts.mu.Unlock()
	if last {
		// Outside the locks: the listener calls wake with its own lock held.
		t.stop()
	}
}

// wake is called by the listener (or the poll timer) when the run's log
// may have grown, up to seq (store.SeqUnknown: anything may be new). It
// never blocks. A seq the tail has read already costs no read: the
// NOTIFY of a commit this process woke its tails for at once
// (store.WakeLocal), or one a read caught before its notice came.
func (t *tail) wake(seq int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq != store.SeqUnknown && seq <= t.head {
		return
	}
	metrics.StreamWakeups.Inc()
	switch {
	case t.closed:
	case t.reading && seq == store.SeqUnknown:
		t.again = true
	case t.reading:
		t.wanted = max(t.wanted, seq)
	default:
		t.reading = true
		go t.read()
	}
}

func (t *tail) wakeUnknown() { t.wake(store.SeqUnknown) }

// read reads the log from the head and fans each page out until it has
// caught up and nobody woke it meanwhile.
func (t *tail) read() {
	for {
		t.mu.Lock()
		head := t.head
		// This read answers every wake-up so far.
		t.again, t.wanted = false, 0
		t.mu.Unlock()

		evs, err := t.ts.store.EventsAfter(t.ts.ctx, t.runID, head, t.ts.page)
		metrics.StreamReads.Inc()
		more := t.fanOut(evs, err)

		t.mu.Lock()
		if t.closed || t.ts.ctx.Err() != nil || (!more && !t.again && t.wanted <= t.head) {
			t.reading = false
			if t.poller != nil && !t.closed {
				t.poller.Reset(t.ts.poll)
			}
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
	}
}

// fanOut hands a page (or what its error means) to every Sub and
// moves the head; more says a full page came back, so read again at once.
func (t *tail) fanOut(evs []store.Event, err error) (more bool) {
	switch code := store.ErrorCode(err); {
	case err == nil:
	case code == store.CodeCursorExpired || code == store.CodeCursorInvalid:
		// Pruned past the head (or the log was rewound): every Sub
		// starts over from a snapshot, and the tail from the run's end.
		r, rerr := t.ts.store.RunByID(t.ts.ctx, t.runID)
		if rerr != nil {
			t.retryLater(rerr)
			return false
		}
		t.mu.Lock()
		t.head = r.LastSeq
		for sub := range t.subs {
			sub.offer(item{kind: itemResync})
		}
		t.mu.Unlock()
		return false
	default:
		t.retryLater(err)
		return false
	}
	if len(evs) == 0 {
		return false
	}
	frames := make([]*Frames, len(evs))
	for i := range frames {
		frames[i] = &Frames{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.head = evs[len(evs)-1].Seq
	for sub := range t.subs {
		sub.offerEvents(evs, frames)
	}
	return len(evs) == t.ts.page
}

// retryLater reads again after a poll interval when a read failed: the
// notification that woke it will not come twice.
func (t *tail) retryLater(err error) {
	if t.ts.ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	t.ts.log.Warn("stream tail read failed; retrying", "run", t.runID, "err", err)
	time.AfterFunc(t.ts.poll, t.wakeUnknown)
}
