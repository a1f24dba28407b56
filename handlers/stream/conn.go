package stream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/store"
)

// feed is one stream on a connection: a run's log (log.go) or a state
// (state.go).
type feed interface {
	// prepare reads where the stream starts, before the response opens, so
	// that a store that fails or stalls is answered with an error status.
	prepare(ctx context.Context) error
	// begin sends the start: a replay, a reset, or nothing to catch up on.
	begin(ctx context.Context) error
	// update sends what is new since the connection's ready channel fired.
	update(ctx context.Context) error
	// recheck decides the viewer's access again; a Reason ends the stream.
	recheck(ctx context.Context) error
	// finished: everything the stream will ever send is sent.
	finished() bool
	// closing renders the close event's data for r.
	closing(ctx context.Context, r Reason) ([]byte, error)
	// leave gives up the stream's registration and subscriptions.
	leave()
	// name says which stream it is, for the log and the close event's id.
	name() string
	prefix() string
}

// Conn is one client connection carrying one or more streams. One
// goroutine (the request's, then its own once detached: Serve) serves all
// of them: it waits on one channel for every stream's news, one for the
// batched re-check, the user's grant changes, the heartbeat and the client
// going away.
type Conn struct {
	e      *Engine
	c      echo.Context
	userID int64

	ready, recheck chan struct{}
	userWake       <-chan struct{}
	unsubscribe    func()
	feeds          []feed
	denied         []denied // streams closed before the start
	w              *sseWriter
	handedOver     bool // Serve's goroutine owns the connection now
}

// NewConn starts a connection for userID's streams; it wakes when the
// user's grants or sessions change. End it with End.
func (e *Engine) NewConn(c echo.Context, userID int64) *Conn {
	sc := &Conn{e: e, c: c, userID: userID, ready: make(chan struct{}, 1), recheck: make(chan struct{}, 1)}
	sc.userWake, sc.unsubscribe = e.subscribe(store.UserTopic(strconv.FormatInt(userID, 10)))
	return sc
}

// subscribe wakes a channel on topic; without a listener it never fires.
func (e *Engine) subscribe(topic string) (<-chan struct{}, func()) {
	if e.listener == nil {
		return nil, func() {}
	}
	return e.listener.Subscribe(topic)
}

// admit registers a stream's Sub, or says which cap refuses it.
func (sc *Conn) admit(cred store.StreamCredential, access int) (*Sub, Refused) {
	sub := newSub(&sc.e.cfg, sc.userID, cred, access, sc.ready, sc.recheck)
	if refused := sc.e.reg.add(sub); refused != "" {
		return nil, refused
	}
	return sub, ""
}

// Deny sends, at the start, the close event of a stream the connection
// was asked for and may not carry (a run its user may not see); data is
// its words, id its prefix.
func (sc *Conn) Deny(idPrefix string, data []byte) {
	sc.denied = append(sc.denied, denied{idPrefix, data})
}

type denied struct {
	id   string
	data []byte
}

// End leaves what is still joined, unless the connection was handed over
// to a goroutine of its own (Serve), which then leaves itself. Safe to
// call twice.
func (sc *Conn) End() {
	if sc.handedOver {
		return
	}
	sc.leave()
}

func (sc *Conn) leave() {
	for _, f := range sc.feeds {
		f.leave()
	}
	sc.feeds = nil
	sc.unsubscribe()
}

// Serve opens the event stream and sends every stream until each has
// ended, the client has gone or the server shuts down. Once the start is
// sent, the connection is detached from the HTTP server (writer.go) and
// goes on in a goroutine of its own, so the handler returns and nothing
// of the request stays: an idle stream costs its own state only. Where
// the connection cannot be detached, it goes on here.
func (sc *Conn) Serve() error {
	reqCtx := sc.c.Request().Context()
	// Not the request's context, which ends when the handler returns; it
	// keeps who is asking, for the store.
	ctx, cancel := context.WithCancelCause(store.WithActor(context.Background(), store.ActorFrom(reqCtx)))
	stopShutdown := sc.e.reg.endOnShutdown(cancel)
	followRequest := func() func() bool {
		return context.AfterFunc(reqCtx, func() { cancel(errClientGone) })
	}
	stopRequest := followRequest()
	err := sc.start(ctx)
	// A connection the start took (beginTakeover) is detached even when
	// its client has gone meanwhile: only this goroutine can close it.
	if err == nil && (stopRequest() || sc.w.conn != nil) {
		if conn := sc.w.detach(); conn != nil {
			sc.handedOver = true
			sc.c = nil
			go sc.detached(ctx, conn, cancel, stopShutdown)
			return nil
		}
		stopRequest = followRequest()
	}
	defer stopShutdown()
	defer stopRequest()
	if err == nil {
		err = sc.loop(ctx)
	}
	sc.finish(ctx, cancel, err)
	if sc.w != nil && sc.w.conn != nil {
		// Taken, and its start failed: the server will not close it.
		sc.w.finish()
		_ = sc.w.conn.Close()
	}
	return nil
}

// detached is the rest of a stream whose connection was detached, in a
// goroutine of its own, outside the handler and so outside echo's Recover:
// a panic ends this connection (logged with its stack), not the process.
//
// The goroutine's stack starts at 2 KB and the stream idles in loop's
// select: one more frame under it would grow the stack to 4 KB, a copy at
// every open, so the panic is caught and the stream ended in a deferred
// function, whose frame is only there at the end.
func (sc *Conn) detached(ctx context.Context, conn net.Conn, cancel context.CancelCauseFunc, stopShutdown func() bool) {
	var err error
	defer func() {
		if r := recover(); r != nil {
			sc.e.log.Error("stream panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("stream: panicked: %v", r)
		}
		sc.finish(ctx, cancel, err)
		stopShutdown()
		sc.leave()
		sc.w.finish()
		_ = conn.Close()
	}()
	go cancelWhenClosed(conn, cancel)
	err = sc.loop(ctx)
}

// errClientGone ends a stream whose client closed the connection.
var errClientGone = errors.New("stream: client gone")

// cancelWhenClosed reads a detached stream's connection until the client
// closes it (or sends anything: a stream's client only listens), and then
// ends the stream.
func cancelWhenClosed(conn net.Conn, cancel context.CancelCauseFunc) {
	var b [1]byte
	_, _ = conn.Read(b[:])
	cancel(errClientGone)
}

// start finds where each stream starts, opens the response and sends
// the starts.
func (sc *Conn) start(ctx context.Context) error {
	for _, f := range sc.feeds {
		if err := f.prepare(ctx); err != nil {
			return err
		}
	}
	w, err := beginTakeover(sc.c, &sc.e.cfg)
	if err != nil {
		return err
	}
	sc.w = w
	for _, d := range sc.denied {
		w.event("close", d.id, d.data)
	}
	if err := sc.each(ctx, func(f feed) error { return f.begin(ctx) }); err != nil {
		return err
	}
	return w.flush()
}

// finish notes how the connection ended: cut for not reading, or otherwise.
func (sc *Conn) finish(ctx context.Context, cancel context.CancelCauseFunc, err error) {
	overflowed := false
	for _, f := range sc.feeds {
		switch l := f.(type) {
		case *logFeed:
			if _, cut := l.sub.out.take(); cut != nil {
				overflowed = true // counted where it was cut (Sub.offer)
			}
		case *familyFeed:
			overflowed = overflowed || l.overflowed()
		}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && !overflowed {
		// A write stuck past its deadline: a client that does not read.
		metrics.StreamSlowCuts.Inc()
		overflowed = true
	}
	if overflowed {
		err = errSlowReader
	}
	if err == nil {
		err = context.Cause(ctx)
	}
	cancel(err)
	for _, f := range sc.feeds {
		sc.e.logEnd(f.name(), err)
	}
}

// heartbeatIn is how long a stream that has just written waits before its
// heartbeat: until the first of the process's heartbeat slots (a quarter
// of a heartbeat apart) that is at least a heartbeat away. Idle streams'
// timers so fall due together, and the runtime wakes their goroutines in
// one batch per slot instead of one wake-up of a sleeping thread each.
// now is the time since beatEpoch.
func heartbeatIn(every, now time.Duration) time.Duration {
	slot := max(every/4, time.Millisecond)
	return (now+every+slot-1)/slot*slot - now
}

// beatEpoch is where the heartbeat slots are counted from.
var beatEpoch = time.Now()

func (sc *Conn) loop(ctx context.Context) error {
	every := sc.e.cfg.Heartbeat
	now := time.Since(beatEpoch)
	due := now + heartbeatIn(every, now) // since beatEpoch
	hb := time.NewTimer(due - now)
	defer hb.Stop()
	recheck := func(f feed) error { return f.recheck(ctx) }
	var err error
	for err == nil && len(sc.feeds) > 0 {
		if err = sc.w.flush(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			if err := context.Cause(ctx); !errors.Is(err, errShuttingDown) {
				return err
			}
			return sc.restarting(ctx)
		case <-hb.C:
			sc.w.comment("ping")
		case <-sc.userWake:
			err = sc.each(ctx, recheck)
		case <-sc.recheck:
			err = sc.each(ctx, recheck)
		case <-sc.ready:
			// The listener wakes in commit order, so a grant change that
			// committed before what a tail read is signalled already:
			// honour it before sending events it may hide.
			select {
			case <-sc.userWake:
				err = sc.each(ctx, recheck)
			default:
			}
			if err == nil {
				err = sc.each(ctx, func(f feed) error { return f.update(ctx) })
			}
		}
		// The beat moves only when the stream's last write crossed into
		// another slot: most events leave the timer as it is.
		now = time.Since(beatEpoch)
		if next := now + heartbeatIn(every, now); next != due {
			due = next
			hb.Reset(next - now)
		}
	}
	if err == nil {
		err = sc.w.flush()
	}
	return err
}

// restarting tells every stream, as the server shuts down, to reconnect
// (event: restart, each stream's words) after a fresh retry hint, and
// ends the connection.
func (sc *Conn) restarting(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	sc.w.retry(sc.e.cfg.RetryHint())
	for _, f := range sc.feeds {
		data, err := f.closing(ctx, Restarting)
		if err != nil {
			return err
		}
		sc.w.event("restart", f.prefix(), data)
	}
	if err := sc.w.flush(); err != nil {
		return err
	}
	return errShuttingDown
}

// each runs fn for every stream. A stream that has finished, or that fn
// ends with a Reason, gets the close event and leaves; any other error
// ends the connection.
func (sc *Conn) each(ctx context.Context, fn func(feed) error) error {
	live := sc.feeds[:0]
	for i, f := range sc.feeds {
		err := fn(f)
		if err == nil && f.finished() {
			err = Finished
		}
		var reason Reason
		switch {
		case errors.As(err, &reason):
			var data []byte
			if data, err = f.closing(ctx, reason); err == nil {
				sc.w.event("close", f.prefix(), data)
			}
			f.leave()
		case err == nil:
			live = append(live, f)
		}
		if err != nil {
			// What is not yet handled stays joined, for End to leave.
			sc.feeds = append(live, sc.feeds[i+1:]...)
			return err
		}
	}
	sc.feeds = live
	return nil
}

// message writes one event; its id is the seq or version (none below 0),
// after the stream's prefix on a connection of several runs.
func (sc *Conn) message(prefix, name string, seq int64, data []byte) {
	id := prefix
	if seq >= 0 {
		id += strconv.FormatInt(seq, 10)
	}
	sc.w.event(name, id, data)
}
