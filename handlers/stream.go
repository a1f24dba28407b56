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

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// The streams: GET /runs/{id}/events sends HTML fragments for htmx-ext-sse,
// GET /api/runs/{id}/stream sends the event JSON. Both follow one plan:
//
//  1. check access (loadRun) before reading anything, on every request;
//  2. subscribe to wake-ups BEFORE the first read, so nothing that commits
//     during the replay is missed;
//  3. replay seq > cursor from the store in pages, then after every wake-up
//     read again from the last seq sent (store.Follow): what is sent always
//     comes from the store, in order, once per connection;
//  4. a cursor that is expired, invalid or from the future gets event: reset
//     with a fresh snapshot, and the stream goes on after its covering seq;
//  5. a finished run, once everything is sent, and a denied viewer get the
//     named event "close", which htmx-ext-sse's sse-close stops on.
//
// A reader goroutine does the store reads and access re-checks and fills
// the subscriber's bounded outbox (outbox.go); the handler's goroutine
// writes (sse.go) what the format (stream_format.go) renders.

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

// closeReason says why a stream ends for good. It is also the error the
// reader's wait stops following the log with.
type closeReason int

const (
	closeFinished closeReason = iota
	closeDenied
	closeSignedOut
)

func (r closeReason) String() string {
	switch r {
	case closeDenied:
		return "denied"
	case closeSignedOut:
		return "signed_out"
	}
	return "finished"
}

func (r closeReason) Error() string { return "handlers: stream closes: " + r.String() }

// message is what a person reads when the stream ends.
func (r closeReason) message() string {
	switch r {
	case closeDenied:
		return "This run is not available to you."
	case closeSignedOut:
		return "Your session has ended. Log in again to follow this run."
	}
	return "The run has finished."
}

// streamRunPage is GET /runs/{id}/events: HTML fragments for the run page.
func (h *Handler) streamRunPage(c echo.Context) error { return h.serveStream(c, htmlStream{}) }

// apiStreamEvents is GET /api/runs/{id}/stream: data: is the event JSON.
func (h *Handler) apiStreamEvents(c echo.Context) error { return h.serveStream(c, jsonStream{}) }

func (h *Handler) serveStream(c echo.Context, f streamFormat) error {
	if !h.streams.begin() {
		return echo.NewHTTPError(http.StatusServiceUnavailable)
	}
	defer h.streams.end()

	run, access, err := h.loadRun(c)
	if err != nil {
		if f.answersDenialInStream() && errors.Is(err, store.ErrNotFound) {
			reason := closeDenied
			if currentUser(c) == nil {
				reason = closeSignedOut
			}
			return h.refuseStream(c, f, reason)
		}
		return err
	}
	u := currentUser(c)
	ctx, cancel := context.WithCancelCause(c.Request().Context())
	defer cancel(nil)
	defer h.streams.endOnShutdown(cancel)()

	// Subscribe before the first read: whatever commits from here on
	// either is in that read or wakes us for the next one.
	runWake, userWake, unsubscribe := h.subscribe(run.ID.String(), u.ID)
	defer unsubscribe()
	start, err := h.findStart(ctx, c.Request(), run, access)
	if err != nil {
		return err
	}
	w, err := openStream(c, &h.cfg.Stream)
	if err != nil {
		return err
	}
	s := &stream{h: h, c: c, f: f, cfg: &h.cfg.Stream, runID: run.ID, viewer: viewerOf(u, run, access),
		out: newOutbox(&h.cfg.Stream), w: w}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.read(ctx, start, runWake, userWake); err != nil {
			cancel(err)
			if errors.Is(err, errSlowReader) {
				// Unblock a write stuck on a client that does not read.
				w.abort()
			}
		}
	})
	v := views.NewRunView(start.snap, access == AccessFull, s.viewer)
	// The stream sends history piece by piece; it never holds it.
	v.Narration, v.Timeline = nil, nil
	err = s.write(ctx, v)
	cancel(err)
	wg.Wait()
	h.logStreamEnd(c, run.ID, err)
	return nil
}

// logStreamEnd notes why a stream ended, when it is worth a line.
func (h *Handler) logStreamEnd(c echo.Context, runID uuid.UUID, err error) {
	switch {
	case err == nil, errors.Is(err, errShuttingDown), c.Request().Context().Err() != nil:
	case errors.Is(err, errSlowReader):
		h.log.Info("stream closed: subscriber too slow", "run", runID)
	default:
		// Mostly clients gone mid-write; they reconnect and replay.
		h.log.Info("stream ended", "run", runID, "err", err)
	}
}

// refuseStream answers a stream the viewer may not have with the close
// event, so the browser stops asking.
func (h *Handler) refuseStream(c echo.Context, f streamFormat, reason closeReason) error {
	w, err := openStream(c, &h.cfg.Stream)
	if err != nil {
		return err
	}
	data, err := f.closing(c.Request().Context(), reason)
	if err != nil {
		return err
	}
	w.message("close", -1, data)
	return w.flush()
}

// startPoint is where a stream starts: a snapshot and, when the cursor
// can resume, that cursor.
type startPoint struct {
	snap    *store.Snapshot
	cursor  int64
	resumes bool // false: the stream starts with a reset to snap
	access  Access
}

// findStart judges the cursor against the run loadRun just read, so a
// cursor that cannot resume (malformed, expired, from the future) costs
// one full snapshot read and nothing else. Only one that resumes reads the
// snapshot's head (the state, without the log) and then replays after it;
// if pruning overtakes it meanwhile, the reader falls back to a snapshot.
func (h *Handler) findStart(ctx context.Context, r *http.Request, run *store.Run, access Access) (startPoint, error) {
	b := startPoint{access: access}
	cursor, err := store.ParseCursor(cursorParam(r))
	if err == nil {
		err = run.CheckCursor(cursor)
	}
	if err != nil {
		b.snap, err = h.store.Snapshot(ctx, run.ID)
		return b, err
	}
	b.cursor, b.resumes = cursor, true
	b.snap, err = h.store.SnapshotHead(ctx, run.ID)
	return b, err
}

// cursorParam is the cursor a stream request carries. Last-Event-ID wins
// over ?after=: a browser's own reconnect goes to the original URL, whose
// after= is stale by then.
func cursorParam(r *http.Request) string {
	if id := strings.TrimSpace(r.Header.Get("Last-Event-ID")); id != "" {
		return id
	}
	return r.URL.Query().Get("after")
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

type stream struct {
	h      *Handler
	c      echo.Context
	f      streamFormat
	cfg    *StreamConfig
	runID  uuid.UUID
	viewer views.Viewer
	out    *outbox
	w      *sseWriter
}

// reader is the stream's reader goroutine: it follows the run's log from
// the store, re-checks access, and queues what the writer sends.
type reader struct {
	*stream
	log      *store.Follower
	access   Access
	finished bool // the log is complete as of the last read

	runWake, userWake <-chan struct{}
	poll, recheck     <-chan time.Time
}

// read runs the reader until it has queued the close event (nil) or the
// stream must end (the cause).
func (s *stream) read(ctx context.Context, b startPoint, runWake, userWake <-chan struct{}) error {
	recheck := time.NewTicker(s.cfg.Recheck)
	defer recheck.Stop()
	r := &reader{stream: s, access: b.access, finished: store.Terminal(b.snap.Run.State),
		runWake: runWake, userWake: userWake, recheck: recheck.C}
	if s.h.cfg.Listener == nil {
		poll := time.NewTicker(s.cfg.Poll)
		defer poll.Stop()
		r.poll = poll.C
	}
	r.log = &store.Follower{RunID: s.runID, Cursor: b.cursor, PageSize: s.cfg.PageSize, Deliver: r.deliver, Wait: r.wait}
	if !b.resumes {
		if err := r.reset(ctx, b.snap, true); err != nil {
			return err
		}
	}
	for {
		err := s.h.store.Follow(ctx, r.log)
		var reason closeReason
		switch code := store.ErrorCode(err); {
		case code == store.CodeCursorExpired || code == store.CodeCursorInvalid:
			// Pruned since the stream started: start over from a snapshot.
			if err := r.fresh(ctx, true); err != nil {
				return err
			}
			continue
		case errors.Is(err, store.ErrNotFound):
			reason = closeDenied
		case errors.As(err, &reason):
		default:
			return err
		}
		return s.out.push(ctx, item{kind: itemClose, reason: reason})
	}
}

// deliver queues a page of the log, leaving out what the viewer may not see.
func (r *reader) deliver(ctx context.Context, evs []store.Event) error {
	for _, ev := range evs {
		switch ev.Type {
		case store.EventRunCompleted, store.EventRunFailed, store.EventRunCanceled:
			r.finished = true
		}
		if r.access != AccessFull && ev.Type == store.EventNarrationDelta {
			continue
		}
		if err := r.out.push(ctx, item{kind: itemEvent, ev: ev}); err != nil {
			return err
		}
	}
	return nil
}

// wait returns once the log may have grown or access may have changed. A
// finished run, once everything is sent, and a viewer who lost the run end
// the follow with their closeReason.
func (r *reader) wait(ctx context.Context) error {
	if r.finished {
		return closeFinished
	}
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-r.runWake:
	case <-r.poll:
	case <-r.userWake:
		return r.recheckAccess(ctx)
	case <-r.recheck:
		return r.recheckAccess(ctx)
	}
	// The listener wakes in commit order, so a grant change that committed
	// before what woke us is already signalled: honour it before reading
	// events it may hide (select alone would pick either at random).
	select {
	case <-r.userWake:
		return r.recheckAccess(ctx)
	default:
		return nil
	}
}

// recheckAccess decides the viewer's access again: the stream ends, goes
// on, or starts over from a snapshot of what may now be shown.
func (r *reader) recheckAccess(ctx context.Context) error {
	now, signedOut, err := r.h.recheckAccess(r.c)
	switch {
	case err != nil:
		return err
	case signedOut:
		return closeSignedOut
	case now == AccessNone:
		return closeDenied
	case now != r.access:
		// Less (or more) may be shown now: replace the page's body with a
		// snapshot of what is allowed, and go on after it.
		r.access = now
		return r.fresh(ctx, false)
	}
	return nil
}

// reset queues snap in place of everything sent so far, and moves the
// cursor to what it covers.
func (r *reader) reset(ctx context.Context, snap *store.Snapshot, banner bool) error {
	r.log.Cursor = snap.CoveringSeq
	r.finished = store.Terminal(snap.Run.State)
	return r.out.push(ctx, item{kind: itemReset, snap: snap, access: r.access, banner: banner})
}

func (r *reader) fresh(ctx context.Context, banner bool) error {
	snap, err := r.h.store.Snapshot(ctx, r.runID)
	if err != nil {
		return err
	}
	return r.reset(ctx, snap, banner)
}

// recheckAccess reloads the user through the credential the stream came
// with (reloadUser: a logged-out session or a revoked token no longer
// works) and decides their access again through loadRun, the hook every
// stream request goes through. signedOut: the credential no longer works.
func (h *Handler) recheckAccess(c echo.Context) (access Access, signedOut bool, err error) {
	u, err := h.reloadUser(c)
	if errors.Is(err, store.ErrNotFound) {
		return AccessNone, true, nil
	}
	if err != nil {
		return AccessNone, false, err
	}
	// Only the user: the writer goroutine may be using the request.
	c.Set(ctxUser, u)
	_, access, err = h.loadRun(c)
	if errors.Is(err, store.ErrNotFound) {
		return AccessNone, false, nil
	}
	return access, false, err
}

// write is the writer: it sends what the reader queued, and a heartbeat
// comment when idle. It returns nil after the close event.
func (s *stream) write(ctx context.Context, v *views.RunView) error {
	hb := time.NewTicker(s.cfg.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-hb.C:
			s.w.comment("ping")
		case <-s.out.ready:
			for _, it := range s.out.take() {
				done, err := s.render(ctx, &v, it)
				if err != nil {
					return err
				}
				if done {
					return s.w.flush()
				}
			}
			hb.Reset(s.cfg.Heartbeat)
		}
		if ctx.Err() != nil {
			// Ended meanwhile (a slow reader's abort, shutdown): do not
			// start a write that could wait for the client.
			return context.Cause(ctx)
		}
		if err := s.w.flush(); err != nil {
			return err
		}
	}
}

func (s *stream) render(ctx context.Context, v **views.RunView, it item) (done bool, err error) {
	switch it.kind {
	case itemEvent:
		(*v).Apply(it.ev)
		name, data, err := s.f.event(ctx, *v, it.ev)
		if err != nil || data == nil {
			return false, err
		}
		s.w.message(name, it.ev.Seq, data)
	case itemReset:
		*v = views.NewRunView(it.snap, it.access == AccessFull, s.viewerFor(it.access))
		data, err := s.f.reset(ctx, *v, it.snap, it.access, it.banner)
		if err != nil {
			return false, err
		}
		(*v).Narration, (*v).Timeline = nil, nil
		s.w.message("reset", it.snap.CoveringSeq, data)
	case itemClose:
		data, err := s.f.closing(ctx, it.reason)
		if err != nil {
			return false, err
		}
		s.w.message("close", -1, data)
		return true, nil
	}
	return false, nil
}

func (s *stream) viewerFor(a Access) views.Viewer {
	if a != AccessFull {
		return views.Viewer{}
	}
	return s.viewer
}
