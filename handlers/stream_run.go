package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// A run's streams are adapters of the engine's log stream (handlers/stream):
// GET /runs/{id}/events sends the run page's HTML fragments for
// htmx-ext-sse, GET /api/runs/{id}/stream the event JSON, and GET /streams
// the HTML of several runs over one connection; a request's streams carry
// its whole family (stream_family.go). Here is only what is
// theirs: who may see the run (loadRun, accessTo), and what each viewer is
// sent (runView with a streamFormat).

// streamRunPage is GET /runs/{id}/events: HTML fragments for the run page.
func (h *Handler) streamRunPage(c echo.Context) error { return h.serveStream(c, htmlStream{}) }

// apiStreamEvents is GET /api/runs/{id}/stream: data: is the event JSON.
func (h *Handler) apiStreamEvents(c echo.Context) error { return h.serveStream(c, jsonStream{}) }

func (h *Handler) serveStream(c echo.Context, f streamFormat) error {
	run, access, err := h.loadRun(c)
	if err != nil {
		if f.answersDenialInStream() && errors.Is(err, store.ErrNotFound) {
			reason := stream.Denied
			if currentUser(c) == nil {
				reason = stream.SignedOut
			}
			return h.refuseStream(c, f, reason)
		}
		return err
	}
	if run.IsParent() {
		return h.serveFamilyStream(c, f, run, access)
	}
	u := currentUser(c)
	sc := h.engine.NewConn(c, u.ID)
	defer sc.End()
	if refused := h.addRun(c, sc, f, u, run, access, cursorParam(c), ""); refused != "" {
		return h.refuseBusy(c, f, refused)
	}
	return sc.Serve()
}

// addRun adds run's stream, as u may see it, to the connection.
func (h *Handler) addRun(c echo.Context, sc *stream.Conn, f streamFormat, u *store.User, run *store.Run, access Access, cursor, idPrefix string) stream.Refused {
	cred := h.streamCredential(c, run.ID)
	v := &runView{h: h, f: f, cred: cred, viewer: viewerOf(c, u, run, access), access: access}
	return sc.AddRun(run, cred, int(access), cursor, idPrefix, v)
}

// streamRuns is GET /streams?run=ID:AFTER&run=ID:AFTER…: the run page's
// HTML streams of several runs over one connection, so the tabs of one
// browser share one of its six HTTP/1.1 connections per origin
// (static/tabs.js). Each run counts against the caps as a stream; a
// message's id is "RUN:SEQ" (a close event's "RUN:").
func (h *Handler) streamRuns(c echo.Context) error {
	f := htmlStream{}
	u := currentUser(c)
	if u == nil {
		return h.refuseStream(c, f, stream.SignedOut)
	}
	specs := c.QueryParams()["run"]
	if max := h.engine.Config().MaxPerUser; len(specs) == 0 || len(specs) > max {
		return echo.NewHTTPError(http.StatusBadRequest,
			fmt.Sprintf("Name between 1 and %d runs, each as run=ID:AFTER.", max))
	}
	sc := h.engine.NewConn(c, u.ID)
	defer sc.End()
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
			access = h.accessTo(u, run, hasApproval)
		}
		if access == AccessNone {
			data, err := f.closing(c.Request().Context(), stream.Denied)
			if err != nil {
				return err
			}
			sc.Deny(id.String()+":", data)
			continue
		}
		if run.IsParent() {
			// A request's page follows its whole family, with a family
			// cursor, on its own stream (GET /runs/{id}/events); here it
			// would be followed as a lone run, without its refunds.
			data, err := renderBytes(c.Request().Context(), views.StreamClose(langOf(c).T(keyRequestOwnStream), true))
			if err != nil {
				return err
			}
			sc.Deny(id.String()+":", data)
			continue
		}
		if refused := h.addRun(c, sc, f, u, run, access, cursor, id.String()+":"); refused != "" {
			return h.refuseBusy(c, f, refused)
		}
	}
	return sc.Serve()
}

// keyRequestOwnStream is why GET /streams does not follow a request.
const keyRequestOwnStream = "refuse.request_own_stream"

// refuseStream answers a stream the viewer may not have with the close
// event, so the browser stops asking.
func (h *Handler) refuseStream(c echo.Context, f streamFormat, reason stream.Reason) error {
	data, err := f.closing(c.Request().Context(), reason)
	if err != nil {
		return err
	}
	return h.engine.Answer(c, 0, "close", data)
}

// streamCredential is what a stream's user is found by again: the bearer
// token it came with, or its session; runID is its run (uuid.Nil for none).
func (h *Handler) streamCredential(c echo.Context, runID uuid.UUID) store.StreamCredential {
	if token, ok := c.Get(ctxToken).(string); ok {
		return store.StreamCredential{Token: token, RunID: runID}
	}
	if pre, ok := c.Get(ctxRunForAccess).(runForAccess); ok && pre.sessionID != "" {
		return store.StreamCredential{SessionID: pre.sessionID, RunID: runID}
	}
	return store.StreamCredential{SessionID: h.sessionID(c), RunID: runID}
}

// cursorParam is the cursor a stream request carries. Last-Event-ID wins
// over ?after=: a browser's own reconnect goes to the original URL, whose
// after= is stale by then.
func cursorParam(c echo.Context) string {
	if id := strings.TrimSpace(c.Request().Header.Get("Last-Event-ID")); id != "" {
		return id
	}
	return queryValue(c, "after")
}

// runView is what one viewer of a run's stream has been shown, and says
// what they are sent next (stream.RunView).
type runView struct {
	h      *Handler
	f      streamFormat
	cred   store.StreamCredential
	viewer views.Viewer // as a viewer with full access
	access Access
	v      *views.RunView
}

var _ stream.RunView = (*runView)(nil)

func (r *runView) Head(ctx context.Context, run *store.Run) (*store.Snapshot, error) {
	if !r.f.rendersPage() {
		// The JSON stream shows events and the state they lead to, nothing
		// of the page: the run as loadRun read it is its start.
		return &store.Snapshot{Run: run, CoveringSeq: run.LastSeq, ReplayFloor: run.ReplayFloor}, nil
	}
	return r.h.store.SnapshotHead(ctx, run.ID)
}

func (r *runView) Begin(head *store.Snapshot) {
	r.v = views.NewRunView(head, r.access == AccessFull, r.viewerNow())
	// The stream sends history piece by piece; it never holds it.
	r.v.Narration, r.v.Timeline = nil, nil
}

func (r *runView) Reset(ctx context.Context, snap *store.Snapshot, banner bool) ([]byte, error) {
	r.v = views.NewRunView(snap, r.access == AccessFull, r.viewerNow())
	data, err := r.f.reset(views.WithLang(ctx, r.viewer.Lang), r.v, snap, r.access, banner)
	r.v.Narration, r.v.Timeline = nil, nil
	return data, err
}

func (r *runView) Event(ctx context.Context, ev store.Event, frames *stream.Frames) (string, []byte, error) {
	if r.access != AccessFull && ev.Type == store.EventNarrationDelta {
		return "", nil, nil
	}
	r.v.Apply(ev)
	return r.f.event(views.WithLang(ctx, r.viewer.Lang), r.v, ev, frames)
}

// Recheck reloads the user through the credential the stream came with (a
// logged-out session or a revoked token no longer works) and decides their
// access to the run again, as loadRun does for every request.
func (r *runView) Recheck(ctx context.Context) (int, error) {
	now, err := r.h.streamAccess(ctx, r.cred)
	if err != nil {
		return 0, err
	}
	r.access = now
	return int(now), nil
}

// streamAccess decides a stream's access again through its credential:
// the access now, or why the stream ends (SignedOut, Denied) as the error.
func (h *Handler) streamAccess(ctx context.Context, cred store.StreamCredential) (Access, error) {
	now, signedOut, err := h.recheckAccess(ctx, cred)
	switch {
	case err != nil:
		return 0, err
	case signedOut:
		return 0, stream.SignedOut
	case now == AccessNone:
		return 0, stream.Denied
	}
	return now, nil
}

func (r *runView) Closing(ctx context.Context, reason stream.Reason) ([]byte, error) {
	return r.f.closing(views.WithLang(ctx, r.viewer.Lang), reason)
}

// viewerNow is the viewer as their access allows now.
func (r *runView) viewerNow() views.Viewer { return limitedViewer(r.viewer, r.access) }

// limitedViewer is full (a viewer with full access) as access allows.
func limitedViewer(full views.Viewer, access Access) views.Viewer {
	if access != AccessFull {
		// Who is looking stays the same: their own decisions still read
		// "you"; only what they may do goes.
		return views.Viewer{UserID: full.UserID, Staff: full.Staff, Lang: full.Lang}
	}
	return full
}

// recheckAccess reloads the user through the credential the stream came
// with and decides their access to its run again. signedOut: the
// credential no longer works.
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

// recheckStreams re-reads, in one query, what the access of every open run
// stream depends on, and wakes the streams whose access that changes: they
// decide it again themselves (runView.Recheck), through the same path as a
// request. Idle streams so cost one query per interval between them.
func (h *Handler) recheckStreams(ctx context.Context, subs []*stream.Sub) {
	creds := make([]store.StreamCredential, len(subs))
	for i, s := range subs {
		creds[i] = s.Cred
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
		if int(now) != subs[i].Access() {
			subs[i].Recheck()
		}
	}
}

// streamFormat renders what a run's stream sends.
type streamFormat interface {
	// event renders one event for a viewer with the view v (already moved
	// past ev); nil data sends nothing. What does not depend on the viewer
	// is encoded once, through frames.
	event(ctx context.Context, v *views.RunView, ev store.Event, frames *stream.Frames) (name string, data []byte, err error)
	reset(ctx context.Context, v *views.RunView, snap *store.Snapshot, access Access, banner bool) ([]byte, error)
	closing(ctx context.Context, r stream.Reason) ([]byte, error)
	// answersDenialInStream: a browser's stream must end a denial with the
	// close event (any error status makes the SSE extension retry forever);
	// a program gets the plain 404.
	answersDenialInStream() bool
	// rendersPage: the format renders the run page's parts, which need the
	// snapshot's head (approval, ledger, marks) to start a resumed stream.
	rendersPage() bool
}

var (
	_ streamFormat = htmlStream{}
	_ streamFormat = jsonStream{}
)

// closeMessage is what a person reads when a run's stream ends, in l.
func closeMessage(r stream.Reason, l views.Lang) string {
	switch r {
	case stream.Denied:
		return l.T("refuse.run_denied")
	case stream.SignedOut:
		return l.T("refuse.run_signed_out")
	case stream.Restarting:
		return l.T("refuse.run_restarting")
	}
	return l.T("run.finished")
}

// htmlStream sends the run page's own components as out-of-band swaps.
type htmlStream struct{}

func (htmlStream) answersDenialInStream() bool { return true }
func (htmlStream) rendersPage() bool           { return true }

func (htmlStream) event(ctx context.Context, v *views.RunView, ev store.Event, frames *stream.Frames) (string, []byte, error) {
	render := func() ([]byte, error) { return renderBytes(ctx, views.StreamEvent(v, ev)) }
	if ev.Type == store.EventNarrationDelta && v.Full && v.ShowsNarration(ev) {
		// A narration chunk reads the same to everyone who sees it in one
		// language (its frame is shared per language); a business event's
		// panels are in each viewer's words.
		data, err := frames.Get("html narration "+v.Viewer.Lang.Tag.String(), render)
		return "", data, err
	}
	data, err := render()
	return "", data, err
}

func (htmlStream) reset(ctx context.Context, v *views.RunView, _ *store.Snapshot, _ Access, banner bool) ([]byte, error) {
	return renderBytes(ctx, views.StreamReset(v, banner))
}

func (htmlStream) closing(ctx context.Context, r stream.Reason) ([]byte, error) {
	if r == stream.Restarting {
		return renderBytes(ctx, views.StreamRestarting())
	}
	return renderBytes(ctx, views.StreamClose(closeMessage(r, views.LangFrom(ctx)), r != stream.Finished))
}

// jsonStream sends the event JSON of DESIGN.md; a status-only viewer gets
// event: status with the run's state and final message instead.
type jsonStream struct{}

func (jsonStream) answersDenialInStream() bool { return false }
func (jsonStream) rendersPage() bool           { return false }

func (jsonStream) event(ctx context.Context, v *views.RunView, ev store.Event, frames *stream.Frames) (string, []byte, error) {
	if v.Full {
		b, err := frames.Get("json", func() ([]byte, error) { return json.Marshal(ev) })
		return "", b, err
	}
	var final *string
	if text := v.Progress.Answer(views.LangFrom(ctx).Tag.String()); text != "" {
		final = &text
	}
	b, err := json.Marshal(apiStatusSnapshot{Access: "status", Run: apiStatusOfRun{ID: v.Run.ID, State: v.State}, FinalMessage: final})
	return "status", b, err
}

func (jsonStream) reset(ctx context.Context, _ *views.RunView, snap *store.Snapshot, access Access, _ bool) ([]byte, error) {
	return json.Marshal(newAPISnapshot(snap, access, views.LangFrom(ctx)))
}

func (jsonStream) closing(ctx context.Context, r stream.Reason) ([]byte, error) {
	return json.Marshal(map[string]string{"reason": r.String(), "message": closeMessage(r, views.LangFrom(ctx))})
}
