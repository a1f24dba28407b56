package store

import (
	"context"
	"log/slog"
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

// Start connects and listens on the events, grants, work and queue channels.
func (l *Listener) Start(ctx context.Context) error {
	pl := pq.NewListener(l.url, 100*time.Millisecond, 10*time.Second, func(ev pq.ListenerEventType, err error) {
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
		runID, _, _ := strings.Cut(n.Extra, ":")
		wakeAll(l.subs[RunTopic(runID)])
	case channelGrants:
		wakeAll(l.subs[UserTopic(n.Extra)])
	case channelWork:
		wakeAll(l.subs[Work])
	case channelQueue:
		wakeAll(l.subs[Queue])
	}
}

// waker is one subscription: a channel that holds one pending wake-up, or
// a function called on the listener's goroutine.
type waker struct {
	ch chan struct{}
	fn func()
}

func wakeAll(set map[*waker]struct{}) {
	for w := range set {
		if w.fn != nil {
			w.fn()
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
// function it returns is called. fn runs on the listener's goroutine with
// the listener locked, so it must return at once and must not call the
// Listener: it is for a wake-up that needs no goroutine waiting on a
// channel (a process's shared tail of a run).
func (l *Listener) SubscribeFunc(topic string, fn func()) (cancel func()) {
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
