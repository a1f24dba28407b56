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
var errMayNotStart = store.Refuse(store.CodeForbidden, "refuse.may_not_start", nil)

const keyFormReused = "form.reused"

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
	Lang      views.Lang // the language the amount was typed in (zero: English)
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
		return "", store.Refuse(store.CodeInvalid, "form.out_of_date", nil)
	}
	return requestID, nil
}

// order reads the order chosen, one of the customer's, and the amount
// typed for it in its currency's minor units.
func (f startForm) order(orders []store.Order) (int64, int64, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(f.OrderID), 10, 64)
	if err != nil {
		return 0, 0, store.Refuse(store.CodeInvalid, "form.choose_order", nil)
	}
	var order *store.Order
	for i := range orders {
		if orders[i].ID == id {
			order = &orders[i]
		}
	}
	if order == nil {
		return 0, 0, store.Refuse(store.CodeInvalid, "form.choose_order", nil)
	}
	amount, err := parseAmount(f.Amount, store.MinorDigits(order.Currency), f.Lang)
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
		return "", store.Refuse(store.CodeInvalid, "form.no_reason", nil)
	case len([]rune(reason)) > store.MaxReasonLen:
		return "", store.Refuse(store.CodeInvalid, "form.reason_long", map[string]any{"Max": store.MaxReasonLen})
	}
	return reason, nil
}

// parseAmount reads a decimal amount in major units, as typed in language
// l, into minor units with digits decimals, exactly: digits only, no
// floats, no rounding. The marks are l's (CLDR): "1,299.50" in English,
// "1.299,50" in German. The other of "." and "," is read as a decimal
// mark too where it cannot be l's grouping ("12,50" in English), and an
// amount that reads two ways ("1,000" of a currency with three decimals)
// is refused in words rather than guessed at.
func parseAmount(s string, digits int, l views.Lang) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, invalidAmount("form.amount.empty", nil)
	}
	dec, grp := l.Marks()
	if strings.TrimSpace(grp) == "" {
		// A space groups ("1 299,50"): whichever space was typed.
		s = strings.NewReplacer(" ", grp, "\u00a0", grp, "\u202f", grp).Replace(s)
	}
	if readsTwoWays(s, dec, grp, digits) {
		w, f, _ := strings.Cut(s, grp)
		return 0, invalidAmount("form.amount.ambiguous", map[string]any{"Typed": strconv.Quote(s), "Whole": w + f, "Fraction": w + dec + f})
	}
	whole, frac, hasPoint, ok := splitAmount(s, dec, grp)
	if !ok || whole == "" || !allDigits(whole) || !allDigits(frac) || (hasPoint && frac == "") {
		if digits == 0 {
			return 0, invalidAmount("form.amount.whole", nil)
		}
		return 0, invalidAmount("form.amount.number", map[string]any{"Example": "12" + dec + "50", "Other": "12" + otherMark(dec) + "50"})
	}
	if len(frac) > digits {
		if digits == 0 {
			return 0, invalidAmount("form.amount.no_cents", nil)
		}
		return 0, invalidAmount("form.amount.decimals", map[string]any{"Digits": digits})
	}
	minor, err := strconv.ParseInt(whole+frac+strings.Repeat("0", digits-len(frac)), 10, 64)
	if err != nil {
		return 0, invalidAmount("form.amount.too_large", nil)
	}
	if minor <= 0 {
		return 0, invalidAmount("form.amount.not_positive", nil)
	}
	return minor, nil
}

// otherMark is the one of "." and "," that dec is not: read as a decimal
// mark too where it cannot be grouping.
func otherMark(dec string) string {
	if dec == "." {
		return ","
	}
	return "."
}

// readsTwoWays reports whether s is grouped by one mark that could as well
// be a decimal mark, for a currency with that many decimals: "1,000" of a
// currency with three is a thousand in English, one in German.
func readsTwoWays(s, dec, grp string, digits int) bool {
	return digits >= 3 && grp == otherMark(dec) && !strings.Contains(s, dec) &&
		strings.Count(s, grp) == 1 && grouped(s, grp)
}

// splitAmount splits s at its decimal mark into whole (grouping taken
// out) and fraction, unchecked; ok is false when grouping is misplaced.
// With no decimal mark of l's, a lone other mark that is not l's
// grouping is the decimal mark ("12,50" in English).
func splitAmount(s, dec, grp string) (whole, frac string, hasPoint, ok bool) {
	if alt := otherMark(dec); !strings.Contains(s, dec) && strings.Count(s, alt) == 1 && !(alt == grp && grouped(s, grp)) {
		dec = alt
	}
	if strings.Count(s, dec) > 1 {
		return "", "", false, false
	}
	whole, frac, hasPoint = strings.Cut(s, dec)
	if strings.Contains(whole, grp) {
		if !grouped(whole, grp) {
			return "", "", false, false
		}
		whole = strings.ReplaceAll(whole, grp, "")
	}
	return whole, frac, hasPoint, true
}

// grouped reports whether s is digits grouped by sep in threes from the
// right ("1,299", "12,345,678"), with at least one sep.
func grouped(s, sep string) bool {
	parts := strings.Split(s, sep)
	if len(parts) < 2 || len(parts[0]) < 1 || len(parts[0]) > 3 || !allDigits(parts[0]) {
		return false
	}
	for _, p := range parts[1:] {
		if len(p) != 3 || !allDigits(p) {
			return false
		}
	}
	return true
}

func invalidAmount(key string, data map[string]any) error {
	return store.Refuse(store.CodeInvalid, key, data)
}

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
func readRequestForm(values url.Values, l views.Lang) requestForm {
	f := requestForm{RequestID: values.Get("request_id"), Reason: values.Get("reason"), RetryOf: values.Get("retry_of")}
	ids := values["order_id"]
	for _, id := range ids {
		amount := values.Get("amount_" + strings.TrimSpace(id))
		if amount == "" && len(ids) == 1 {
			amount = values.Get("amount")
		}
		f.Picks = append(f.Picks, startForm{OrderID: id, Amount: amount, Lang: l})
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
		return store.FamilyRequest{}, store.Refuse(store.CodeInvalid, "form.no_orders", nil)
	case len(f.Picks) > max:
		return store.FamilyRequest{}, store.Refuse(store.CodeInvalid, "form.too_many_orders", map[string]any{"Max": max, "Count": len(f.Picks)})
	}
	req := store.FamilyRequest{ClientRequestID: requestID}
	if raw := strings.TrimSpace(f.RetryOf); raw != "" {
		id, err := uuid.Parse(raw)
		if err != nil {
			// The server wrote it: it is not the form the server served.
			return store.FamilyRequest{}, store.Refuse(store.CodeInvalid, "form.out_of_date", nil)
		}
		req.RetryOf = uuid.NullUUID{UUID: id, Valid: true}
	}
	for _, p := range f.Picks {
		id, amount, err := p.order(orders)
		if err != nil {
			var e *store.Error
			if len(f.Picks) > 1 && errors.As(err, &e) {
				err = store.Refuse(e.Code, "form.order_n", map[string]any{"Order": strings.TrimSpace(p.OrderID), "Why": e})
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
	f := readRequestForm(values, langOf(c))
	orders, err := h.store.OrdersByCustomer(ctx, u.ID)
	if err != nil {
		return err
	}
	maxOrders := cmp.Or(h.cfg.MaxFamilySize, DefaultMaxFamilySize)
	req, err := f.Validate(orders, maxOrders)
	if err == nil {
		var runID uuid.UUID
		req.Language = langOf(c).Tag.String() // the agent narrates in it
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
			RatePerMinute: h.cfg.StartRatePerUser, Language: req.Language})
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
	l := langOf(c)
	switch store.ErrorCode(err) {
	case store.CodeInvalid:
		form.Error = sentence(l.Refusal(err))
	case store.CodeIdempotencyConflict:
		// This form's ID already started another request: keep what was
		// typed, with a new ID, so submitting again is a new request.
		form.Error = l.T(keyFormReused)
		form.RequestID = uuid.NewString()
	case store.CodeRateLimited:
		// Keep what was typed, and the same ID: nothing was started, so
		// submitting again later is still this one request.
		form.Error = l.Refusal(err)
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
	if !strings.HasSuffix(msg, ".") && !strings.HasSuffix(msg, "。") {
		r = append(r, '.')
	}
	return string(r)
}
