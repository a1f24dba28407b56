package handlers

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// errMayNotStart refuses a start from anyone but a customer with the
// refund_access grant.
var errMayNotStart = store.Errorf(store.CodeForbidden, "You may not start refunds.")

const msgFormReused = "This form was already used for a different refund request; it is listed under your refund requests. Submit again to make a new request."

// mayStartRefunds reports whether u may ask for refunds of their orders.
func mayStartRefunds(u *store.User) bool {
	return u != nil && u.Role == store.RoleCustomer && u.Has(store.GrantRefundAccess)
}

// startForm is the refund request form as posted, every field as typed.
type startForm struct {
	RequestID string
	OrderID   string
	Amount    string // major units, "12.50"
	Reason    string
}

// Validate checks the form against the customer's orders and turns it into
// a start request (without the owner). It does not check the amount against
// what is still refundable: the store does, after it has looked for the run
// this form may already have started, so a second submit of the same form
// finds that run instead of a refusal.
func (f startForm) Validate(orders []store.Order) (store.StartRequest, error) {
	requestID, err := checkRequestID(f.RequestID)
	if err != nil {
		return store.StartRequest{}, err
	}
	id, amount, err := f.order(orders)
	if err != nil {
		return store.StartRequest{}, err
	}
	reason, err := checkReason(f.Reason)
	if err != nil {
		return store.StartRequest{}, err
	}
	return store.StartRequest{ClientRequestID: requestID, OrderID: id, Amount: amount, Reason: reason}, nil
}

// checkRequestID reads the form's hidden request ID. The server made it:
// if it is not what it made, the form is not the one it served.
func checkRequestID(raw string) (string, error) {
	requestID := strings.TrimSpace(raw)
	if requestID == "" || len(requestID) > store.MaxRequestIDLen || store.ValidText(requestID, false) != nil {
		return "", store.Errorf(store.CodeInvalid, "This form is out of date. Check the details and submit it again.")
	}
	return requestID, nil
}

// order reads the order chosen, one of the customer's, and the amount
// typed for it in its currency's minor units.
func (f startForm) order(orders []store.Order) (int64, int64, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(f.OrderID), 10, 64)
	if err != nil {
		return 0, 0, store.Errorf(store.CodeInvalid, "Choose one of your orders.")
	}
	var order *store.Order
	for i := range orders {
		if orders[i].ID == id {
			order = &orders[i]
		}
	}
	if order == nil {
		return 0, 0, store.Errorf(store.CodeInvalid, "Choose one of your orders.")
	}
	amount, err := parseAmount(f.Amount, store.MinorDigits(order.Currency))
	if err != nil {
		return 0, 0, err
	}
	return id, amount, nil
}

// checkReason reads the reason given, trimmed.
func checkReason(raw string) (string, error) {
	reason := strings.TrimSpace(raw)
	switch {
	case reason == "":
		return "", store.Errorf(store.CodeInvalid, "Say why you want a refund.")
	case len([]rune(reason)) > store.MaxReasonLen:
		return "", store.Errorf(store.CodeInvalid, "%s", "The reason is too long: keep it under "+strconv.Itoa(store.MaxReasonLen)+" characters.")
	}
	return reason, nil
}

// parseAmount reads a decimal amount in major units into minor units with
// digits decimals, exactly: digits only, no floats, no rounding. The
// decimal separator is a point or a comma ("12.50", "12,50"); there is no
// grouping, so "1,000.00" is refused rather than guessed at.
func parseAmount(s string, digits int) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, invalidAmount("Enter the amount to refund.")
	}
	whole, frac, hasPoint := strings.Cut(strings.Replace(s, ",", ".", 1), ".")
	if whole == "" || !allDigits(whole) || !allDigits(frac) || (hasPoint && frac == "") {
		if digits == 0 {
			return 0, invalidAmount("Enter the amount as a whole number, like 1500.")
		}
		return 0, invalidAmount("Enter the amount as a number, like 12.50 or 12,50.")
	}
	if len(frac) > digits {
		if digits == 0 {
			return 0, invalidAmount("This currency has no cents: enter a whole number.")
		}
		return 0, invalidAmount("Enter the amount with at most " + strconv.Itoa(digits) + " decimals.")
	}
	minor, err := strconv.ParseInt(whole+frac+strings.Repeat("0", digits-len(frac)), 10, 64)
	if err != nil {
		return 0, invalidAmount("The amount is too large.")
	}
	if minor <= 0 {
		return 0, invalidAmount("The amount must be more than zero.")
	}
	return minor, nil
}

func invalidAmount(msg string) error { return store.Errorf(store.CodeInvalid, "%s", msg) }

func allDigits(s string) bool {
	for _, r := range s {
		if r > unicode.MaxASCII || !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// requestForm is the refund form as posted: the orders ticked, each with
// the amount typed for it, and one reason for them all.
type requestForm struct {
	RequestID string
	Picks     []startForm // one per order ticked: its ID and amount as posted
	Reason    string
	RetryOf   string // the run this form asks again for (GET /runs/{id}/again), as posted
}

// readRequestForm reads the posted form. Each ticked order's amount is its
// own field (amount_ID); a post naming one order with the single amount
// field (the form before orders could be ticked together) reads the same.
func readRequestForm(values url.Values) requestForm {
	f := requestForm{RequestID: values.Get("request_id"), Reason: values.Get("reason"), RetryOf: values.Get("retry_of")}
	ids := values["order_id"]
	for _, id := range ids {
		amount := values.Get("amount_" + strings.TrimSpace(id))
		if amount == "" && len(ids) == 1 {
			amount = values.Get("amount")
		}
		f.Picks = append(f.Picks, startForm{OrderID: id, Amount: amount})
	}
	return f
}

// Validate checks every ticked order as the single form is checked, and
// the number of orders against max (MAX_FAMILY_SIZE). One order is a
// single run's request; several are a family's. What the orders hold
// (refundable amounts, one currency) is the store's to check, after it has
// looked for what this form may already have started.
func (f requestForm) Validate(orders []store.Order, max int) (store.FamilyRequest, error) {
	requestID, err := checkRequestID(f.RequestID)
	if err != nil {
		return store.FamilyRequest{}, err
	}
	switch {
	case len(f.Picks) == 0:
		return store.FamilyRequest{}, store.Errorf(store.CodeInvalid, "Tick at least one of your orders.")
	case len(f.Picks) > max:
		return store.FamilyRequest{}, store.Errorf(store.CodeInvalid,
			"One request may refund at most %d orders; you ticked %d. Ask for the others in another request.", max, len(f.Picks))
	}
	req := store.FamilyRequest{ClientRequestID: requestID}
	if raw := strings.TrimSpace(f.RetryOf); raw != "" {
		id, err := uuid.Parse(raw)
		if err != nil {
			// The server wrote it: it is not the form the server served.
			return store.FamilyRequest{}, store.Errorf(store.CodeInvalid, "This form is out of date. Check the details and submit it again.")
		}
		req.RetryOf = uuid.NullUUID{UUID: id, Valid: true}
	}
	for _, p := range f.Picks {
		id, amount, err := p.order(orders)
		if err != nil {
			var e *store.Error
			if len(f.Picks) > 1 && errors.As(err, &e) {
				e.Message = "Order #" + strings.TrimSpace(p.OrderID) + ": " + e.Message
			}
			return store.FamilyRequest{}, err
		}
		req.Refunds = append(req.Refunds, store.RefundItem{OrderID: id, Amount: amount})
	}
	if req.Reason, err = checkReason(f.Reason); err != nil {
		return store.FamilyRequest{}, err
	}
	return req, nil
}

// startRun answers the home page's refund request form: 303 to the run it
// started, or to the run this same form already started. Several orders
// ticked start one request, and the answer is its parent run's page.
func (h *Handler) startRun(c echo.Context) error {
	u := currentUser(c)
	if !mayStartRefunds(u) {
		return errMayNotStart
	}
	ctx := c.Request().Context()
	// FormValue would read a body that cannot be read as an empty form.
	values, err := c.FormParams()
	switch {
	case tooLarge(err):
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge).SetInternal(err)
	case err != nil:
		return echo.NewHTTPError(http.StatusBadRequest).SetInternal(err)
	}
	f := readRequestForm(values)
	orders, err := h.store.OrdersByCustomer(ctx, u.ID)
	if err != nil {
		return err
	}
	maxOrders := cmp.Or(h.cfg.MaxFamilySize, DefaultMaxFamilySize)
	req, err := f.Validate(orders, maxOrders)
	if err == nil {
		var runID uuid.UUID
		if runID, err = h.start(ctx, u, req, maxOrders); err == nil {
			return redirect(c, "/runs/"+runID.String())
		}
	}
	return h.refuseStart(c, f, err)
}

// start starts what the form asks: a single run for one order, exactly as
// before orders could be ticked together, or a family for several. It
// returns the run to show: the single run, or the family's parent.
func (h *Handler) start(ctx context.Context, u *store.User, req store.FamilyRequest, maxOrders int) (uuid.UUID, error) {
	if len(req.Refunds) == 1 {
		run, _, err := h.store.StartRun(ctx, store.StartRequest{OwnerID: u.ID, ClientRequestID: req.ClientRequestID,
			OrderID: req.Refunds[0].OrderID, Amount: req.Refunds[0].Amount, Reason: req.Reason, RetryOf: req.RetryOf,
			RatePerMinute: h.cfg.StartRatePerUser})
		if err != nil {
			return uuid.Nil, err
		}
		return run.ID, nil
	}
	req.OwnerID, req.MaxChildren, req.RatePerMinute = u.ID, maxOrders, h.cfg.StartRatePerUser
	fam, _, err := h.store.StartFamily(ctx, req)
	if err != nil {
		return uuid.Nil, err
	}
	return fam.Parent.ID, nil
}

// refuseStart answers a start that did not happen with the home page, the
// form as it was posted and the reason in words.
func (h *Handler) refuseStart(c echo.Context, f requestForm, err error) error {
	form := views.StartForm{RequestID: f.RequestID, Reason: f.Reason, Amounts: map[string]string{}}
	if id, err := uuid.Parse(strings.TrimSpace(f.RetryOf)); err == nil {
		// Still asking again, whatever was wrong with the rest.
		form.RetryOf = id.String()
	}
	for _, p := range f.Picks {
		id := strings.TrimSpace(p.OrderID)
		form.Orders = append(form.Orders, id)
		form.Amounts[id] = p.Amount
	}
	status := http.StatusUnprocessableEntity
	switch store.ErrorCode(err) {
	case store.CodeInvalid:
		form.Error = sentence(err.Error())
	case store.CodeIdempotencyConflict:
		// This form's ID already started another request: keep what was
		// typed, with a new ID, so submitting again is a new request.
		form.Error = msgFormReused
		form.RequestID = uuid.NewString()
	case store.CodeRateLimited:
		// Keep what was typed, and the same ID: nothing was started, so
		// submitting again later is still this one request.
		form.Error = err.Error()
		status = http.StatusTooManyRequests
		setRetryAfter(c, err)
	default:
		return err
	}
	return h.renderHome(c, status, form)
}

// sentence capitalizes a message and ends it with a full stop, so the
// store's terse messages read like the form's own.
func sentence(msg string) string {
	if msg == "" {
		return msg
	}
	r := []rune(msg)
	r[0] = unicode.ToUpper(r[0])
	if !strings.HasSuffix(msg, ".") {
		r = append(r, '.')
	}
	return string(r)
}
