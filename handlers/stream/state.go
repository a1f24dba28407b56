package stream

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/refundd/refundd/store"
)

// A state stream (the approval queue, a customer's run list) follows a
// state, not a history:
//
//  1. the adapter checks access on every request, and the caps refuse what
//     is over them, as for a run's stream;
//  2. the state is read before the response opens; its version is the
//     cursor: a client whose cursor is that version resumes with nothing
//     sent, any other cursor (older, from the future, malformed) gets
//     event: reset with the state as it is now, since what changed
//     meanwhile is shown, not replayed;
//  3. the stream subscribes to the state's topics before each read, so a
//     change that commits after the read wakes it for the next one; reads
//     are spaced by ReadGap, so a flood of changes costs a few reads a
//     second and each still shows within one;
//  4. each change is one message whose id is the new version (the browser
//     applies a version once); a change the adapter cannot say as a delta
//     is a reset;
//  5. every re-check also reads the state again: a change no topic wakes
//     (a run started elsewhere joining a customer's list) shows then.

// State is one version of what a state stream shows.
type State interface {
	// Version grows with every change the stream shows.
	Version() int64
	// Topics are the listener topics whose notifications may change it.
	Topics() []string
}

// StateView is an adapter's view of one state for one viewer.
type StateView interface {
	// Read reads the state now.
	Read(ctx context.Context) (State, error)
	// Render renders the change from shown to next; shown nil renders next
	// whole. event "" is a change, "reset" replaces what the page shows.
	Render(ctx context.Context, shown, next State) (event string, data []byte, err error)
	// Recheck decides the viewer's access again; a Reason ends the stream.
	Recheck(ctx context.Context) error
	// Closing renders the close event for r.
	Closing(ctx context.Context, r Reason) ([]byte, error)
}

// AddState adds a state's stream to the connection, or says which cap
// refuses it. cursor is the version the client shows.
func (sc *Conn) AddState(what string, cred store.StreamCredential, cursor string, v StateView) Refused {
	sub, refused := sc.admit(cred, 0)
	if refused != "" {
		return refused
	}
	f := &stateFeed{sc: sc, v: v, what: what, sub: sub, asked: -1}
	if version, err := store.ParseCursor(cursor); err == nil {
		f.asked = version
	}
	f.dirty.Store(true)
	sc.feeds = append(sc.feeds, f)
	return ""
}

// stateFeed is one state's stream: what it shows now.
type stateFeed struct {
	sc    *Conn
	v     StateView
	what  string
	sub   *Sub
	asked int64 // the version the client shows; -1 for none

	shown      State
	pending    []pendingMessage // rendered before the response opened
	topics     []string         // subscribed to
	subscribed bool             // to topics (none is a subscription too)
	unsub      []func()
	stopPoll   chan struct{} // without a listener
	dirty      atomic.Bool   // woken since the last read
	lastRead   time.Time
}

// pendingMessage is a message rendered before the response opened.
type pendingMessage struct {
	event   string
	version int64
	data    []byte
}

func (f *stateFeed) name() string   { return f.what }
func (f *stateFeed) prefix() string { return "" }
func (f *stateFeed) finished() bool { return false }
func (f *stateFeed) closing(ctx context.Context, r Reason) ([]byte, error) {
	return f.v.Closing(ctx, r)
}

func (f *stateFeed) leave() {
	f.unsubscribe()
	if f.stopPoll != nil {
		close(f.stopPoll)
		f.stopPoll = nil
	}
	f.sc.e.reg.remove(f.sub)
}

func (f *stateFeed) unsubscribe() {
	for _, u := range f.unsub {
		u()
	}
	f.unsub, f.topics, f.subscribed = nil, nil, false
}

// wake marks the state changed and wakes the connection.
func (f *stateFeed) wake() {
	f.dirty.Store(true)
	signal(f.sc.ready)
}

// subscribe follows topics, and says whether they are new. Without a
// listener the stream polls instead.
func (f *stateFeed) subscribe(topics []string) bool {
	l := f.sc.e.listener
	if l == nil {
		if f.stopPoll == nil {
			f.stopPoll = make(chan struct{})
			go poll(f.sc.e.cfg.Poll, f.stopPoll, f.wake)
		}
		return false
	}
	if f.subscribed && slices.Equal(topics, f.topics) {
		return false
	}
	f.unsubscribe()
	f.topics = slices.Clone(topics)
	for _, t := range topics {
		f.unsub = append(f.unsub, l.SubscribeFunc(t, func(int64) { f.wake() }))
	}
	f.subscribed = true
	return true
}

func poll(every time.Duration, stop <-chan struct{}, wake func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			wake()
		}
	}
}

// read reads the state. Its topics are subscribed to after the read that
// names them, so when they are new it reads once more: a change that
// committed in between is in that read, and any later one wakes the
// stream. Topics that keep changing are left to the next wake-up.
func (f *stateFeed) read(ctx context.Context) (State, error) {
	for range 3 {
		f.dirty.Store(false)
		f.lastRead = time.Now()
		next, err := f.v.Read(ctx)
		if err != nil || !f.subscribe(next.Topics()) {
			return next, err
		}
	}
	f.dirty.Store(true)
	return f.v.Read(ctx)
}

// prepare reads the state: a client that shows its version is current;
// any other gets it whole once the response opens.
func (f *stateFeed) prepare(ctx context.Context) error {
	next, err := f.read(ctx)
	if err != nil {
		return err
	}
	if f.asked == next.Version() {
		f.shown = next
		return nil
	}
	return f.show(ctx, next)
}

func (f *stateFeed) begin(context.Context) error {
	f.flushPending()
	return nil
}

// show renders the change from what is shown to next, if there is one.
func (f *stateFeed) show(ctx context.Context, next State) error {
	if f.shown != nil && next.Version() == f.shown.Version() {
		f.shown = next
		return nil
	}
	event, data, err := f.v.Render(ctx, f.shown, next)
	if err != nil {
		return err
	}
	f.shown = next
	f.pending = append(f.pending, pendingMessage{event, next.Version(), data})
	return nil
}

func (f *stateFeed) flushPending() {
	for _, m := range f.pending {
		f.sc.message("", m.event, m.version, m.data)
	}
	f.pending = f.pending[:0]
}

// update reads the state again if it was woken, no sooner than ReadGap
// after the last read, and sends the change.
func (f *stateFeed) update(ctx context.Context) error {
	if !f.dirty.Load() {
		return nil
	}
	if wait := time.Until(f.lastRead.Add(f.sc.e.cfg.ReadGap)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
	next, err := f.read(ctx)
	if err == nil {
		err = f.show(ctx, next)
	}
	f.flushPending()
	return err
}

// recheck decides the viewer's access again, and reads the state again
// (for what no topic wakes).
func (f *stateFeed) recheck(ctx context.Context) error {
	if err := f.v.Recheck(ctx); err != nil {
		return err
	}
	f.wake()
	return nil
}
