package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/views"
)

// auditLimit bounds the audit page; the newest entries are what support
// looks for first, and the action filter narrows the rest.
const auditLimit = 500

func (h *Handler) showAuditLog(c echo.Context) error {
	action := c.QueryParam("action")
	entries, err := h.store.AuditLog(c.Request().Context(), action, auditLimit)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.AuditPage(currentUser(c), action, entries))
}
