package handlers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/store"
)

// streamConn is one client connection carrying the streams of one or more
// runs. One goroutine (the request's, then its own once detached: serve)
// serves all of them: it waits on one
// channel for every run's hand-overs, one for the batched re-check, the
// user's grant changes, the heartbeat and the client going away.
type streamConn struct {
	h *Handler
	c echo.Context
	f streamFormat
	u *store.User

	ready, recheck chan struct{}
	userWake       <-chan struct{}
	unsubscribe    func()
	streams        []*stream
	denied         []uuid.UUID // runs named that the user may not see
	w              *sseWriter
	handedOver     bool // serve's goroutine owns the stream now
}

func (h *Handler) newStreamConn(c echo.Context, f streamFormat) *streamConn {
	u := currentUser(c)
	sc := &streamConn{h: h, c: c, f: f, u: u, ready: make(chan struct{}, 1), recheck: make(chan struct{}, 1)}
	sc.userWake, sc.unsubscribe = h.subscribeUser(u.ID)
	return sc
}

// add registers run's stream on the connection (or says which cap refused
// it) and joins the run's tail: before the first read, so whatever commits
// from here on either is in that read or in a page the tail hands over.
func (sc *streamConn) add(run *store.Run, access Access, cursor, idPrefix string) (refused string) {
	h := sc.h
	sub := newSubscriber(&h.cfg.Stream, sc.u.ID, h.streamCredential(sc.c, run.ID), access, sc.ready, sc.recheck)
	if refused = h.streams.add(sub); refused != "" {
		return refused
	}
	leaveTail, tailFrom := h.tails.join(run.ID, run.LastSeq, sub)
	s := &stream{h: h, f: sc.f, cfg: &h.cfg.Stream, runID: run.ID, viewer: viewerOf(sc.u, run, access),
		sub: sub, run: run, cursor0: cursor, idPrefix: idPrefix, access: access, tailFrom: tailFrom}
	s.leave = func() { leaveTail(); h.streams.remove(sub) }
	sc.streams = append(sc.streams, s)
	return ""
}

// end leaves what is still joined, unless the stream was handed over to
// a goroutine of its own (serve), which then leaves itself. Safe to call
// twice.
func (sc *streamConn) end() {
	if sc.handedOver {
		return
	}
	sc.leave()
}

func (sc *streamConn) leave() {
	for _, s := range sc.streams {
		s.leave()
	}
	sc.streams = nil
	sc.unsubscribe()
}

// serve opens the event stream and sends every run's stream until each
// has ended, the client has gone or the server shuts down. Once the start
// is sent, the connection is detached from the HTTP server (sse.go) and
// the stream goes on in a goroutine of its own, so the handler returns and
// nothing of the request stays: an idle stream costs its own state only.
// Where the connection cannot be detached, it goes on here.
func (sc *streamConn) serve() error {
	h := sc.h
	reqCtx := sc.c.Request().Context()
	// Not the request's context, which ends when the handler returns; it
	// keeps who is asking, for the store.
	ctx, cancel := context.WithCancelCause(store.WithActor(context.Background(), store.ActorFrom(reqCtx)))
	stopShutdown := h.streams.endOnShutdown(cancel)
	followRequest := func() func() bool {
		return context.AfterFunc(reqCtx, func() { cancel(errClientGone) })
	}
	stopRequest := followRequest()
	err := sc.start(ctx)
	if err == nil && stopRequest() {
		if conn := sc.w.detach(); conn != nil {
			sc.handedOver = true
			sc.c = nil
			go func() {
				defer conn.Close()
				go cancelWhenClosed(conn, cancel)
				err := sc.loopRecovering(ctx)
				sc.finish(ctx, cancel, err)
				stopShutdown()
				sc.leave()
				sc.w.finish()
			}()
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
	return nil
}

// loopRecovering is loop for a detached stream, outside the handler and
// so outside echo's Recover: a panic ends this stream (logged with its
// stack), not the process.
func (sc *streamConn) loopRecovering(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			sc.h.log.Error("stream panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("handlers: stream panicked: %v", r)
		}
	}()
	return sc.loop(ctx)
}

// errClientGone ends a stream whose client closed the connection.
var errClientGone = errors.New("handlers: stream client gone")

// cancelWhenClosed reads a detached stream's connection until the client
// closes it (or sends anything: a stream's client only listens), and then
// ends the stream.
func cancelWhenClosed(conn net.Conn, cancel context.CancelCauseFunc) {
	var b [1]byte
	_, _ = conn.Read(b[:])
	cancel(errClientGone)
}

// start finds where each run's stream starts, opens the response and sends
// the starts.
func (sc *streamConn) start(ctx context.Context) error {
	h, c := sc.h, sc.c
	starts := make([]startPoint, len(sc.streams))
	for i, s := range sc.streams {
		var err error
		if starts[i], err = h.findStart(ctx, sc.f, s.cursor0, s.run, s.access); err != nil {
			return err
		}
	}
	w, err := beginStream(c, &h.cfg.Stream)
	if err != nil {
		return err
	}
	sc.w = w
	for _, id := range sc.denied {
		// In the same words as one run's stream: a tab of a run its user
		// may not see stops asking.
		data, err := sc.f.closing(ctx, closeDenied)
		if err != nil {
			return err
		}
		w.event("close", id.String()+":", data)
	}
	for _, s := range sc.streams {
		s.w = w
		s.sub.w.Store(w)
	}
	i := 0
	if err := sc.each(ctx, func(s *stream) error { i++; return s.begin(ctx, starts[i-1]) }); err != nil {
		return err
	}
	return w.flush()
}

// finish notes how the stream ended: cut for not reading, or otherwise.
func (sc *streamConn) finish(ctx context.Context, cancel context.CancelCauseFunc, err error) {
	overflowed := false
	for _, s := range sc.streams {
		if _, cut := s.sub.out.take(); cut != nil {
			overflowed = true // counted where it was cut (subscriber.offer)
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
	for _, s := range sc.streams {
		sc.h.logStreamEnd(s.runID, err)
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

func (sc *streamConn) loop(ctx context.Context) error {
	hb := time.NewTimer(heartbeatIn(sc.h.cfg.Stream.Heartbeat, time.Since(beatEpoch)))
	defer hb.Stop()
	recheck := func(s *stream) error { return s.recheck(ctx) }
	var err error
	for err == nil && len(sc.streams) > 0 {
		if err = sc.w.flush(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-hb.C:
			sc.w.comment("ping")
		case <-sc.userWake:
			err = sc.each(ctx, recheck)
		case <-sc.recheck:
			err = sc.each(ctx, recheck)
		case <-sc.ready:
			// The listener wakes in commit order, so a grant change that
			// committed before what the tail read is signalled already:
			// honour it before sending events it may hide.
			select {
			case <-sc.userWake:
				err = sc.each(ctx, recheck)
			default:
			}
			if err == nil {
				err = sc.each(ctx, func(s *stream) error { return s.handOver(ctx) })
			}
		}
		hb.Reset(heartbeatIn(sc.h.cfg.Stream.Heartbeat, time.Since(beatEpoch)))
	}
	if err == nil {
		err = sc.w.flush()
	}
	return err
}

// each runs f for every run's stream. A stream whose run has finished, or
// that f ends with a closeReason, gets the close event and leaves; any
// other error ends the connection.
func (sc *streamConn) each(ctx context.Context, f func(*stream) error) error {
	live := sc.streams[:0]
	for i, s := range sc.streams {
		err := f(s)
		if err == nil && s.finished {
			err = closeFinished
		}
		var reason closeReason
		switch {
		case errors.As(err, &reason):
			err = s.close(ctx, reason)
			s.leave()
		case err == nil:
			live = append(live, s)
		}
		if err != nil {
			// What is not yet handled stays joined, for end to leave.
			sc.streams = append(live, sc.streams[i+1:]...)
			return err
		}
	}
	sc.streams = live
	return nil
}

// close sends the close event for the stream's reason.
func (s *stream) close(ctx context.Context, reason closeReason) error {
	data, err := s.f.closing(ctx, reason)
	if err != nil {
		return err
	}
	s.message("close", -1, data)
	return nil
}

// message writes one event; its id is the seq (none below 0), after the
// run's prefix on a connection of several runs.
func (s *stream) message(name string, seq int64, data []byte) {
	id := s.idPrefix
	if seq >= 0 {
		id += strconv.FormatInt(seq, 10)
	}
	s.w.event(name, id, data)
}

// streamRuns is GET /streams?run=ID:AFTER&run=ID:AFTER…: the run page's
// HTML streams of several runs over one connection, so the tabs of one
// browser share one of its six HTTP/1.1 connections per origin
// (static/tabs.js). Each run counts against the caps as a stream; a
// message's id is "RUN:SEQ" (a close event's "RUN:").
func (h *Handler) streamRuns(c echo.Context) error {
	f := htmlStream{}
	if currentUser(c) == nil {
		return h.refuseStream(c, f, closeSignedOut)
	}
	specs := c.QueryParams()["run"]
	if len(specs) == 0 || len(specs) > h.cfg.Stream.MaxPerUser {
		return echo.NewHTTPError(http.StatusBadRequest,
			fmt.Sprintf("Name between 1 and %d runs, each as run=ID:AFTER.", h.cfg.Stream.MaxPerUser))
	}
	sc := h.newStreamConn(c, f)
	defer sc.end()
	var denied []uuid.UUID
	seen := map[uuid.UUID]bool{}
	for _, spec := range specs {
		idText, cursor, _ := strings.Cut(spec, ":")
		id, err := uuid.Parse(idText)
		if err != nil || seen[id] {
			continue
		}
		seen[id] = true
		run, hasApproval, err := h.store.RunForAccess(c.Request().Context(), id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		access := AccessNone
		if err == nil {
			access = h.accessTo(sc.u, run, hasApproval)
		}
		if access == AccessNone {
			denied = append(denied, id)
			continue
		}
		if refused := sc.add(run, access, cursor, id.String()+":"); refused != "" {
			return h.refuseBusy(c, f, refused)
		}
	}
	sc.denied = denied
	return sc.serve()
}
