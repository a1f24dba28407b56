package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// ProviderLedger reads every refund the payment provider holds (the
// simulated provider's GET /refunds; a real provider's report).
type ProviderLedger interface {
	Refunds(ctx context.Context) ([]store.ProviderRefund, error)
}

// providerLedgerTimeout bounds the read of the provider's ledger, well
// inside the request's own deadline.
const providerLedgerTimeout = 5 * time.Second

// showProviderRefunds is support's list of the refunds the payment
// provider holds under a key no operation of ours has: refunds made under
// a run the database then forgot (a failover), which nobody asked for
// again. `refundd verify` lists them too. Read-only: nothing is adopted.
func (h *Handler) showProviderRefunds(c echo.Context) error {
	u := currentUser(c)
	if u.Role != store.RoleSupport {
		return store.Refuse(store.CodeForbidden, "refuse.provider_refunds_support", nil)
	}
	var p views.ProviderRefunds
	if h.cfg.ProviderLedger == nil {
		p.Unreadable = "This server does not read the payment provider's ledger. `refundd verify` compares it with ours."
		return render(c, http.StatusOK, views.SupportProviderPage(u, p))
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), providerLedgerTimeout)
	defer cancel()
	refunds, err := h.cfg.ProviderLedger.Refunds(ctx)
	if err != nil {
		h.log.Warn("read the payment provider's ledger", "err", err)
		p.Unreadable = "The payment provider's ledger could not be read just now. Try again in a moment."
		return render(c, http.StatusOK, views.SupportProviderPage(u, p))
	}
	p.Read = len(refunds)
	if p.Unexplained, err = h.store.Unexplained(c.Request().Context(), refunds); err != nil {
		return err
	}
	return render(c, http.StatusOK, views.SupportProviderPage(u, p))
}
