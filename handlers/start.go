package handlers

import (
	"net/http"
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
	invalid := func(msg string) (store.StartRequest, error) {
		return store.StartRequest{}, store.Errorf(store.CodeInvalid, "%s", msg)
	}
	requestID := strings.TrimSpace(f.RequestID)
	// The server made the request ID: if it is not what it made, the form
	// is not the one it served.
	if requestID == "" || len(requestID) > store.MaxRequestIDLen || store.ValidText(requestID, false) != nil {
		return invalid("This form is out of date. Check the details and submit it again.")
	}
	id, err := strconv.ParseInt(strings.TrimSpace(f.OrderID), 10, 64)
	if err != nil {
		return invalid("Choose one of your orders.")
	}
	var order *store.Order
	for i := range orders {
		if orders[i].ID == id {
			order = &orders[i]
		}
	}
	if order == nil {
		return invalid("Choose one of your orders.")
	}
	amount, err := parseAmount(f.Amount, store.MinorDigits(order.Currency))
	if err != nil {
		return store.StartRequest{}, err
	}
	reason := strings.TrimSpace(f.Reason)
	switch {
	case reason == "":
		return invalid("Say why you want a refund.")
	case len([]rune(reason)) > store.MaxReasonLen:
		return invalid("The reason is too long: keep it under " + strconv.Itoa(store.MaxReasonLen) + " characters.")
	}
	return store.StartRequest{ClientRequestID: requestID, OrderID: id, Amount: amount, Reason: reason}, nil
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

// startRun answers the home page's refund request form: 303 to the run it
// started, or to the run this same form already started.
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
	f := startForm{
		RequestID: values.Get("request_id"),
		OrderID:   values.Get("order_id"),
		Amount:    values.Get("amount"),
		Reason:    values.Get("reason"),
	}
	orders, err := h.store.OrdersByCustomer(ctx, u.ID)
	if err != nil {
		return err
	}
	req, err := f.Validate(orders)
	if err == nil {
		req.OwnerID, req.RatePerMinute = u.ID, h.cfg.StartRatePerUser
		var run *store.Run
		if run, _, err = h.store.StartRun(ctx, req); err == nil {
			return redirect(c, "/runs/"+run.ID.String())
		}
	}
	form := views.StartForm{RequestID: f.RequestID, OrderID: f.OrderID, Amount: f.Amount, Reason: f.Reason}
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
