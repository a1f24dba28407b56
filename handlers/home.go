package handlers

import (
	"context"
	"net/http"
	"slices"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// Home page list sizes.
const (
	homeRunsLimit = 20
)

// showHomePage greets the user with what their role works with: customers
// see their orders, the refund form and their runs; approvers the queue.
func (h *Handler) showHomePage(c echo.Context) error {
	return h.renderHome(c, http.StatusOK, views.StartForm{})
}

// renderHome renders the home page with form as the refund request form
// (fresh when it has no request ID yet).
func (h *Handler) renderHome(c echo.Context, status int, form views.StartForm) error {
	u := currentUser(c)
	ctx := c.Request().Context()
	home := views.Home{CanStart: mayStartRefunds(u)}
	var err error
	switch u.Role {
	case store.RoleCustomer:
		if home.Orders, err = h.store.OrdersByCustomer(ctx, u.ID); err != nil {
			return err
		}
		if home.Runs, err = h.store.OwnRunsOf(ctx, u.ID, homeRunsLimit); err != nil {
			return err
		}
		if form.RequestID == "" {
			// Made once per rendered form: submitting this form twice is
			// one refund request.
			form.RequestID = uuid.NewString()
		}
		home.Form = form
	case store.RoleApprover:
		if home.Queue, err = h.approvalQueue(c); err != nil {
			return err
		}
	}
	return render(c, status, views.HomePage(u, home))
}

// Why a run list's stream ends for good, in the words its page shows.
const (
	keyRunListSignedOut = "refuse.run_list_signed_out"
	keyRunListDenied    = "refuse.run_list_denied"
)

// streamOwnRuns is GET /runs/events: a customer's run list, live, as a
// state stream of the engine (handlers/stream). Its version is the cursor;
// each listed run that can still change wakes it, and a run started
// elsewhere joins the list at the next re-check (Stream.Recheck).
func (h *Handler) streamOwnRuns(c echo.Context) error {
	g := roleGate{h: h, cred: h.streamCredential(c, uuid.Nil), role: store.RoleCustomer,
		signedOut: keyRunListSignedOut, denied: keyRunListDenied}
	u := currentUser(c)
	if refused, err := g.refuse(c, u); refused {
		return err
	}
	sc := h.engine.NewConn(c, u.ID)
	defer sc.End()
	if refused := sc.AddState("run list", g.cred, cursorParam(c), &ownRunsView{roleGate: g, ownerID: u.ID, lang: langFor(c, u)}); refused != "" {
		return h.refuseBusy(c, htmlStream{}, refused)
	}
	return sc.Serve()
}

// ownRunsView is a customer's run list as their stream shows it
// (stream.StateView).
type ownRunsView struct {
	roleGate
	ownerID int64
	lang    views.Lang // the page's, fixed when the stream opens
}

// Closing is the gate's, in the page's language.
func (v *ownRunsView) Closing(ctx context.Context, r stream.Reason) ([]byte, error) {
	return v.roleGate.Closing(views.WithLang(ctx, v.lang), r)
}

// ownRunsState is one version of the list.
type ownRunsState struct{ l *store.OwnRuns }

func (s ownRunsState) Version() int64 { return s.l.Version }

// Topics are the listed runs that can still change.
func (s ownRunsState) Topics() []string {
	var topics []string
	for _, r := range s.l.Runs {
		if !store.Terminal(r.State) {
			topics = append(topics, store.RunTopic(r.ID.String()))
		}
	}
	return topics
}

func (v *ownRunsView) Read(ctx context.Context) (stream.State, error) {
	l, err := v.h.store.OwnRunsOf(ctx, v.ownerID, homeRunsLimit)
	if err != nil {
		return nil, err
	}
	return ownRunsState{l}, nil
}

// Render replaces the rows whose state moved; a list that gained or lost
// a run is sent whole.
func (v *ownRunsView) Render(ctx context.Context, shown, next stream.State) (string, []byte, error) {
	ctx = views.WithLang(ctx, v.lang)
	to := next.(ownRunsState).l.Runs
	if shown != nil {
		from := shown.(ownRunsState).l.Runs
		same := slices.EqualFunc(from, to, func(a, b store.RunListing) bool { return a.ID == b.ID })
		if same {
			var moved []store.RunListing
			for i := range to {
				if to[i].State != from[i].State || to[i].ChildrenEnded != from[i].ChildrenEnded {
					moved = append(moved, to[i])
				}
			}
			data, err := renderBytes(ctx, views.CustomerRunRowsChanged(moved))
			return "", data, err
		}
	}
	data, err := renderBytes(ctx, views.CustomerRunListBody(to, true))
	return "reset", data, err
}
