package handlers

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// A request (a family's parent run) is watched as one: its page shows the
// request and a card per refund, from one family snapshot, and its
// streams (GET /runs/{parent}/events for the page, GET
// /api/runs/{parent}/stream for programs) carry the logs of the parent and
// of every child over one connection, each message's id being the family
// cursor (handlers/stream/family.go). Access to the family is access to
// the parent, decided once for all of it.

// showFamilyPage is GET /runs/{parent}: the request as of one family
// snapshot, whose statements do not grow with the children; the stream
// continues every run strictly after its part of the page's cursor.
func (h *Handler) showFamilyPage(c echo.Context, run *store.Run, access Access) error {
	fs, err := h.store.SnapshotFamily(c.Request().Context(), run.ID)
	if err != nil {
		return err
	}
	u := currentUser(c)
	f := views.NewFamilyView(fs, access == AccessFull, viewerOf(c, u, run, access))
	f.Answer = h.takeAnswer(c, run.ID)
	if f.Retries, err = h.store.RetriesOf(c.Request().Context(), fs.Parent.Run); err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, http.StatusOK, views.FamilyPage(u, f))
}

// serveFamilyStream is a request's stream in format f: one family
// snapshot gives every run's start (each run's own cursor, from the
// family cursor, decides whether it resumes after it or starts over).
func (h *Handler) serveFamilyStream(c echo.Context, f streamFormat, run *store.Run, access Access) error {
	fs, err := h.store.SnapshotFamily(c.Request().Context(), run.ID)
	if err != nil {
		return err
	}
	snaps := append([]*store.Snapshot{fs.Parent}, fs.Children...)
	cursors, err := stream.ParseFamilyCursor(cursorParam(c), len(snaps))
	if err != nil {
		if f.answersDenialInStream() {
			return echo.NewHTTPError(http.StatusBadRequest, sentence(err.Error()))
		}
		return apiRefuse(c, store.CodeCursorInvalid, err)
	}
	u := currentUser(c)
	viewer := viewerOf(c, u, run, access)
	fam := &familyStream{h: h, f: f, cred: h.streamCredential(c, run.ID), viewer: viewer, access: access,
		view: views.NewFamilyView(fs, access == AccessFull, viewer)}
	runs := make([]*store.Run, len(snaps))
	members := make([]stream.RunView, len(snaps))
	for i, s := range snaps {
		runs[i] = s.Run
		members[i] = &familyMember{fs: fam, i: i, head: s}
	}
	sc := h.engine.NewConn(c, u.ID)
	defer sc.End()
	if refused := sc.AddFamily(runs, fam.cred, int(access), cursors, members); refused != "" {
		return h.refuseBusy(c, f, refused)
	}
	return sc.Serve()
}

// familyStream is what one viewer of a family's stream has been shown.
type familyStream struct {
	h      *Handler
	f      streamFormat
	cred   store.StreamCredential // the parent's: the family's access is its
	viewer views.Viewer           // as a viewer with full access
	access Access
	view   *views.FamilyView // every run's view, which the page's words come from
	// actions is what the page's decisions were last drawn for
	// (views.FamilyView.ActionsKey); "" until the stream draws them, so
	// its first message draws them as they are now.
	actions string
}

// actionsChanged says whether the page's decisions must be drawn again,
// and notes them as drawn.
func (fs *familyStream) actionsChanged() bool {
	key := fs.view.ActionsKey()
	changed := key != fs.actions
	fs.actions = key
	return changed
}

// familyMember is the stream of one run of the family (view.Runs[i]).
type familyMember struct {
	fs   *familyStream
	i    int
	head *store.Snapshot // the run's part of the family snapshot
}

var _ stream.RunView = (*familyMember)(nil)

// Head is the run's part of the family snapshot: every run's start was
// read in one transaction, not one read per run.
func (m *familyMember) Head(context.Context, *store.Run) (*store.Snapshot, error) {
	return m.head, nil
}

func (m *familyMember) Begin(head *store.Snapshot) {
	m.adopt(head)
}

// adopt makes snap what this run's part of the page shows.
func (m *familyMember) adopt(snap *store.Snapshot) *views.RunView {
	v := views.NewRunView(snap, m.fs.access == AccessFull, limitedViewer(m.fs.viewer, m.fs.access))
	v.Narration, v.Timeline = nil, nil
	m.fs.view.Runs[m.i] = v
	return v
}

func (m *familyMember) Reset(ctx context.Context, snap *store.Snapshot, banner bool) ([]byte, error) {
	ctx = views.WithLang(ctx, m.fs.view.Parent().Viewer.Lang)
	m.adopt(snap)
	m.fs.view.Offline[m.i] = banner
	if !m.fs.f.rendersPage() {
		return json.Marshal(newAPISnapshot(snap, m.fs.access, views.LangFrom(ctx)))
	}
	m.fs.actionsChanged()
	return renderBytes(ctx, views.FamilyStreamReset(m.fs.view, m.i))
}

func (m *familyMember) Event(ctx context.Context, ev store.Event, frames *stream.Frames) (string, []byte, error) {
	ctx = views.WithLang(ctx, m.fs.view.Parent().Viewer.Lang)
	if m.fs.access != AccessFull && ev.Type == store.EventNarrationDelta {
		return "", nil, nil
	}
	v := m.fs.view.Runs[m.i]
	v.Apply(ev)
	if !m.fs.f.rendersPage() {
		return m.fs.f.event(ctx, v, ev, frames)
	}
	if ev.Type == store.EventNarrationDelta {
		return "", nil, nil // the request's page shows no narration
	}
	data, err := renderBytes(ctx, views.FamilyStreamEvent(m.fs.view, m.i, m.fs.actionsChanged()))
	return "", data, err
}

// Recheck decides the family's access again, as a request for the parent
// would (the engine asks the parent's member only, for the whole family).
func (m *familyMember) Recheck(ctx context.Context) (int, error) {
	now, err := m.fs.h.streamAccess(ctx, m.fs.cred)
	if err != nil {
		return 0, err
	}
	m.fs.access = now
	return int(now), nil
}

func (m *familyMember) Closing(ctx context.Context, r stream.Reason) ([]byte, error) {
	ctx = views.WithLang(ctx, m.fs.view.Parent().Viewer.Lang)
	if r == stream.Finished && m.fs.f.rendersPage() {
		return renderBytes(ctx, views.StreamClose(views.RequestFinished, false))
	}
	return m.fs.f.closing(ctx, r)
}
