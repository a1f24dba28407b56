package handlers

import (
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

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
		if home.Runs, err = h.store.SearchRuns(ctx, store.RunFilter{OwnerID: u.ID, Limit: homeRunsLimit}); err != nil {
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
