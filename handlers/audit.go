package handlers

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// auditPageSize is how many entries one page of the audit log shows; the
// newest are what support looks for first, and the filter narrows the rest.
const auditPageSize = 100

func (h *Handler) showAuditLog(c echo.Context) error {
	v := views.AuditView{Action: c.QueryParam("action")}
	status := http.StatusOK
	if v.Action != "" && !slices.Contains(store.AuditActions, v.Action) {
		v.Error, v.Action, status = "There is no audit action called "+strconv.Quote(v.Action)+".", "", http.StatusUnprocessableEntity
	}
	if b := c.QueryParam("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err := outOfRange("before", err); err != nil {
			return err
		}
		if err != nil || n < 1 {
			v.Error, status = "There is no audit entry "+strconv.Quote(b)+" to read before.", http.StatusUnprocessableEntity
		} else {
			v.Before = n
		}
	}
	// One more than shown says whether there are older entries.
	entries, err := h.store.AuditLogBefore(c.Request().Context(), v.Action, v.Before, auditPageSize+1)
	if err != nil {
		return err
	}
	if len(entries) > auditPageSize {
		entries, v.More = entries[:auditPageSize], true
	}
	v.Entries = entries
	return render(c, status, views.AuditPage(currentUser(c), v))
}
