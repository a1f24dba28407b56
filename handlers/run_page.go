package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// showRunPage is GET /runs/{id}: the run as of one snapshot, with the live
// stream continuing strictly after the snapshot's covering seq.
func (h *Handler) showRunPage(c echo.Context) error {
	run, access, err := h.loadRun(c)
	if err != nil {
		return err
	}
	if run.IsParent() {
		return h.showFamilyPage(c, run, access)
	}
	// The latest narration only, the rest on demand: the page links to it.
	ctx := c.Request().Context()
	u := currentUser(c)
	var v *views.RunView
	if c.QueryParam("narration") == "all" {
		snap, err := h.store.Snapshot(ctx, run.ID)
		if err != nil {
			return err
		}
		v = views.NewRunViewAllNarration(snap, access == AccessFull, viewerOf(c, u, run, access))
	} else {
		snap, err := h.store.SnapshotPage(ctx, run.ID, views.NarrationShown)
		if err != nil {
			return err
		}
		v = views.NewRunView(snap, access == AccessFull, viewerOf(c, u, run, access))
	}
	// A decision made without JavaScript comes back here: its answer goes
	// next to the buttons, and is gone at the next render from the log.
	v.Answer = h.takeAnswer(c, run.ID)
	if v.Retries, err = h.store.RetriesOf(ctx, v.Run); err != nil {
		return err
	}
	// The page changes with every event: never serve it from a cache.
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, http.StatusOK, views.RunPage(u, v))
}

// viewerOf says which buttons to offer (the POST handlers decide for
// real), in the language the request's viewer reads.
func viewerOf(c echo.Context, u *store.User, run *store.Run, access Access) views.Viewer {
	v := viewerFor(u, run, access)
	v.Lang = langFor(c, u)
	return v
}

func viewerFor(u *store.User, run *store.Run, access Access) views.Viewer {
	if u == nil {
		return views.Viewer{}
	}
	staff := u.Role == store.RoleApprover || u.Role == store.RoleSupport || u.Role == store.RoleAdmin
	if access != AccessFull {
		// A customer who lost refund_access still owns their run: a cancel
		// moves no money, and the API takes it too.
		return views.Viewer{UserID: u.ID, Staff: staff, MayCancel: run.OwnerID == u.ID}
	}
	approver := u.Role == store.RoleApprover
	return views.Viewer{
		MayApprove:  approver && run.OwnerID != u.ID,
		MayCancel:   approver || run.OwnerID == u.ID,
		UserID:      u.ID,
		Staff:       staff,
		MayAskAgain: run.OwnerID == u.ID && mayStartRefunds(u),
	}
}
