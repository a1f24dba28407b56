package handlers

import (
	"cmp"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// Asking again (README, "Asking again"): a run that ended without a
// refund offers its owner "Ask again", the start form filled in as it was
// asked for; the API takes retry_of. Either way the new request has a key
// of its own and names the old run, which is only read (store.AskAgainOf).

// showAskAgainPage is GET /runs/{id}/again: the start form filled in with
// the order(s), amount(s) and reason of the owner's run that ended without
// a refund, a request ID of its own, and the run it asks again for. A run
// that is not the viewer's is a 404; one that refunded or is still going a
// 409 that says so.
func (h *Handler) showAskAgainPage(c echo.Context) error {
	u := currentUser(c)
	if !mayStartRefunds(u) {
		return errMayNotStart
	}
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return store.ErrNotFound
	}
	ctx := c.Request().Context()
	again, err := h.store.AskAgainOf(ctx, u.ID, id)
	if err != nil {
		return err
	}
	orders, err := h.store.OrdersByCustomer(ctx, u.ID)
	if err != nil {
		return err
	}
	// Made once per rendered form, as the home page's: submitting it twice
	// is one new request.
	form := views.StartForm{RequestID: uuid.NewString(), RetryOf: id.String(), Reason: again.Run.Reason,
		Amounts: map[string]string{}}
	for _, it := range again.Refunds {
		oid := strconv.FormatInt(it.OrderID, 10)
		form.Orders = append(form.Orders, oid)
		form.Amounts[oid] = formAmount(it.Amount, store.MinorDigits(again.Run.Currency))
	}
	return render(c, http.StatusOK, views.AskAgainPage(u, orders, form))
}

// formAmount writes minor units as the form's amount field takes them
// (parseAmount's inverse): "12.50", "1500"; no grouping, no symbol.
func formAmount(minor int64, digits int) string {
	s := strconv.FormatInt(minor, 10)
	if digits == 0 {
		return s
	}
	if len(s) <= digits {
		s = strings.Repeat("0", digits-len(s)+1) + s
	}
	return s[:len(s)-digits] + "." + s[len(s)-digits:]
}

// apiAskAgain is POST /api/runs with retry_of: a new request, under the
// Idempotency-Key, for the caller's run that ended without a refund. What
// the body does not give is copied from that run (againRequest). The same
// key and body again answer 200 with the run they started.
func (h *Handler) apiAskAgain(c echo.Context, u *store.User, key string, body apiStartBody) error {
	id, err := uuid.Parse(strings.TrimSpace(*body.RetryOf))
	if err != nil {
		return apiBadRequest(c, codeInvalidJSON, "api.retry_of")
	}
	if body.Refunds != nil && (body.OrderID != 0 || body.Amount != 0) {
		return apiBadRequest(c, codeInvalidJSON, "api.one_or_several")
	}
	ctx := c.Request().Context()
	again, err := h.store.AskAgainOf(ctx, u.ID, id)
	if err != nil {
		return err
	}
	req, family, err := againRequest(again, body)
	if err != nil {
		return err
	}
	req.OwnerID, req.ClientRequestID, req.RetryOf = u.ID, key, uuid.NullUUID{UUID: id, Valid: true}
	req.RatePerMinute, req.Language = h.cfg.StartRatePerUser, langOf(c).Tag.String()
	if !family {
		run, created, err := h.store.StartRun(ctx, store.StartRequest{OwnerID: req.OwnerID, ClientRequestID: key,
			OrderID: req.Refunds[0].OrderID, Amount: req.Refunds[0].Amount, Reason: req.Reason, RetryOf: req.RetryOf,
			RatePerMinute: req.RatePerMinute, Language: req.Language})
		if err != nil {
			return err
		}
		return apiStarted(c, run, created)
	}
	req.MaxChildren = cmp.Or(h.cfg.MaxFamilySize, DefaultMaxFamilySize)
	fam, created, err := h.store.StartFamily(ctx, req)
	if err != nil {
		return err
	}
	return apiStartedFamily(c, fam, created)
}

// againRequest is what asking again for a.Run asks: the body's refunds,
// order, amount and reason where it gives them, the run's otherwise (the
// orders and amounts that ended without a refund, and its reason). One
// order is a single run, as the form starts it; several, or refunds given,
// a family.
func againRequest(a *store.AskAgain, body apiStartBody) (req store.FamilyRequest, family bool, err error) {
	req.Reason = cmp.Or(body.Reason, a.Run.Reason)
	if body.Refunds != nil {
		req.Refunds = body.Refunds
		return req, true, nil
	}
	items := a.Refunds
	if body.OrderID != 0 {
		// The order named, with the amount it was asked for when it was one
		// of the run's.
		item := store.RefundItem{OrderID: body.OrderID}
		for _, it := range a.Refunds {
			if it.OrderID == body.OrderID {
				item = it
			}
		}
		items = []store.RefundItem{item}
	}
	if body.Amount != 0 {
		if len(items) != 1 {
			return req, false, store.Refuse(store.CodeInvalid, "refuse.again_which_order", map[string]any{"Count": len(items)})
		}
		items = []store.RefundItem{{OrderID: items[0].OrderID, Amount: body.Amount}}
	}
	req.Refunds = items
	return req, len(items) > 1, nil
}
