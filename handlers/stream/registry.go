package stream

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/store"
)

// errShuttingDown is the cause a stream ends with when the server stops.
var errShuttingDown = errors.New("stream: server shutting down")

// Sub is one open stream as the process's registry and its run's tail see
// it. The tail offers it pages; the registry counts it against the caps
// and re-checks its access: a run's with every other run's, in one batch
// (the Engine's Recheck function), a state stream's by waking it.
type Sub struct {
	out    *outbox
	userID int64
	// Cred is what the stream's user is found by again: its bearer token
	// or session, and its run (none for a state stream).
	Cred store.StreamCredential
	// access is what the stream last decided (the adapter's level); the
	// batched re-check wakes recheck when the database now says otherwise.
	access  atomic.Int32
	recheck chan struct{}
	// w is the stream's writer once open: a cut aborts a write stuck on a
	// client that does not read.
	w atomic.Pointer[sseWriter]
	// cutOnce counts the cut once (metrics.StreamSlowCuts), where it happens.
	cutOnce atomic.Bool
}

// newSub makes a stream's Sub. ready and recheck are its connection's: one
// connection may carry several runs' streams, and waits on one channel for
// all of their hand-overs and one for their re-checks.
func newSub(cfg *Config, userID int64, cred store.StreamCredential, access int, ready, recheck chan struct{}) *Sub {
	s := &Sub{out: newOutbox(cfg, ready), userID: userID, Cred: cred, recheck: recheck}
	s.access.Store(int32(access))
	return s
}

// Access is the access the stream last decided.
func (s *Sub) Access() int { return int(s.access.Load()) }

// Recheck wakes the stream to decide its access again.
func (s *Sub) Recheck() { signal(s.recheck) }

// offer queues one item; a subscriber that cannot take it is cut.
func (s *Sub) offer(it item) bool {
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

// offerEvents queues evs, each with its shared encodings (frames[i]).
func (s *Sub) offerEvents(evs []store.Event, frames []*Frames) {
	for i, ev := range evs {
		if !s.offer(eventItem(ev, frames[i])) {
			return
		}
	}
}

// Refused says why a stream was refused before it opened
// (metrics.StreamsRefused); "" for none.
type Refused string

// The reasons a stream is refused.
const (
	RefusedUserCap    Refused = "user_cap"
	RefusedProcessCap Refused = "process_cap"
	RefusedShutdown   Refused = "shutting_down"
)

// registry is the process's open streams. It bounds them (per user, per
// process), re-checks the access of all of them once per Recheck interval,
// and at shutdown refuses new ones and ends them over the drain window: without
// that, e.Shutdown would wait for every stream until its deadline.
type registry struct {
	ctx  context.Context // done once Close is called
	stop context.CancelCauseFunc

	maxStreams, maxPerUser int
	every                  time.Duration
	// endsWithin is the part of the drain window over which shutdown ends
	// the streams (endOnShutdown): the window less the longest retry hint,
	// so that every client, told its hint, is back before the window ends.
	endsWithin time.Duration
	recheck    func(ctx context.Context, subs []*Sub)

	mu      sync.Mutex
	closed  bool
	subs    map[*Sub]struct{}
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

func newRegistry(cfg *Config, recheck func(context.Context, []*Sub)) *registry {
	ctx, stop := context.WithCancelCause(context.Background())
	return &registry{ctx: ctx, stop: stop, maxStreams: cfg.MaxStreams, maxPerUser: cfg.MaxPerUser,
		every: cfg.Recheck, endsWithin: max(cfg.Drain-cfg.Retry-cfg.RetrySpread, 0), recheck: recheck, subs: map[*Sub]struct{}{}, perUser: map[int64]int{},
		freed: make(chan struct{})}
}

// add registers a stream, or says why it is refused. An accepted stream
// needs a remove.
func (o *registry) add(s *Sub) Refused {
	o.mu.Lock()
	defer o.mu.Unlock()
	if refused := o.admitWaiting(s.userID); refused != "" {
		return refused
	}
	o.subs[s] = struct{}{}
	if len(o.subs) == 1 {
		// The first stream starts the re-check loop; the last stops it, so
		// a process without streams holds no goroutine for them.
		// The loop's own channel: o.idle is a later loop's once this
		// one is stopped, and the goroutine may start after that.
		idle := make(chan struct{})
		o.idle = idle
		o.wg.Go(func() { o.recheckLoop(idle) })
	}
	return ""
}

// admitWaiting is admit, but a stream over its user's cap waits up to
// capGrace for one of theirs to leave. o.mu is held (and let go while it
// waits).
func (o *registry) admitWaiting(userID int64) Refused {
	deadline := time.Now().Add(capGrace)
	for {
		refused := o.refusal(userID)
		wait := time.Until(deadline)
		if refused != RefusedUserCap || wait <= 0 {
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
func (o *registry) refusal(userID int64) Refused {
	switch {
	case o.closed:
		return RefusedShutdown
	case len(o.subs) >= o.maxStreams:
		return RefusedProcessCap
	case o.perUser[userID] >= o.maxPerUser:
		return RefusedUserCap
	}
	return ""
}

// admit counts a stream of userID against the caps, or says why it is
// refused. o.mu is held.
func (o *registry) admit(userID int64) Refused {
	refused := o.refusal(userID)
	if refused != "" {
		metrics.StreamsRefused.WithLabelValues(string(refused)).Inc()
		return refused
	}
	o.perUser[userID]++
	o.wg.Add(1)
	metrics.StreamsOpen.Inc()
	return ""
}

func (o *registry) remove(s *Sub) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.subs, s)
	if len(o.subs) == 0 {
		close(o.idle)
	}
	if o.perUser[s.userID]--; o.perUser[s.userID] <= 0 {
		delete(o.perUser, s.userID)
	}
	metrics.StreamsOpen.Dec()
	o.wg.Done()
	close(o.freed)
	o.freed = make(chan struct{})
}

// recheckLoop re-checks every open stream's access each interval until
// idle is closed or the server shuts down: the runs' in one batch, the
// state streams' by waking them (they are few: one per open queue or list).
func (o *registry) recheckLoop(idle <-chan struct{}) {
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
		runs := make([]*Sub, 0, len(o.subs))
		for s := range o.subs {
			if s.Cred.RunID == uuid.Nil {
				s.Recheck()
				continue
			}
			runs = append(runs, s)
		}
		o.mu.Unlock()
		if len(runs) == 0 {
			continue
		}
		// Bounded, but not by a short interval: a loaded database must
		// still answer it.
		ctx, cancel := context.WithTimeout(o.ctx, max(o.every, 10*time.Second))
		o.recheck(ctx, runs)
		cancel()
	}
}

// endOnShutdown cancels a stream with errShuttingDown once Close is
// called, at a random moment of the drain window's first part
// (endsWithin); the function it returns stops watching.
func (o *registry) endOnShutdown(cancel context.CancelCauseFunc) (stop func() bool) {
	return context.AfterFunc(o.ctx, func() {
		time.AfterFunc(spread(o.endsWithin), func() { cancel(context.Cause(o.ctx)) })
	})
}

// Close refuses new streams, ends the open ones over the drain window
// (endOnShutdown) and waits until they have ended. Safe
// to call twice.
func (o *registry) Close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.stop(errShuttingDown)
	o.wg.Wait()
}
