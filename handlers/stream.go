package handlers

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// The streams: GET /runs/{id}/events sends HTML fragments for htmx-ext-sse,
// GET /api/runs/{id}/stream sends the event JSON. Both follow one plan:
//
//  1. check access (loadRun) before reading anything, on every request, and
//     the caps (open_streams.go): a refused stream is told when to retry;
//  2. join the run's shared tail (tail.go) BEFORE the first read, so
//     whatever commits from then on is either in that read or in a page
//     the tail hands over;
//  3. replay seq > cursor from the store in pages, then send what the tail
//     hands over, in seq order, each seq once: what is sent always comes
//     from the store, and a gap in what the tail handed over is read from
//     the store again;
//  4. a cursor that is expired, invalid or from the future gets event: reset
//     with a fresh snapshot, and the stream goes on after its covering seq;
//  5. a finished run, once everything is sent, and a denied viewer get the
//     named event "close", which htmx-ext-sse's sse-close stops on.
//
// One goroutine per connection does all of it, for one run or several
// (streamConn, tail_conn.go): the request's until the start is sent, then
// its own once the connection is detached from the HTTP server (sse.go),
// with a second that only reads to see the client go. It waits on the
// tails' hand-overs, the user's grant changes, the batched access
// re-check, the heartbeat and the client going away, and writes (sse.go)
// what the format (stream_format.go) renders.

// StreamConfig tunes the live streams. Zero values take the defaults.
type StreamConfig struct {
	Heartbeat time.Duration // a comment when nothing was sent for this long (up to a quarter more: heartbeatIn); default 15s
	Recheck   time.Duration // every stream's access is re-checked (in one query) this often; default 30s
	Poll      time.Duration // store reads without a Listener; default 1s
	Retry     time.Duration // the SSE retry hint for browsers; default 2s
	// Busy is the retry hint sent with a stream refused at a cap, and the
	// API's Retry-After; default 30s.
	Busy     time.Duration
	PageSize int // events per store read; default 500
	// Buffer and BufferBytes bound what one subscriber may have queued
	// (events, payload bytes). A full buffer coalesces narration; one that
	// still overflows is closed, and the client replays from the store
	// when it reconnects.
	Buffer      int           // default 512
	BufferBytes int           // default 1 MiB
	SlowAfter   time.Duration // the deadline of each write: a client that reads nothing for this long is cut; default 10s
	// MaxPerUser and MaxStreams cap the open streams of one user and of
	// the process (MAX_STREAMS_PER_USER, MAX_STREAMS).
	MaxPerUser int // default 16
	MaxStreams int // default 10000
}

func (c *StreamConfig) fill() {
	c.Heartbeat = cmp.Or(c.Heartbeat, 15*time.Second)
	c.Recheck = cmp.Or(c.Recheck, 30*time.Second)
	c.Poll = cmp.Or(c.Poll, time.Second)
	c.Retry = cmp.Or(c.Retry, 2*time.Second)
	c.Busy = cmp.Or(c.Busy, 30*time.Second)
	c.PageSize = cmp.Or(c.PageSize, 500)
	c.Buffer = cmp.Or(c.Buffer, 512)
	c.BufferBytes = cmp.Or(c.BufferBytes, 1<<20)
	c.SlowAfter = cmp.Or(c.SlowAfter, 10*time.Second)
	c.MaxPerUser = cmp.Or(c.MaxPerUser, 16)
	c.MaxStreams = cmp.Or(c.MaxStreams, 10000)
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
	sc := h.newStreamConn(c, f)
	defer sc.end()
	if refused := sc.add(run, access, cursorParam(c.Request()), ""); refused != "" {
		return h.refuseBusy(c, f, refused)
	}
	return sc.serve()
}

// streamCredential is what the batched re-check finds the stream's user
// by again: the bearer token it came with, or its session.
func (h *Handler) streamCredential(c echo.Context, runID uuid.UUID) store.StreamCredential {
	if token, ok := c.Get(ctxToken).(string); ok {
		return store.StreamCredential{Token: token, RunID: runID}
	}
	sid, _ := h.session(c).Values[keySessionID].(string)
	return store.StreamCredential{SessionID: sid, RunID: runID}
}

// logStreamEnd notes why a stream ended, when it is worth a line.
func (h *Handler) logStreamEnd(runID uuid.UUID, err error) {
	switch {
	case errors.Is(err, errSlowReader):
		// Cut for not reading (counted where the cut was decided).
		h.log.Info("stream closed: subscriber too slow", "run", runID)
	case err == nil, errors.Is(err, errShuttingDown), errors.Is(err, errClientGone), errors.Is(err, context.Canceled):
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
func (h *Handler) findStart(ctx context.Context, f streamFormat, rawCursor string, run *store.Run, access Access) (startPoint, error) {
	b := startPoint{access: access}
	cursor, err := store.ParseCursor(rawCursor)
	if err == nil {
		err = run.CheckCursor(cursor)
	}
	if err != nil {
		b.snap, err = h.store.Snapshot(ctx, run.ID)
		return b, err
	}
	b.cursor, b.resumes = cursor, true
	if !f.rendersPage() {
		// The JSON stream shows events and the state they lead to, nothing
		// of the page: the run as loadRun read it is its start.
		b.snap = &store.Snapshot{Run: run, CoveringSeq: run.LastSeq, ReplayFloor: run.ReplayFloor}
		return b, nil
	}
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

// subscribeUser wakes the stream when the user's grants or sessions
// change. Without a listener the channel never fires and only the batched
// re-check sees such changes.
func (h *Handler) subscribeUser(userID int64) (<-chan struct{}, func()) {
	if h.cfg.Listener == nil {
		return nil, func() {}
	}
	return h.cfg.Listener.Subscribe(store.UserTopic(strconv.FormatInt(userID, 10)))
}

// stream is one open stream: where it is in the run's log and what it
// has shown its viewer.
type stream struct {
	h        *Handler
	f        streamFormat
	cfg      *StreamConfig
	runID    uuid.UUID
	viewer   views.Viewer
	sub      *subscriber
	w        *sseWriter
	run      *store.Run // as loaded for the access check
	cursor0  string     // the cursor it was asked to resume from
	tailFrom int64      // the tail hands over every seq after this (tails.join)
	idPrefix string     // "": ids are seqs; "RUN:" on a connection of several runs
	leave    func()     // leaves the tail and the registry

	v        *views.RunView
	access   Access
	cursor   int64 // the last seq handled: sent, or left out for this viewer
	finished bool  // the run has ended as of cursor
}

// begin sends the start: a reset to the snapshot, or the replay after the
// cursor.
func (s *stream) begin(ctx context.Context, b startPoint) error {
	if !b.resumes {
		metrics.StreamResets.WithLabelValues("cursor").Inc()
		return s.reset(ctx, b.snap, true)
	}
	metrics.StreamReplays.Inc()
	s.v = views.NewRunView(b.snap, s.access == AccessFull, s.viewerFor(s.access))
	// The stream sends history piece by piece; it never holds it.
	s.v.Narration, s.v.Timeline = nil, nil
	s.cursor, s.finished = b.cursor, store.Terminal(b.snap.Run.State)
	if b.cursor == b.snap.CoveringSeq && s.tailFrom <= b.cursor {
		// Nothing to read: the client has everything up to the run's end as
		// read (a page that just loaded, a reconnect with nothing missed),
		// and the tail hands over everything after it.
		return nil
	}
	return s.catchUp(ctx)
}

// catchUp reads the log after the cursor from the store and sends it,
// page by page, until it has caught up.
func (s *stream) catchUp(ctx context.Context) error {
	for {
		evs, err := s.h.store.EventsAfter(ctx, s.runID, s.cursor, s.cfg.PageSize)
		metrics.StreamReads.Inc()
		switch code := store.ErrorCode(err); {
		case err == nil:
		case code == store.CodeCursorExpired || code == store.CodeCursorInvalid:
			// Pruned since the stream started: start over from a snapshot.
			metrics.StreamResets.WithLabelValues("pruned").Inc()
			return s.fresh(ctx, true)
		case errors.Is(err, store.ErrNotFound):
			return closeDenied
		default:
			return err
		}
		for _, ev := range evs {
			if err := s.send(ctx, ev, false); err != nil {
				return err
			}
		}
		if err := s.w.flush(); err != nil {
			return err
		}
		if len(evs) < pageLimitOf(s.cfg.PageSize) {
			return nil
		}
	}
}

func pageLimitOf(n int) int { return min(max(n, 1), store.MaxPage) }

// handOver sends what the tail handed over, in seq order, once each. An
// item that does not follow on from the cursor (a gap, or merged
// narration that overlaps what was sent) is read from the store instead.
func (s *stream) handOver(ctx context.Context) error {
	items, cut := s.sub.out.take()
	if cut != nil {
		return cut
	}
	for _, it := range items {
		var err error
		switch {
		case it.kind == itemResync:
			metrics.StreamResets.WithLabelValues("pruned").Inc()
			err = s.fresh(ctx, true)
		case it.ev.Seq <= s.cursor:
		case it.from != s.cursor+1:
			err = s.catchUp(ctx)
		default:
			err = s.send(ctx, it.ev, true)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// send writes one event for this viewer and moves the cursor past it.
// live: it comes from the tail, so its delivery time is recorded.
func (s *stream) send(ctx context.Context, ev store.Event, live bool) error {
	if ev.Seq <= s.cursor {
		return nil
	}
	s.cursor = ev.Seq
	switch ev.Type {
	case store.EventRunCompleted, store.EventRunFailed, store.EventRunCanceled:
		s.finished = true
	}
	if s.access != AccessFull && ev.Type == store.EventNarrationDelta {
		return nil
	}
	s.v.Apply(ev)
	name, data, err := s.f.event(ctx, s.v, ev)
	if err != nil || data == nil {
		return err
	}
	s.message(name, ev.Seq, data)
	if live {
		metrics.StreamDelivery.Observe(time.Since(ev.CreatedAt).Seconds())
	}
	return nil
}

// recheck decides the viewer's access again: the stream ends, goes on, or
// starts over from a snapshot of what may now be shown.
func (s *stream) recheck(ctx context.Context) error {
	now, signedOut, err := s.h.recheckAccess(ctx, s.sub.cred)
	switch {
	case err != nil:
		return err
	case signedOut:
		return closeSignedOut
	case now == AccessNone:
		return closeDenied
	case now != s.access:
		// Less (or more) may be shown now: replace the page's body with a
		// snapshot of what is allowed, and go on after it.
		s.access = now
		s.sub.access.Store(int32(now))
		metrics.StreamResets.WithLabelValues("access").Inc()
		return s.fresh(ctx, false)
	}
	return nil
}

// fresh sends a new snapshot in place of everything sent so far.
func (s *stream) fresh(ctx context.Context, banner bool) error {
	snap, err := s.h.store.Snapshot(ctx, s.runID)
	if err != nil {
		return err
	}
	return s.reset(ctx, snap, banner)
}

// reset sends snap in place of everything sent so far, and moves the
// cursor to what it covers.
func (s *stream) reset(ctx context.Context, snap *store.Snapshot, banner bool) error {
	s.cursor, s.finished = snap.CoveringSeq, store.Terminal(snap.Run.State)
	s.v = views.NewRunView(snap, s.access == AccessFull, s.viewerFor(s.access))
	data, err := s.f.reset(ctx, s.v, snap, s.access, banner)
	if err != nil {
		return err
	}
	s.v.Narration, s.v.Timeline = nil, nil
	s.message("reset", snap.CoveringSeq, data)
	return nil
}

// recheckAccess reloads the user through the credential the stream came
// with (a logged-out session or a revoked token no longer works) and
// decides their access to the run again, as loadRun does for every
// request. signedOut: the credential no longer works.
func (h *Handler) recheckAccess(ctx context.Context, cred store.StreamCredential) (access Access, signedOut bool, err error) {
	u, err := h.userOf(ctx, cred)
	if errors.Is(err, store.ErrNotFound) {
		return AccessNone, true, nil
	}
	if err != nil {
		return AccessNone, false, err
	}
	run, hasApproval, err := h.store.RunForAccess(ctx, cred.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return AccessNone, false, nil
	}
	if err != nil {
		return AccessNone, false, err
	}
	return h.accessTo(u, run, hasApproval), false, nil
}

// recheckStreams re-reads, in one query, what the access of every open
// stream depends on, and wakes the streams whose access that changes: they
// decide it again themselves, through the same path as a request. Idle
// streams so cost one query per interval between them, not one each.
func (h *Handler) recheckStreams(ctx context.Context, subs []*subscriber) {
	creds := make([]store.StreamCredential, len(subs))
	for i, s := range subs {
		creds[i] = s.cred
	}
	facts, err := h.store.StreamAccess(ctx, creds)
	if err != nil {
		h.log.Warn("stream access re-check failed", "streams", len(subs), "err", err)
		return
	}
	for i, f := range facts {
		now := AccessNone
		if f.User != nil && f.Run != nil {
			now = h.accessTo(f.User, f.Run, f.HasApproval)
		}
		if now != Access(subs[i].access.Load()) {
			signal(subs[i].recheck)
		}
	}
}

func (s *stream) viewerFor(a Access) views.Viewer {
	if a != AccessFull {
		// Who is looking stays the same: their own decisions still read
		// "you"; only what they may do goes.
		return views.Viewer{UserID: s.viewer.UserID, Staff: s.viewer.Staff}
	}
	return s.viewer
}
