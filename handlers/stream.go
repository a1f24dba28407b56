package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
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
//     read again from the last seq sent: what is sent always comes from the
//     store, in order, once per connection;
//  4. a cursor that is expired, invalid or from the future gets event: reset
//     with a fresh snapshot, and the stream goes on after its covering seq;
//  5. a finished run, once everything is sent, and a denied viewer get the
//     named event "close", which htmx-ext-sse's sse-close stops on.
//
// A reader goroutine does the store reads and access re-checks and fills
// the subscriber's bounded outbox; the handler's goroutine writes.

// closeReason says why a stream ends for good.
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

// streamFormat renders what a stream sends.
type streamFormat interface {
	// event renders one event for a viewer with the view v (already moved
	// past ev); nil data sends nothing.
	event(ctx context.Context, v *views.RunView, ev store.Event) (name string, data []byte, err error)
	reset(ctx context.Context, v *views.RunView, snap *store.Snapshot, access Access, banner bool) ([]byte, error)
	closing(ctx context.Context, r closeReason) ([]byte, error)
	// answersDenialInStream: a browser's stream must end a denial with the
	// close event (any error status makes the SSE extension retry forever);
	// a program gets the plain 404.
	answersDenialInStream() bool
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
	cursor, cursorOK := streamCursor(c.Request())

	ctx, cancel := context.WithCancelCause(c.Request().Context())
	defer cancel(nil)
	stopOnShutdown := context.AfterFunc(h.streams.ctx, func() { cancel(context.Cause(h.streams.ctx)) })
	defer stopOnShutdown()

	// Subscribe before the first read: whatever commits from here on
	// either is in that read or wakes us for the next one.
	runWake, userWake, unsubscribe := h.subscribe(run.ID.String(), u.ID)
	defer unsubscribe()
	// A stream that resumes from a cursor takes the events from the log;
	// only one that must start over (reset) needs the whole snapshot.
	snapshot := h.store.SnapshotHead
	if !cursorOK {
		snapshot = h.store.Snapshot
	}
	snap, err := snapshot(ctx, run.ID)
	if err != nil {
		return err
	}

	w, err := openStream(c, h.streams.cfg)
	if err != nil {
		return err
	}
	s := &stream{h: h, c: c, f: f, cfg: h.streams.cfg, runID: run.ID, out: newOutbox(h.streams.cfg), w: w}
	viewer := viewerOf(u, run, access)
	s.viewer = viewer

	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.read(ctx, cursor, cursorOK, access, snap, runWake, userWake); err != nil {
			cancel(err)
			if errors.Is(err, errSlowReader) {
				// Unblock a write stuck on a client that does not read.
				w.abort()
			}
		}
	})
	v := views.NewRunView(snap, access == AccessFull, viewer)
	// The stream sends history piece by piece; it never holds it.
	v.Narration, v.Timeline = nil, nil
	err = s.write(ctx, v)
	cancel(err)
	wg.Wait()
	switch {
	case err == nil, errors.Is(err, errShuttingDown), c.Request().Context().Err() != nil:
		return nil
	case errors.Is(err, errSlowReader):
		h.log.Info("stream closed: subscriber too slow", "run", run.ID)
		return nil
	}
	// Mostly clients gone mid-write; they reconnect and replay.
	h.log.Info("stream ended", "run", run.ID, "err", err)
	return nil
}

// refuseStream answers a stream the viewer may not have with the close
// event, so the browser stops asking.
func (h *Handler) refuseStream(c echo.Context, f streamFormat, reason closeReason) error {
	w, err := openStream(c, h.streams.cfg)
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

// read is the reader goroutine: it replays from the store, goes live on
// wake-ups and re-checks access, queueing what the writer sends. It returns
// nil once it has queued the close event.
func (s *stream) read(ctx context.Context, cursor int64, cursorOK bool, access Access, snap *store.Snapshot,
	runWake, userWake <-chan struct{}) error {
	recheck := time.NewTicker(s.cfg.Recheck)
	defer recheck.Stop()
	var poll <-chan time.Time
	if s.h.cfg.Listener == nil {
		t := time.NewTicker(s.cfg.Poll)
		defer t.Stop()
		poll = t.C
	}
	// finished: the log is complete as of the last read.
	finished := store.Terminal(snap.Run.State)
	reset := func(snap *store.Snapshot, banner bool) error {
		cursor = snap.CoveringSeq
		finished = store.Terminal(snap.Run.State)
		return s.out.push(ctx, item{kind: itemReset, snap: snap, access: access, banner: banner})
	}
	fresh := func(banner bool) error {
		snap, err := s.h.store.Snapshot(ctx, s.runID)
		if err != nil {
			return err
		}
		return reset(snap, banner)
	}
	closeWith := func(r closeReason) error { return s.out.push(ctx, item{kind: itemClose, reason: r}) }

	if !cursorOK {
		if err := reset(snap, true); err != nil {
			return err
		}
	}
	for {
		evs, err := s.h.store.EventsAfter(ctx, s.runID, cursor, s.cfg.PageSize)
		switch code := store.ErrorCode(err); {
		case code == store.CodeCursorExpired || code == store.CodeCursorInvalid:
			if err := fresh(true); err != nil {
				return err
			}
			continue
		case errors.Is(err, store.ErrNotFound):
			return closeWith(closeDenied)
		case err != nil:
			return err
		}
		for _, ev := range evs {
			cursor = ev.Seq
			switch ev.Type {
			case store.EventRunCompleted, store.EventRunFailed, store.EventRunCanceled:
				finished = true
			}
			if access != AccessFull && ev.Type == store.EventNarrationDelta {
				continue
			}
			if err := s.out.push(ctx, item{kind: itemEvent, ev: ev}); err != nil {
				return err
			}
		}
		if len(evs) == s.cfg.PageSize {
			continue // more to replay
		}
		if finished {
			return closeWith(closeFinished)
		}
		recheckNow := false
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-runWake:
		case <-poll:
		case <-userWake:
			recheckNow = true
		case <-recheck.C:
			recheckNow = true
		}
		if !recheckNow {
			continue
		}
		now, signedOut, err := s.h.recheckAccess(s.c)
		switch {
		case err != nil:
			return err
		case signedOut:
			return closeWith(closeSignedOut)
		case now == AccessNone:
			return closeWith(closeDenied)
		case now != access:
			// Less (or more) may be shown now: replace the page's body
			// with a snapshot of what is allowed, and go on after it.
			access = now
			if err := fresh(false); err != nil {
				return err
			}
		}
	}
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

// mergeNarration joins two narration deltas into one, numbered as the
// later one, so a subscriber that fell behind gets fewer, larger messages.
func mergeNarration(a, b item) item {
	var pa, pb struct {
		Text          string `json:"text"`
		CoalescedFrom int64  `json:"coalesced_from,omitempty"`
	}
	_ = json.Unmarshal(a.ev.Payload, &pa)
	_ = json.Unmarshal(b.ev.Payload, &pb)
	from := pa.CoalescedFrom
	if from == 0 {
		from = a.ev.Seq
	}
	pb.Text = pa.Text + pb.Text
	pb.CoalescedFrom = from
	payload, _ := json.Marshal(pb)
	out := b
	out.ev.Payload = payload
	return out
}

// sseWriter frames Server-Sent Events into a buffer and writes it out with
// a deadline, flushing through the ResponseController (which reports
// errors, unlike echo's Flush).
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
}

// openStream sends the stream's headers and the retry hint at once, so the
// browser's EventSource opens.
func openStream(c echo.Context, cfg *StreamConfig) (*sseWriter, error) {
	res := c.Response()
	hdr := res.Header()
	hdr.Set(echo.HeaderContentType, "text/event-stream; charset=utf-8")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w := &sseWriter{w: res, rc: http.NewResponseController(res.Writer), timeout: cfg.SlowAfter}
	// The server may have a WriteTimeout; a stream lives longer.
	if err := w.rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, err
	}
	res.WriteHeader(http.StatusOK)
	w.buf.WriteString("retry: " + strconv.FormatInt(cfg.Retry.Milliseconds(), 10) + "\n\n")
	return w, w.flush()
}

// message frames one event: every line of data gets its own data: field.
// id < 0 sends no id (the browser keeps its last one).
func (w *sseWriter) message(event string, id int64, data []byte) {
	if event != "" {
		w.buf.WriteString("event: " + event + "\n")
	}
	if id >= 0 {
		w.buf.WriteString("id: " + strconv.FormatInt(id, 10) + "\n")
	}
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	data = bytes.ReplaceAll(data, []byte("\r"), []byte("\n"))
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		w.buf.WriteString("data: ")
		w.buf.Write(line)
		w.buf.WriteByte('\n')
	}
	w.buf.WriteByte('\n')
}

func (w *sseWriter) comment(text string) { w.buf.WriteString(": " + text + "\n\n") }

func (w *sseWriter) flush() error {
	if w.buf.Len() == 0 {
		return nil
	}
	if err := w.rc.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	_, err := w.w.Write(w.buf.Bytes())
	w.buf.Reset()
	if err != nil {
		return err
	}
	if err := w.rc.Flush(); err != nil {
		return err
	}
	return w.rc.SetWriteDeadline(time.Time{})
}

// abort makes a write blocked on a client that does not read fail now.
func (w *sseWriter) abort() { _ = w.rc.SetWriteDeadline(time.Now()) }

// htmlStream sends the run page's own components as out-of-band swaps.
type htmlStream struct{}

var (
	_ streamFormat = htmlStream{}
	_ streamFormat = jsonStream{}
)

func (htmlStream) answersDenialInStream() bool { return true }

func (htmlStream) event(ctx context.Context, v *views.RunView, ev store.Event) (string, []byte, error) {
	if ev.Type == store.EventNarrationDelta && !v.Full {
		return "", nil, nil
	}
	var buf bytes.Buffer
	if err := views.StreamEvent(v, ev).Render(ctx, &buf); err != nil {
		return "", nil, err
	}
	return "", buf.Bytes(), nil
}

func (htmlStream) reset(ctx context.Context, v *views.RunView, _ *store.Snapshot, _ Access, banner bool) ([]byte, error) {
	var buf bytes.Buffer
	err := views.StreamReset(v, banner).Render(ctx, &buf)
	return buf.Bytes(), err
}

func (htmlStream) closing(ctx context.Context, r closeReason) ([]byte, error) {
	var buf bytes.Buffer
	err := views.StreamClose(r.message(), r != closeFinished).Render(ctx, &buf)
	return buf.Bytes(), err
}

// jsonStream sends the event JSON of DESIGN.md; a status-only viewer gets
// event: status with the run's state and final message instead.
type jsonStream struct{}

func (jsonStream) answersDenialInStream() bool { return false }

func (jsonStream) event(_ context.Context, v *views.RunView, ev store.Event) (string, []byte, error) {
	if v.Full {
		b, err := json.Marshal(ev)
		return "", b, err
	}
	if ev.Type == store.EventNarrationDelta {
		return "", nil, nil
	}
	var final *string
	if v.FinalMessage != "" {
		final = &v.FinalMessage
	}
	b, err := json.Marshal(apiStatusSnapshot{Access: "status", Run: apiStatusOfRun{ID: v.Run.ID, State: v.State}, FinalMessage: final})
	return "status", b, err
}

func (jsonStream) reset(_ context.Context, _ *views.RunView, snap *store.Snapshot, access Access, _ bool) ([]byte, error) {
	return json.Marshal(newAPISnapshot(snap, access))
}

func (jsonStream) closing(_ context.Context, r closeReason) ([]byte, error) {
	return json.Marshal(map[string]string{"reason": r.String(), "message": r.message()})
}
