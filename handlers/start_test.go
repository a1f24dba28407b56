package handlers_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

// send makes a request with headers and an optional body.
func (a *app) send(t *testing.T, c *http.Client, method, path string, hdr map[string]string, body string) response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return do(t, c, req)
}

func (a *app) user(t testing.TB, email string) *store.User {
	t.Helper()
	u, err := a.store.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// order is the customer's order with that description.
func (a *app) order(t *testing.T, email, description string) store.Order {
	t.Helper()
	orders, err := a.store.OrdersByCustomer(context.Background(), a.user(t, email).ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range orders {
		if o.Description == description {
			return o
		}
	}
	t.Fatalf("%s has no order %q", email, description)
	return store.Order{}
}

// startRun starts a run straight through the store, as the owner would.
func (a *app) startRun(t testing.TB, email string, amount int64) *store.Run {
	t.Helper()
	u := a.user(t, email)
	orders, err := a.store.OrdersByCustomer(context.Background(), u.ID)
	if err != nil || len(orders) == 0 {
		t.Fatalf("orders of %s: %v, %d", email, err, len(orders))
	}
	run, _, err := a.store.StartRun(context.Background(), store.StartRequest{
		OwnerID: u.ID, ClientRequestID: uuid.NewString(), OrderID: orders[0].ID, Amount: amount, Reason: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// count runs a COUNT(*) query.
func (a *app) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := a.db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (a *app) runsOf(t *testing.T, email string) int {
	t.Helper()
	return a.count(t, `SELECT count(*) FROM runs WHERE owner_id = $1`, a.user(t, email).ID)
}

// startForm reads the refund form off the home page, with its hidden
// request ID, and fills it in.
func (a *app) startForm(t *testing.T, c *http.Client, orderID int64, amount, reason string) url.Values {
	t.Helper()
	home := a.get(t, c, "/")
	wantStatus(t, home, http.StatusOK)
	id, ok := home.doc(t).Find(`#start-form input[name="request_id"]`).Attr("value")
	if !ok || uuid.Validate(id) != nil {
		t.Fatalf("request_id = %q, want a UUID made with the form", id)
	}
	return url.Values{"request_id": {id}, "order_id": {itoa(orderID)}, "amount": {amount}, "reason": {reason}}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestStart(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")

	r := a.post(t, c, "/runs", a.startForm(t, c, shoes.ID, "12.50", "The sole came off."))
	wantStatus(t, r, http.StatusSeeOther)
	id, err := uuid.Parse(strings.TrimPrefix(r.header.Get("Location"), "/runs/"))
	if err != nil {
		t.Fatalf("Location = %q, want /runs/{id}", r.header.Get("Location"))
	}
	run, err := a.store.RunByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if run.Amount != 1250 || run.Currency != "EUR" || run.OrderID != shoes.ID || run.Reason != "The sole came off." || run.OwnerID != a.user(t, "customer@example.com").ID {
		t.Errorf("run = %+v, want €12.50 of order %d with the reason, owned by the customer", run, shoes.ID)
	}

	home := a.get(t, c, "/").doc(t)
	link := home.Find("#runs a[href='/runs/" + id.String() + "']")
	if link.Length() != 1 {
		t.Errorf("home page lacks a link to the new run")
	}
	if got := home.Find("#run-row-" + id.String() + " .state").Text(); got != "Waiting for the agent" {
		t.Errorf("run state on home = %q, want it waiting for the agent", got)
	}
}

// TestStart_DuplicateSubmit: a double click (or a resend after a lost
// answer) posts the same form twice; it starts one run and both answers
// lead to it.
func TestStart_DuplicateSubmit(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	// The whole order: the second submit would be refused as more than
	// refundable if it were treated as a new request.
	jacket := a.order(t, "customer@example.com", "Rain jacket")
	form := a.startForm(t, c, jacket.ID, "89.50", "Wrong size.")

	first := a.post(t, c, "/runs", form)
	second := a.post(t, c, "/runs", form)
	wantStatus(t, first, http.StatusSeeOther)
	wantRedirect(t, second, first.header.Get("Location"))
	if n := a.runsOf(t, "customer@example.com"); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}
	if n := a.count(t, `SELECT count(*) FROM run_events WHERE type = 'run.created'`); n != 1 {
		t.Errorf("run.created events = %d, want 1", n)
	}
}

// TestStart_InvalidKeepsInput: a mistake comes back as the home page with
// the message next to the form and what was typed still there.
func TestStart_InvalidKeepsInput(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")

	for _, tc := range []struct {
		name, amount, says string
	}{
		{"three decimals", "12.505", "at most 2 decimals"},
		{"not a number", "twelve", "like 12.50"},
		{"more than refundable", "130.00", "more than what is still refundable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := a.startForm(t, c, shoes.ID, tc.amount, "It <b>broke</b>.")
			r := a.post(t, c, "/runs", form)
			wantStatus(t, r, http.StatusUnprocessableEntity)
			doc := r.doc(t)
			if got := doc.Find("#start-error").Text(); !strings.Contains(got, tc.says) {
				t.Errorf("#start-error = %q, want it to say %q", got, tc.says)
			}
			if got := doc.Find(`#start-form input[name="amount_`+itoa(shoes.ID)+`"]`).AttrOr("value", ""); got != tc.amount {
				t.Errorf("amount = %q, want the typed %q", got, tc.amount)
			}
			if got := doc.Find(`#start-form textarea[name="reason"]`).Text(); got != "It <b>broke</b>." {
				t.Errorf("reason = %q, want the typed text", got)
			}
			if got := doc.Find(`#start-form input[name="order_id"][checked]`).AttrOr("value", ""); got != itoa(shoes.ID) {
				t.Errorf("ticked order = %q, want %d", got, shoes.ID)
			}
			if got := doc.Find(`#start-form input[name="request_id"]`).AttrOr("value", ""); got != form.Get("request_id") {
				t.Errorf("request_id = %q, want the form's own %q kept", got, form.Get("request_id"))
			}
		})
	}
	if n := a.runsOf(t, "customer@example.com"); n != 0 {
		t.Errorf("runs = %d, want none", n)
	}
}

// TestStart_FormReusedForOtherRequest: going back to a submitted form,
// changing it and submitting again reuses its request ID for different
// parameters: a clear 422, not a second run, and a fresh ID to go on with.
func TestStart_FormReusedForOtherRequest(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	form := a.startForm(t, c, shoes.ID, "10.00", "Too small.")
	wantStatus(t, a.post(t, c, "/runs", form), http.StatusSeeOther)

	form.Set("amount", "20.00")
	r := a.post(t, c, "/runs", form)
	wantStatus(t, r, http.StatusUnprocessableEntity)
	doc := r.doc(t)
	if got := doc.Find("#start-error").Text(); !strings.Contains(got, "already used for a different refund request") {
		t.Errorf("#start-error = %q, want it to explain the form was used", got)
	}
	fresh := doc.Find(`#start-form input[name="request_id"]`).AttrOr("value", "")
	if fresh == form.Get("request_id") || uuid.Validate(fresh) != nil {
		t.Errorf("request_id = %q, want a fresh UUID", fresh)
	}
	if n := a.runsOf(t, "customer@example.com"); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}

	form.Set("request_id", fresh)
	wantStatus(t, a.post(t, c, "/runs", form), http.StatusSeeOther)
	if n := a.runsOf(t, "customer@example.com"); n != 2 {
		t.Errorf("runs after submitting the fresh form = %d, want 2", n)
	}
}

// TestStart_WithoutRefundAccess: only customers holding refund_access may
// start refunds; the grant is read from the database on every request.
func TestStart_WithoutRefundAccess(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	form := url.Values{"request_id": {uuid.NewString()}, "order_id": {itoa(shoes.ID)}, "amount": {"1.00"}, "reason": {"x"}}

	t.Run("grant revoked", func(t *testing.T) {
		c := a.client(t)
		a.login(t, c, "customer@example.com")
		if err := a.store.SetGrant(context.Background(), a.user(t, "customer@example.com").ID, store.GrantRefundAccess, false); err != nil {
			t.Fatal(err)
		}
		r := a.post(t, c, "/runs", form)
		wantStatus(t, r, http.StatusForbidden)
		if !strings.Contains(r.body, "You may not start refunds") {
			t.Errorf("403 page does not say you may not start refunds:\n%s", r.body)
		}
		home := a.get(t, c, "/").doc(t)
		if home.Find("#start-form").Length() != 0 || home.Find("#no-refund-access").Length() != 1 {
			t.Error("the home page offers the refund form to a customer without refund_access")
		}
	})
	t.Run("approver", func(t *testing.T) {
		c := a.client(t)
		a.login(t, c, "approver@example.com")
		wantStatus(t, a.post(t, c, "/runs", form), http.StatusForbidden)
	})
	if n := a.count(t, `SELECT count(*) FROM runs`); n != 0 {
		t.Errorf("runs = %d, want none", n)
	}
}

func TestHome_ApprovalQueue(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	waiting := a.startRun(t, "customer@example.com", 1000)
	other := a.startRun(t, "customer2@example.com", 1000)
	if _, err := a.store.RequestApproval(context.Background(), waiting.ID, proposalFor(waiting)); err != nil {
		t.Fatal(err)
	}
	c := a.client(t)
	a.login(t, c, "approver@example.com")
	doc := a.get(t, c, "/").doc(t)
	if doc.Find("#approval-queue a[href='/runs/"+waiting.ID.String()+"']").Length() != 1 {
		t.Error("the queue lacks the run awaiting approval")
	}
	if doc.Find("#queue-item-"+other.ID.String()).Length() != 0 || doc.Find(".queue-item").Length() != 1 {
		t.Error("the queue lists a run that is not awaiting approval")
	}
}

// proposalFor is the action.proposed a worker records for run.
func proposalFor(run *store.Run) store.ActionProposed {
	return store.ActionProposed{Action: "refund", OrderID: run.OrderID, Amount: run.Amount, Currency: run.Currency}
}
