package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// showHomePage greets the user with what their role works with: customers
// see their orders.
func (h *Handler) showHomePage(c echo.Context) error {
	u := currentUser(c)
	var orders []store.Order
	if u.Role == store.RoleCustomer {
		var err error
		if orders, err = h.store.OrdersByCustomer(c.Request().Context(), u.ID); err != nil {
			return err
		}
	}
	return render(c, http.StatusOK, views.HomePage(u, orders))
}
