package handlers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/store"
)

// errShuttingDown is the cause a stream ends with when the server stops.
var errShuttingDown = errors.New("handlers: server shutting down")

// subscriber is one open stream as the process's registry and its run's
// tail see it. The tail offers it pages; the registry counts it against
// the caps and re-checks its access with everyone else's.
type subscriber struct {
	out    *outbox
	userID int64
	cred   store.StreamCredential
	// access is what the stream last decided (an Access); the batched
	// re-check wakes recheck when the database now says otherwise.
	access  atomic.Int32
	recheck chan struct{}
	// w is the stream's writer once open: a cut aborts a write stuck on a
	// client that does not read.
	w atomic.Pointer[sseWriter]
	// cutOnce counts the cut once (metrics.StreamSlowCuts), where it happens.
	cutOnce atomic.Bool
}

// newSubscriber makes a stream's subscriber. ready and recheck are its
// connection's: one connection may carry several runs' streams, and waits
// on one channel for all of their hand-overs and one for their re-checks.
func newSubscriber(cfg *StreamConfig, userID int64, cred store.StreamCredential, access Access, ready, recheck chan struct{}) *subscriber {
	s := &subscriber{out: newOutbox(cfg, ready), userID: userID, cred: cred, recheck: recheck}
	s.access.Store(int32(access))
	return s
}

// offer queues one item; a subscriber that cannot take it is cut.
func (s *subscriber) offer(it item) bool {
	if s.out.offer(it) {
		return true
	}
	if s.cutOnce.CompareAndSwap(false, true) {
		metrics.StreamSlowCuts.Inc()
	}
	if w := s.w.Load(); w != nil {
		w.abort()
	}
	return false
}

func (s *subscriber) offerEvents(evs []store.Event) {
	for _, ev := range evs {
		if !s.offer(eventItem(ev)) {
			return
		}
	}
}

// Why a stream was refused before it opened (metrics.StreamsRefused).
const (
	refusedUserCap    = "user_cap"
	refusedProcessCap = "process_cap"
	refusedShutdown   = "shutting_down"
)

// openStreams is the process's registry of open streams. It bounds them
// (per user, per process), re-checks the access of all of them in one
// query per Recheck interval (recheck), and at shutdown ends them all at
// once and refuses new ones: without that, e.Shutdown would wait for every
// stream until its deadline.
type openStreams struct {
	ctx  context.Context // done once Close is called
	stop context.CancelCauseFunc

	maxStreams, maxPerUser int
	every                  time.Duration
	recheck                func(ctx context.Context, subs []*subscriber)

	mu      sync.Mutex
	closed  bool
	subs    map[*subscriber]struct{}
	held    int // streams counted by hold: not a run's, they re-check themselves
	perUser map[int64]int
	idle    chan struct{} // closed to stop the re-check loop when no stream is open
	freed   chan struct{} // closed (and made anew) whenever a stream leaves
	wg      sync.WaitGroup
}

// capGrace is how long a stream over its user's cap waits for one of the
// user's streams to leave before it is refused: a page that reconnects
// (a reload, tabs.js naming one more run) opens its new stream as the old
// one's close is still on its way.
const capGrace = time.Second

func newOpenStreams(cfg *StreamConfig, recheck func(context.Context, []*subscriber)) *openStreams {
	ctx, stop := context.WithCancelCause(context.Background())
	return &openStreams{ctx: ctx, stop: stop, maxStreams: cfg.MaxStreams, maxPerUser: cfg.MaxPerUser,
		every: cfg.Recheck, recheck: recheck, subs: map[*subscriber]struct{}{}, perUser: map[int64]int{},
		freed: make(chan struct{})}
}

// add registers a stream, or says why it is refused. An accepted stream
// needs a remove.
func (o *openStreams) add(s *subscriber) (refused string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if refused = o.admitWaiting(s.userID); refused != "" {
		return refused
	}
	o.subs[s] = struct{}{}
	if len(o.subs) == 1 {
		// The first stream starts the re-check loop; the last stops it, so
		// a process without streams holds no goroutine for them.
		o.idle = make(chan struct{})
		o.wg.Go(func() { o.recheckLoop(o.idle) })
	}
	return ""
}

// admitWaiting is admit, but a stream over its user's cap waits up to
// capGrace for one of theirs to leave. o.mu is held (and let go while it
// waits).
func (o *openStreams) admitWaiting(userID int64) (refused string) {
	deadline := time.Now().Add(capGrace)
	for {
		refused = o.refusal(userID)
		wait := time.Until(deadline)
		if refused != refusedUserCap || wait <= 0 {
			return o.admit(userID)
		}
		freed := o.freed
		o.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-freed:
		case <-t.C:
		case <-o.ctx.Done():
		}
		t.Stop()
		o.mu.Lock()
	}
}

// refusal says which cap refuses a stream of userID now, "" for none.
// o.mu is held.
func (o *openStreams) refusal(userID int64) string {
	switch {
	case o.closed:
		return refusedShutdown
	case len(o.subs)+o.held >= o.maxStreams:
		return refusedProcessCap
	case o.perUser[userID] >= o.maxPerUser:
		return refusedUserCap
	}
	return ""
}

// admit counts a stream of userID against the caps, or says why it is
// refused. o.mu is held.
func (o *openStreams) admit(userID int64) (refused string) {
	refused = o.refusal(userID)
	if refused != "" {
		metrics.StreamsRefused.WithLabelValues(refused).Inc()
		return refused
	}
	o.perUser[userID]++
	o.wg.Add(1)
	metrics.StreamsOpen.Inc()
	return ""
}

// hold counts a stream that follows no run (the approver's queue) against
// the same caps; it re-checks its own access. An accepted hold needs a
// release.
func (o *openStreams) hold(userID int64) (refused string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if refused = o.admitWaiting(userID); refused == "" {
		o.held++
	}
	return refused
}

func (o *openStreams) release(userID int64) {
	o.mu.Lock()
	o.held--
	o.forget(userID)
	o.mu.Unlock()
}

// forget undoes admit. o.mu is held.
func (o *openStreams) forget(userID int64) {
	if o.perUser[userID]--; o.perUser[userID] <= 0 {
		delete(o.perUser, userID)
	}
	metrics.StreamsOpen.Dec()
	o.wg.Done()
	close(o.freed)
	o.freed = make(chan struct{})
}

func (o *openStreams) remove(s *subscriber) {
	o.mu.Lock()
	delete(o.subs, s)
	if len(o.subs) == 0 {
		close(o.idle)
	}
	o.forget(s.userID)
	o.mu.Unlock()
}

// recheckLoop re-checks every open stream's access each interval, in one
// batch, until idle is closed or the server shuts down.
func (o *openStreams) recheckLoop(idle <-chan struct{}) {
	t := time.NewTicker(o.every)
	defer t.Stop()
	for {
		select {
		case <-idle:
			return
		case <-o.ctx.Done():
			return
		case <-t.C:
		}
		o.mu.Lock()
		subs := make([]*subscriber, 0, len(o.subs))
		for s := range o.subs {
			subs = append(subs, s)
		}
		o.mu.Unlock()
		// Bounded, but not by a short interval: a loaded database must
		// still answer it.
		ctx, cancel := context.WithTimeout(o.ctx, max(o.every, 10*time.Second))
		o.recheck(ctx, subs)
		cancel()
	}
}

// endOnShutdown cancels a stream with errShuttingDown when Close is
// called; the function it returns stops watching.
func (o *openStreams) endOnShutdown(cancel context.CancelCauseFunc) (stop func() bool) {
	return context.AfterFunc(o.ctx, func() { cancel(context.Cause(o.ctx)) })
}

// Close ends every open stream now and waits until their handlers have
// returned. Safe to call twice.
func (o *openStreams) Close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.stop(errShuttingDown)
	o.wg.Wait()
}
