package handlers

import (
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

const supportSearchLimit = 100

// showSupportRuns is support's read-only search over every run: by run ID,
// by part of the customer's email, by state; newest first.
func (h *Handler) showSupportRuns(c echo.Context) error {
	u := currentUser(c)
	if u.Role != store.RoleSupport {
		return store.Errorf(store.CodeForbidden, "Only support can search every run.")
	}
	q := views.SupportSearch{Query: strings.TrimSpace(c.QueryParam("q")), State: c.QueryParam("state")}
	status := http.StatusOK
	if err := store.ValidText(q.Query, false); err != nil {
		// Not echoed back: it is no text to show in the search box.
		q.Error = "The search " + err.Error() + ": search by run ID or part of an email."
		q.Query = ""
		status = http.StatusUnprocessableEntity
	}
	f := store.RunFilter{Limit: supportSearchLimit}
	if id, err := uuid.Parse(q.Query); err == nil {
		f.ID = id
	} else {
		f.OwnerEmail = q.Query
	}
	if q.State != "" && !slices.Contains(store.States, q.State) {
		q.Error = "There is no run state called " + q.State + "."
		q.State = ""
		status = http.StatusUnprocessableEntity
	}
	f.State = q.State
	runs, err := h.store.SearchRuns(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return render(c, status, views.SupportRunsPage(u, q, store.States, runs))
}
