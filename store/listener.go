package store

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lib/pq"
)

// Listener is a process's one LISTEN connection. It turns notifications into
// wake-ups for subscribers: a subscriber learns only that something may have
// changed and reads what changed from the tables. Wake-ups coalesce and never
// block, so a slow subscriber never holds the listener; after a reconnect
// (when notifications may have been missed) every subscriber is woken.
type Listener struct {
	url    string
	logger *slog.Logger

	mu   sync.Mutex
	subs map[string]map[*waker]struct{}

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// NewListener prepares a listener on the database at url.
func NewListener(url string, logger *slog.Logger) *Listener {
	return &Listener{url: url, logger: logger, subs: map[string]map[*waker]struct{}{}}
}

// Work is the topic woken when a run may have become due (channelWork):
// workers wait on it, and on their own poll for retries and expired leases.
// Not on ChannelEvents: most appends are narration, which is never work.
const Work = "work"

// Queue is the topic woken when the approval queue changes (channelQueue).
const Queue = "queue"

// Topics a subscriber can wait on.
func RunTopic(runID string) string   { return "run:" + runID }
func UserTopic(userID string) string { return "user:" + userID }

// listenerRetryMax caps the wait between the listener's attempts to
// reconnect (it doubles from 100 ms): after a failover, streams are woken
// within this much of the new primary answering, not lib/pq's ten seconds.
const listenerRetryMax = 2 * time.Second

// Start connects and listens on the events, grants, work and queue channels.
func (l *Listener) Start(ctx context.Context) error {
	pl := pq.NewListener(l.url, 100*time.Millisecond, listenerRetryMax, func(ev pq.ListenerEventType, err error) {
		if err != nil {
			l.logger.Warn("listener connection", "event", ev, "err", err)
		}
	})
	for _, ch := range []string{ChannelEvents, channelGrants, channelWork, channelQueue} {
		if err := pl.Listen(ch); err != nil {
			pl.Close()
			return err
		}
	}
	ctx, l.stop = context.WithCancel(ctx)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer pl.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case n := <-pl.Notify:
				l.dispatch(n)
			}
		}
	}()
	return nil
}

// Stop closes the connection and waits for the loop. Safe to call twice.
func (l *Listener) Stop() {
	if l.stop != nil {
		l.stop()
	}
	l.wg.Wait()
}

func (l *Listener) dispatch(n *pq.Notification) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n == nil {
		// Reconnected: anything may have been missed.
		for _, set := range l.subs {
			wakeAll(set)
		}
		return
	}
	switch n.Channel {
	case ChannelEvents:
		l.wakeRunLocked(n.Extra)
	case channelGrants:
		wakeAll(l.subs[UserTopic(n.Extra)])
	case channelWork:
		wakeAll(l.subs[Work])
	case channelQueue:
		wakeAll(l.subs[Queue])
	}
}

// wakeRunLocked wakes the subscribers of a run's topic for a notice of
// ChannelEvents ("<run_id>:<seq>"), telling function subscribers the seq.
func (l *Listener) wakeRunLocked(payload string) {
	runID, seqText, _ := strings.Cut(payload, ":")
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil {
		seq = SeqUnknown
	}
	wakeSeq(l.subs[RunTopic(runID)], seq)
}

// wakeLocal wakes this process's subscribers of the runs whose appends
// the process itself just committed (Store.WakeLocal), before the NOTIFY
// that wakes every process has made its round trip.
func (l *Listener) wakeLocal(ns []notice) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range ns {
		if n.channel == ChannelEvents {
			l.wakeRunLocked(n.payload)
		}
	}
}

// SeqUnknown is the seq a run's wake-up carries when it cannot say which
// seq was committed (a reconnect, a poll): read whatever is new.
const SeqUnknown int64 = -1

// waker is one subscription: a channel that holds one pending wake-up, or
// a function called on the listener's goroutine.
type waker struct {
	ch chan struct{}
	fn func(seq int64)
}

func wakeAll(set map[*waker]struct{}) { wakeSeq(set, SeqUnknown) }

// wakeSeq wakes set; function subscribers learn seq, the last seq the
// commit that woke them appended (or SeqUnknown).
func wakeSeq(set map[*waker]struct{}, seq int64) {
	for w := range set {
		if w.fn != nil {
			w.fn(seq)
			continue
		}
		select {
		case w.ch <- struct{}{}:
		default: // already woken; it will read everything new anyway
		}
	}
}

// Subscribe returns a channel that receives a wake-up whenever one of the
// topics may have changed, and a function that ends the subscription.
func (l *Listener) Subscribe(topics ...string) (<-chan struct{}, func()) {
	w := &waker{ch: make(chan struct{}, 1)}
	return w.ch, l.add(w, topics)
}

// SubscribeFunc calls fn whenever topic may have changed, until the
// function it returns is called. fn runs with the listener locked (on the
// listener's goroutine, or on the one that committed in this process), so
// it must return at once and must not call the Listener: it is for a
// wake-up that needs no goroutine waiting on a channel (a process's shared
// tail of a run). On a run's topic, seq is the last seq the commit
// appended: a subscriber that has read it already need not read again.
func (l *Listener) SubscribeFunc(topic string, fn func(seq int64)) (cancel func()) {
	return l.add(&waker{fn: fn}, []string{topic})
}

func (l *Listener) add(w *waker, topics []string) (cancel func()) {
	l.mu.Lock()
	for _, t := range topics {
		if l.subs[t] == nil {
			l.subs[t] = map[*waker]struct{}{}
		}
		l.subs[t][w] = struct{}{}
	}
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, t := range topics {
			delete(l.subs[t], w)
			if len(l.subs[t]) == 0 {
				delete(l.subs, t)
			}
		}
	}
}
