package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
)

// familyForm is the refund form with these orders ticked, each with its
// amount as typed, under the form's own request ID.
func (a *app) familyForm(t *testing.T, c *http.Client, reason string, picks map[int64]string) url.Values {
	t.Helper()
	form := a.startForm(t, c, 0, "", reason)
	form.Del("order_id")
	form.Del("amount")
	for id, amount := range picks {
		form.Add("order_id", itoa(id))
		form.Set("amount_"+itoa(id), amount)
	}
	return form
}

// TestStartForm_SeveralOrdersStartOneRequest: ticking two orders starts a
// parent and a child per order in PostgreSQL, and the answer is the
// parent's page; the same form submitted again is the same request.
func TestStartForm_SeveralOrdersStartOneRequest(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	jacket := a.order(t, "customer@example.com", "Rain jacket")
	form := a.familyForm(t, c, "Delivered late.", map[int64]string{shoes.ID: "12.50", jacket.ID: "89,50"})

	first := a.post(t, c, "/runs", form)
	wantStatus(t, first, http.StatusSeeOther)
	parentID, err := uuid.Parse(strings.TrimPrefix(first.header.Get("Location"), "/runs/"))
	if err != nil {
		t.Fatalf("Location = %q, want /runs/{parent}", first.header.Get("Location"))
	}
	fam, err := a.store.FamilyOf(context.Background(), parentID)
	if err != nil {
		t.Fatalf("FamilyOf(%s) = %v: the answer is not a request's parent", parentID, err)
	}
	if fam.Parent.Amount != 1250+8950 || fam.Parent.Reason != "Delivered late." || fam.Parent.OwnerID != a.user(t, "customer@example.com").ID {
		t.Errorf("parent = %+v, want €102.00 with the reason, owned by the customer", fam.Parent)
	}
	got := map[int64]int64{}
	for _, ch := range fam.Children {
		got[ch.OrderID] = ch.Amount
		if ch.CorrelationID != parentID || ch.ParentRunID.UUID != parentID {
			t.Errorf("child %s: parent %v, correlation %s; want both %s", ch.ID, ch.ParentRunID, ch.CorrelationID, parentID)
		}
	}
	if len(got) != 2 || got[shoes.ID] != 1250 || got[jacket.ID] != 8950 {
		t.Errorf("children = %v (order: amount), want %d: 1250 and %d: 8950", got, shoes.ID, jacket.ID)
	}

	again := a.post(t, c, "/runs", form)
	wantRedirect(t, again, first.header.Get("Location"))
	if n := a.runsOf(t, "customer@example.com"); n != 3 {
		t.Errorf("runs after the same form twice = %d, want 3 (a parent and two children)", n)
	}
	if n := a.count(t, `SELECT count(*) FROM run_events WHERE type = 'child.started'`); n != 2 {
		t.Errorf("child.started events = %d, want 2", n)
	}
}

// TestStartForm_OneOrderTickedIsOneRun: one order ticked is the single run
// it always was: no parent, no family.
func TestStartForm_OneOrderTickedIsOneRun(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	r := a.post(t, c, "/runs", a.familyForm(t, c, "Torn.", map[int64]string{shoes.ID: "3.00"}))
	wantStatus(t, r, http.StatusSeeOther)
	id := uuid.MustParse(strings.TrimPrefix(r.header.Get("Location"), "/runs/"))
	run, err := a.store.RunByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if run.IsParent() || run.ParentRunID.Valid || run.OrderID != shoes.ID || run.Amount != 300 || run.CorrelationID != run.ID {
		t.Errorf("run = %+v, want a single root run of €3.00 on order %d", run, shoes.ID)
	}
	if n := a.runsOf(t, "customer@example.com"); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}
}

// TestStartForm_FamilyBadInputChangesNothing: each mistake in a request
// of several orders is the form back with the words, and no run, no event.
func TestStartForm_FamilyBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{MaxFamilySize: 2})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	jacket := a.order(t, "customer@example.com", "Rain jacket")
	bottle := a.order(t, "customer@example.com", "Water bottle")
	lamp, err := a.store.CreateOrder(context.Background(), a.user(t, "customer@example.com").ID, "Desk lamp", 4000, "USD")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		picks map[int64]string
		says  string
	}{
		{"no order ticked", map[int64]string{}, "Tick at least one of your orders"},
		{"amount over refundable", map[int64]string{shoes.ID: "1.00", jacket.ID: "89.51"}, "more than what is still refundable"},
		{"amount not a number", map[int64]string{shoes.ID: "1.00", jacket.ID: "lots"}, "Order #" + itoa(jacket.ID) + ": Enter the amount as a number"},
		{"no amount", map[int64]string{shoes.ID: "1.00", jacket.ID: ""}, "Order #" + itoa(jacket.ID) + ": Enter the amount"},
		{"different currencies", map[int64]string{shoes.ID: "1.00", lamp.ID: "1.00"}, "different currencies"},
		{"more than MAX_FAMILY_SIZE", map[int64]string{shoes.ID: "1.00", jacket.ID: "1.00", bottle.ID: "1.00"}, "at most 2 orders; you ticked 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := a.familyForm(t, c, "Late.", tc.picks)
			r := a.post(t, c, "/runs", form)
			wantStatus(t, r, http.StatusUnprocessableEntity)
			doc := r.doc(t)
			if got := doc.Find("#start-error").Text(); !strings.Contains(got, tc.says) {
				t.Errorf("#start-error = %q, want it to say %q", got, tc.says)
			}
			for id, amount := range tc.picks {
				if doc.Find(`#start-form input[name="order_id"][value="`+itoa(id)+`"][checked]`).Length() != 1 {
					t.Errorf("order %d is not ticked any more", id)
				}
				if got := doc.Find(`#start-form input[name="amount_`+itoa(id)+`"]`).AttrOr("value", ""); got != amount {
					t.Errorf("amount of order %d = %q, want the typed %q", id, got, amount)
				}
			}
			if got := doc.Find(`#start-form input[name="request_id"]`).AttrOr("value", ""); got != form.Get("request_id") {
				t.Errorf("request_id = %q, want the form's own %q kept", got, form.Get("request_id"))
			}
		})
	}
	if n := a.count(t, `SELECT count(*) FROM runs`); n != 0 {
		t.Errorf("runs = %d, want none", n)
	}
	if n := a.count(t, `SELECT count(*) FROM run_events`); n != 0 {
		t.Errorf("events = %d, want none", n)
	}
}
