package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// queuedFamily is a request of the customer's with a child per amount (on
// their orders in turn), every child waiting for an approver.
func (a *app) queuedFamily(t testing.TB, email string, amounts ...int64) *store.Family {
	t.Helper()
	ctx := context.Background()
	u := a.user(t, email)
	orders, err := a.store.OrdersByCustomer(ctx, u.ID)
	if err != nil || len(orders) < len(amounts) {
		t.Fatalf("orders of %s: %v, %d; want %d", email, err, len(orders), len(amounts))
	}
	req := store.FamilyRequest{OwnerID: u.ID, ClientRequestID: uuid.NewString(), Reason: "delivered late"}
	for i, amount := range amounts {
		req.Refunds = append(req.Refunds, store.RefundItem{OrderID: orders[i].ID, Amount: amount})
	}
	fam, _, err := a.store.StartFamily(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fam.Children {
		ch := &fam.Children[i]
		proposal := store.ActionProposed{Action: "refund", OrderID: ch.OrderID, Amount: ch.Amount, Currency: ch.Currency}
		run, err := a.store.RequestApproval(ctx, ch.ID, proposal)
		if err != nil {
			t.Fatal(err)
		}
		*ch = *run
	}
	return fam
}

// postWith posts a form with extra headers.
func (a *app) postWith(t *testing.T, c *http.Client, path string, form url.Values, hdr map[string]string) response {
	t.Helper()
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for k, v := range hdr {
		h[k] = v
	}
	return a.send(t, c, http.MethodPost, path, h, form.Encode())
}

// approveAllForm is the queue's "Approve all" of these children.
func approveAllForm(children ...store.Run) url.Values {
	form := url.Values{"reason": {"all checked"}}
	for _, ch := range children {
		form.Add("run", ch.ID.String())
	}
	return form
}

// TestQueuePage_GroupsChildrenByRequest: a request's children wait under
// the request, with its correlation ID, customer and total, and one
// "Approve all" naming exactly the children shown; a run of its own stays
// a card of its own.
func TestQueuePage_GroupsChildrenByRequest(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	single := a.queued(t, "customer2@example.com", 1250)
	fam := a.queuedFamily(t, "customer@example.com", 1000, 2000)
	doc := a.get(t, a.signedIn(t, "approver@example.com"), "/").doc(t)

	group := doc.Find("#" + views.QueueRequestID(fam.Parent.ID))
	if group.Length() != 1 {
		t.Fatalf("no group for request %s:\n%s", fam.Parent.ID, doc.Find("#queue-list").Text())
	}
	text := strings.Join(strings.Fields(group.Text()), " ")
	if got := group.Find(".correlation-id").Text(); got != fam.Parent.ID.String() {
		t.Errorf("correlation ID = %q, want the parent's %s", got, fam.Parent.ID)
	}
	for _, want := range []string{"Request for 2 orders, €30.00 in all", "Casey Customer (customer@example.com)",
		"2 of its 2 refunds wait for a decision on this page: €30.00 in all."} {
		if !strings.Contains(text, want) {
			t.Errorf("the group lacks %q:\n%s", want, text)
		}
	}
	for _, ch := range fam.Children {
		if group.Find("#"+views.QueueItemID(ch.ID)).Length() != 1 {
			t.Errorf("child %s is not under its request", ch.ID)
		}
	}
	if group.Find("#"+views.QueueItemID(single.ID)).Length() != 0 || doc.Find("#queue-list > #"+views.QueueItemID(single.ID)).Length() != 1 {
		t.Errorf("the run of its own is not a card of its own in the list")
	}
	form := group.Find(`form[action="/runs/` + fam.Parent.ID.String() + `/approve"]`)
	if got := strings.TrimSpace(form.Find("button").Text()); got != "Yes, approve all 2" {
		t.Errorf("approve-all button = %q, want \"Yes, approve all 2\"", got)
	}
	var named []string
	form.Find(`input[name="run"]`).Each(func(_ int, s *goquery.Selection) { named = append(named, s.AttrOr("value", "")) })
	if want := []string{fam.Children[0].ID.String(), fam.Children[1].ID.String()}; fmt.Sprint(named) != fmt.Sprint(want) {
		t.Errorf("approve all names %v, want the children shown %v", named, want)
	}
	if group.Find(`form[action="/runs/`+fam.Parent.ID.String()+`/cancel"]`).Length() != 1 {
		t.Error("the group has no cancel-all form")
	}
}

// TestApproveAll_Twice: an approver's "Approve all" approves each child
// once: the second is answered as already made, and PostgreSQL holds one
// approval, one approval.granted and one audit row per child.
func TestApproveAll_Twice(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	fam := a.queuedFamily(t, "customer@example.com", 1000, 2000, 500)
	c := a.signedIn(t, "approver@example.com")
	path := "/runs/" + fam.Parent.ID.String() + "/approve"
	first := a.postWith(t, c, path, approveAllForm(fam.Children...), htmx)
	wantFragment(t, first, "You approved 3 refunds of this request.")
	second := a.postWith(t, c, path, approveAllForm(fam.Children...), htmx)
	wantFragment(t, second, "These refunds of the request were already approved.")

	for _, ch := range fam.Children {
		if n := a.count(t, `SELECT count(*) FROM approvals WHERE run_id = $1 AND decision = 'approved' AND decided_by = $2`, ch.ID, a.user(t, "approver@example.com").ID); n != 1 {
			t.Errorf("child %d: approvals = %d, want 1", ch.Position, n)
		}
		if n := a.events(t, &ch, store.EventApprovalGranted); n != 1 {
			t.Errorf("child %d: approval.granted events = %d, want 1", ch.Position, n)
		}
		if n := a.count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND subject = $2 AND details->>'reason' = 'all checked'`,
			store.AuditRunApproved, store.RunSubject(ch.ID)); n != 1 {
			t.Errorf("child %d: audit rows = %d, want 1", ch.Position, n)
		}
		if run, err := a.store.RunByID(context.Background(), ch.ID); err != nil || run.State != store.StateSubmitting {
			t.Errorf("child %d = %v, %v; want submitting", ch.Position, run, err)
		}
	}
	if n := a.count(t, `SELECT count(*) FROM queue_entries`); n != 0 {
		t.Errorf("queue entries = %d, want none left", n)
	}
}

// TestApproveAll_OnlyTheChildrenShown: "Approve all" from a page that
// showed two children leaves a third, which asked later, to its own
// decision.
func TestApproveAll_OnlyTheChildrenShown(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	fam := a.queuedFamily(t, "customer@example.com", 1000, 2000, 500)
	c := a.signedIn(t, "approver@example.com")
	r := a.postWith(t, c, "/runs/"+fam.Parent.ID.String()+"/approve", approveAllForm(fam.Children[:2]...), htmx)
	wantFragment(t, r, "You approved 2 refunds of this request.")
	if run, err := a.store.RunByID(context.Background(), fam.Children[2].ID); err != nil || run.State != store.StateAwaitingApproval {
		t.Errorf("the child not shown = %v, %v; want it still awaiting approval", run, err)
	}
	bad := a.postWith(t, c, "/runs/"+fam.Parent.ID.String()+"/approve", url.Values{"run": {"nope"}}, htmx)
	wantFragment(t, bad, "That is not a refund of this request.")
}

type familyDecisionJSON struct {
	Result   string  `json:"result"`
	Message  string  `json:"message"`
	Run      runJSON `json:"run"`
	Children []struct {
		RunID  uuid.UUID `json:"run_id"`
		State  string    `json:"state"`
		Result string    `json:"result"`
	} `json:"children"`
}

// TestAPIApproveFamily: POST /api/runs/{parent}/approve approves every
// child that waits; a repeat says already_approved for each.
func TestAPIApproveFamily(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	fam := a.queuedFamily(t, "customer@example.com", 1000, 2000)
	c := a.signedIn(t, "approver@example.com")
	path := "/api/runs/" + fam.Parent.ID.String() + "/approve"
	for i, want := range []string{"approved", "already_approved"} {
		r := a.decide(t, c, "/api/runs/"+fam.Parent.ID.String(), "approve", nil)
		wantStatus(t, r, http.StatusOK)
		d := decode[familyDecisionJSON](t, r)
		if d.Result != want || d.Run.ID != fam.Parent.ID || len(d.Children) != 2 {
			t.Fatalf("%s #%d = %+v, want %s with the parent and 2 children", path, i+1, d, want)
		}
		for j, ch := range d.Children {
			if ch.RunID != fam.Children[j].ID || ch.Result != want || ch.State != store.StateSubmitting {
				t.Errorf("%s #%d child %d = %+v, want %s, submitting", path, i+1, j+1, ch, want)
			}
		}
	}
	if n := a.count(t, `SELECT count(*) FROM run_events WHERE correlation_id = $1 AND type = $2`, fam.Parent.ID, store.EventApprovalGranted); n != 2 {
		t.Errorf("approval.granted events in the family = %d, want 2", n)
	}
}

// TestAPICancelFamily: a cancel of the request reaches every child; a
// child the refund may have left for is too_late, and so is the request.
func TestAPICancelFamily(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	ctx := context.Background()
	fam := a.queuedFamily(t, "customer@example.com", 1000, 2000)
	if _, err := a.store.Approve(ctx, fam.Children[0].ID, a.user(t, "approver@example.com").ID, ""); err != nil {
		t.Fatal(err)
	}
	op, err := a.store.SubmitOperation(ctx, fam.Children[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.BeginSubmit(ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	r := a.decide(t, c, "/api/runs/"+fam.Parent.ID.String(), "cancel", nil)
	wantStatus(t, r, http.StatusOK)
	d := decode[familyDecisionJSON](t, r)
	if d.Result != "too_late" || len(d.Children) != 2 || d.Children[0].Result != "too_late" || d.Children[1].Result != "cancel_requested" ||
		!strings.Contains(d.Message, "1 refund may already have reached the payment provider") {
		t.Errorf("cancel = %+v, want too_late: the first child too late, the second canceled", d)
	}
	if n := a.count(t, `SELECT count(*) FROM run_events WHERE correlation_id = $1 AND type = $2`, fam.Parent.ID, store.EventCancelRequested); n != 3 {
		t.Errorf("cancel.requested events in the family = %d, want 3 (the parent and each child)", n)
	}
	again := a.decide(t, c, "/runs/"+fam.Parent.ID.String(), "cancel", htmx)
	if got := strings.TrimSpace(again.doc(t).Find("#decision-result").Text()); !strings.HasPrefix(got, "A cancel of this request was already asked for.") {
		t.Errorf("a second cancel says %q", got)
	}
}

// TestQueueStream_Requests: a request's child joining an open queue draws
// its group (new, then again with the next child), and "Approve all" takes
// the group away.
func TestQueueStream_Requests(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{}, withListener())
	ctx := context.Background()
	u := a.user(t, "customer@example.com")
	orders, err := a.store.OrdersByCustomer(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	fam, _, err := a.store.StartFamily(ctx, store.FamilyRequest{OwnerID: u.ID, ClientRequestID: "stream", Reason: "late",
		Refunds: []store.RefundItem{{OrderID: orders[0].ID, Amount: 100}, {OrderID: orders[1].ID, Amount: 200}}})
	if err != nil {
		t.Fatal(err)
	}
	sa := &streamApp{app: a}
	watcher := a.signedIn(t, "approver@example.com")
	s := sa.open(t, watcher, a.queueURL(t, watcher, "/"), "")
	group := views.QueueRequestID(fam.Parent.ID)
	ask := func(ch store.Run) {
		t.Helper()
		if _, err := a.store.RequestApproval(ctx, ch.ID, store.ActionProposed{Action: "refund", OrderID: ch.OrderID, Amount: ch.Amount, Currency: ch.Currency}); err != nil {
			t.Fatal(err)
		}
	}

	ask(fam.Children[0])
	ev := s.next(t)
	if !strings.Contains(ev.Data, `hx-swap-oob="beforeend:#queue-list"`) || !strings.Contains(ev.Data, `id="`+group+`"`) ||
		!strings.Contains(ev.Data, views.QueueItemID(fam.Children[0].ID)) {
		t.Fatalf("first child asking: got %+v, want the request's group appended with its card", ev)
	}
	ask(fam.Children[1])
	ev = s.next(t)
	if !strings.Contains(ev.Data, `id="`+group+`" data-request="`+fam.Parent.ID.String()+`"`) || !strings.Contains(ev.Data, `hx-swap-oob="true"`) ||
		!strings.Contains(ev.Data, views.QueueItemID(fam.Children[1].ID)) || !strings.Contains(ev.Data, "Approve all 2") ||
		strings.Contains(ev.Data, "beforeend:#queue-list") {
		t.Fatalf("second child asking: got %+v, want the group drawn again in place with both cards", ev)
	}

	decider := a.signedIn(t, "approver@example.com")
	wantFragment(t, a.postWith(t, decider, "/runs/"+fam.Parent.ID.String()+"/approve", approveAllForm(fam.Children...), htmx),
		"You approved 2 refunds of this request.")
	// The two approvals commit in one transaction: one version or two
	// may reach the stream, and the last leaves no group.
	for {
		ev = s.next(t)
		if strings.Contains(ev.Data, `id="`+group+`" hx-swap-oob="delete"`) {
			break
		}
		if !strings.Contains(ev.Data, group) {
			t.Fatalf("after approve all got %+v, want the group redrawn or taken away", ev)
		}
	}
	if !strings.Contains(ev.Data, "No refund waits for a decision.") {
		t.Errorf("after approve all the count says %q", ev.Data)
	}
}

// TestAPIApproveFamily_NothingWaits: approving a request whose refunds
// were all approved is already_approved; one none of whose refunds ever
// asked is unknown to an approver (404); one whose only asking refund is
// being canceled is a 409, and nothing is approved.
func TestAPIApproveFamily_NothingWaits(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	fam := a.queuedFamily(t, "customer@example.com", 1000)
	if _, err := a.store.Approve(context.Background(), fam.Children[0].ID, a.user(t, "approver@example.com").ID, ""); err != nil {
		t.Fatal(err)
	}
	// Its one refund was approved already: a repeat, not an error.
	c := a.signedIn(t, "approver@example.com")
	r := a.decide(t, c, "/api/runs/"+fam.Parent.ID.String(), "approve", nil)
	wantStatus(t, r, http.StatusOK)
	if d := decode[familyDecisionJSON](t, r); d.Result != "already_approved" {
		t.Errorf("approve of an approved request = %+v, want already_approved", d)
	}
	ctx := context.Background()
	u := a.user(t, "customer2@example.com")
	orders, err := a.store.OrdersByCustomer(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := a.store.StartFamily(ctx, store.FamilyRequest{OwnerID: u.ID, ClientRequestID: "quiet", Reason: "late",
		Refunds: []store.RefundItem{{OrderID: orders[0].ID, Amount: 100}, {OrderID: orders[1].ID, Amount: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	// No child of it ever asked: to an approver it does not exist.
	wantStatus(t, a.decide(t, c, "/api/runs/"+other.Parent.ID.String(), "approve", nil), http.StatusNotFound)
	if _, err := a.store.RequestApproval(ctx, other.Children[0].ID, store.ActionProposed{Action: "refund", OrderID: orders[0].ID, Amount: 100, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.RequestCancel(ctx, other.Children[0].ID, u.ID); err != nil {
		t.Fatal(err)
	}
	r = a.decide(t, c, "/api/runs/"+other.Parent.ID.String(), "approve", nil)
	wantStatus(t, r, http.StatusConflict)
	if n := a.count(t, `SELECT count(*) FROM run_events WHERE correlation_id = $1 AND type = $2`, other.Parent.ID, store.EventApprovalGranted); n != 0 {
		t.Errorf("approval.granted events = %d, want none", n)
	}
}
