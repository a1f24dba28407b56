package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

// againJSON is a run as POST /api/runs answers it, with its link.
type againJSON struct {
	ID       uuid.UUID  `json:"id"`
	Kind     string     `json:"kind"`
	State    string     `json:"state"`
	OrderID  int64      `json:"order_id"`
	Amount   int64      `json:"amount"`
	Reason   string     `json:"reason"`
	RetryOf  *uuid.UUID `json:"retry_of"`
	Children []struct {
		OrderID int64 `json:"order_id"`
		Amount  int64 `json:"amount"`
	} `json:"children"`
}

// askAgainBody is POST /api/runs' body asking again for id, with extra
// fields (`,"amount":100`).
func askAgainBody(id uuid.UUID, extra string) string {
	return fmt.Sprintf(`{"retry_of":%q%s}`, id, extra)
}

// frozen is everything stored of a run and its operations: asking again
// for it must leave it as it was.
func (a *app) frozen(t *testing.T, id uuid.UUID) string {
	t.Helper()
	var s string
	err := a.db.Get(&s, `SELECT (SELECT row_to_json(r)::text FROM runs r WHERE r.id = $1)
        || ' ops ' || COALESCE((SELECT json_agg(o ORDER BY o.id)::text FROM operations o WHERE o.run_id = $1), '[]')
        || ' events ' || (SELECT count(*) || '/' || COALESCE(max(seq), 0) FROM run_events WHERE run_id = $1)
        || ' final ' || COALESCE((SELECT body FROM final_messages WHERE run_id = $1), '')`, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// failedRunOf is a run of email's first order that failed.
func (a *app) failedRunOf(t *testing.T, email string) *store.Run {
	t.Helper()
	run := a.startRun(t, email, 100)
	run, err := a.store.FinishRun(context.Background(), run.ID, store.StateFailed, store.Say("Not refunded."))
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// TestAPIAskAgain: retry_of asks again for a run the provider declined:
// a new run with its own key, the same order, amount and reason, naming
// the old run; the same key answers with it, another body under that key
// is 422; a second ask while the first goes on cannot refund more than was
// paid; the fields given win over the copied ones; the old run and its
// operation are never touched.
func TestAPIAskAgain(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	old := b.declined()
	oldBefore := a.frozen(t, old.ID)
	c := a.signedIn(t, "customer@example.com")

	r := a.apiStart(t, c, "again-1", askAgainBody(old.ID, ""))
	wantStatus(t, r, http.StatusCreated)
	run := decode[againJSON](t, r)
	if run.RetryOf == nil || *run.RetryOf != old.ID || run.ID == old.ID || run.Kind != store.KindRefund ||
		run.OrderID != old.OrderID || run.Amount != old.Amount || run.Reason != old.Reason || run.State != store.StateCreated {
		t.Errorf("asked again: %+v; want a new run of order %d, %d, %q naming %s", run, old.OrderID, old.Amount, old.Reason, old.ID)
	}
	if loc := r.header.Get("Location"); loc != "/api/runs/"+run.ID.String() {
		t.Errorf("Location = %q", loc)
	}
	// The same key: the same run, whether the copied fields are sent or not.
	for _, body := range []string{askAgainBody(old.ID, ""), askAgainBody(old.ID, fmt.Sprintf(`,"reason":%q`, old.Reason))} {
		same := a.apiStart(t, c, "again-1", body)
		wantStatus(t, same, http.StatusOK)
		if got := decode[againJSON](t, same).ID; got != run.ID {
			t.Errorf("same key (%s): run %s, want %s", body, got, run.ID)
		}
	}
	// The same key with another body, or asking again for nothing, is 422.
	wantAPIError(t, a.apiStart(t, c, "again-1", askAgainBody(old.ID, `,"reason":"Another reason."`)), http.StatusUnprocessableEntity, store.CodeIdempotencyConflict)
	wantAPIError(t, a.apiStart(t, c, "again-1", startBody(old.OrderID, old.Amount, old.Reason)), http.StatusUnprocessableEntity, store.CodeIdempotencyConflict)
	snap := a.get(t, c, "/api/runs/"+run.ID.String())
	wantStatus(t, snap, http.StatusOK)
	if got := decode[struct{ Run againJSON }](t, snap).Run.RetryOf; got == nil || *got != old.ID {
		t.Errorf("snapshot's retry_of = %v, want %s", got, old.ID)
	}
	// Rule 13: the first new run still reserves the jacket's whole price.
	e := wantAPIError(t, a.apiStart(t, c, "again-2", askAgainBody(old.ID, "")), http.StatusUnprocessableEntity, store.CodeInvalid)
	if !strings.Contains(e.Error.Message, "still refundable") {
		t.Errorf("second ask: %q, want the amount still refundable", e.Error.Message)
	}

	// What the body gives wins: another amount and reason.
	failed := b.failed()
	r = a.apiStart(t, c, "again-3", askAgainBody(failed.ID, `,"amount":1000,"reason":"Still too small."`))
	wantStatus(t, r, http.StatusCreated)
	if got := decode[againJSON](t, r); got.OrderID != failed.OrderID || got.Amount != 1000 || got.Reason != "Still too small." || *got.RetryOf != failed.ID {
		t.Errorf("with amount and reason: %+v", got)
	}

	if after := a.frozen(t, old.ID); after != oldBefore {
		t.Errorf("the old run changed:\n%s\nwant\n%s", after, oldBefore)
	}
	if n := a.count(t, `SELECT count(*) FROM runs WHERE retry_of IS NOT NULL`); n != 2 {
		t.Errorf("runs asking again = %d, want 2", n)
	}
}

// TestAPIAskAgain_Refused: a run that refunded or is still going is 409
// with its state; another customer's run, or none, is 404; a retry_of that
// is no ID is 400; staff may not ask; nothing is started.
func TestAPIAskAgain_Refused(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	completed := b.completed()
	waiting := a.awaitingApproval(t, "customer@example.com")
	fam := a.startFamily(t, 100, 200)
	for _, ch := range fam.Children {
		a.refundChild(t, ch.ID, true)
	}
	others := a.failedRunOf(t, "customer2@example.com")
	c := a.signedIn(t, "customer@example.com")
	runs := a.count(t, `SELECT count(*) FROM runs`)

	for _, tc := range []struct {
		name string
		run  *store.Run
	}{{"refunded", completed}, {"waiting for an approver", waiting}, {"a request wholly refunded", fam.Parent}} {
		before := a.frozen(t, tc.run.ID)
		r := a.apiStart(t, c, uuid.NewString(), askAgainBody(tc.run.ID, ""))
		now, err := a.store.RunByID(context.Background(), tc.run.ID)
		if err != nil {
			t.Fatal(err)
		}
		state := now.State
		if e := wantAPIError(t, r, http.StatusConflict, store.CodeConflict); e.Error.State != state {
			t.Errorf("%s: state %q, want %q", tc.name, e.Error.State, state)
		}
		if after := a.frozen(t, tc.run.ID); after != before {
			t.Errorf("%s: the run changed", tc.name)
		}
	}
	wantAPIError(t, a.apiStart(t, c, uuid.NewString(), askAgainBody(others.ID, "")), http.StatusNotFound, store.CodeNotFound)
	wantAPIError(t, a.apiStart(t, c, uuid.NewString(), askAgainBody(uuid.New(), "")), http.StatusNotFound, store.CodeNotFound)
	wantAPIError(t, a.apiStart(t, c, uuid.NewString(), `{"retry_of":"last week's"}`), http.StatusBadRequest, "invalid_json")
	wantAPIError(t, a.apiStart(t, a.signedIn(t, "approver@example.com"), uuid.NewString(), askAgainBody(others.ID, "")), http.StatusForbidden, store.CodeForbidden)
	if n := a.count(t, `SELECT count(*) FROM runs`); n != runs {
		t.Errorf("runs = %d after the refusals, want %d", n, runs)
	}
}

// TestAPIAskAgain_Request: a request partly refunded is asked again for
// its refunds that were not made, as a new request; with one left, as a
// single run, as the form would start it.
func TestAPIAskAgain_Request(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.signedIn(t, "customer@example.com")
	fam := a.startFamily(t, familyAmounts...)
	a.refundChild(t, fam.Children[0].ID, true)
	a.refundChild(t, fam.Children[1].ID, false)
	if _, err := a.store.FinishRun(context.Background(), fam.Children[2].ID, store.StateCanceled, store.Say("Canceled.")); err != nil {
		t.Fatal(err)
	}
	r := a.apiStart(t, c, "again-request", askAgainBody(fam.Parent.ID, ""))
	wantStatus(t, r, http.StatusCreated)
	got := decode[againJSON](t, r)
	want := fmt.Sprint([]int64{fam.Children[1].OrderID, familyAmounts[1], fam.Children[2].OrderID, familyAmounts[2]})
	var items []int64
	for _, ch := range got.Children {
		items = append(items, ch.OrderID, ch.Amount)
	}
	if got.Kind != store.KindRequest || *got.RetryOf != fam.Parent.ID || got.Reason != fam.Parent.Reason || fmt.Sprint(items) != want {
		t.Errorf("request asked again: %+v with %v; want a request naming %s with %s", got, items, fam.Parent.ID, want)
	}

	one := a.startFamily(t, 100, 300)
	a.refundChild(t, one.Children[0].ID, true)
	a.refundChild(t, one.Children[1].ID, false)
	r = a.apiStart(t, c, "again-one", askAgainBody(one.Parent.ID, ""))
	wantStatus(t, r, http.StatusCreated)
	if got := decode[againJSON](t, r); got.Kind != store.KindRefund || got.OrderID != one.Children[1].OrderID || got.Amount != 300 || *got.RetryOf != one.Parent.ID {
		t.Errorf("one refund left: %+v, want a single run of order %d naming %s", got, one.Children[1].OrderID, one.Parent.ID)
	}
}

// askAgainForm reads the form GET /runs/{id}/again serves, as a browser
// would submit it.
func (a *app) askAgainForm(t *testing.T, c *http.Client, id uuid.UUID) (url.Values, *goquery.Document) {
	t.Helper()
	r := a.get(t, c, "/runs/"+id.String()+"/again")
	wantStatus(t, r, http.StatusOK)
	doc := r.doc(t)
	form := url.Values{}
	doc.Find("#start-form input, #start-form textarea").Each(func(_ int, s *goquery.Selection) {
		name, _ := s.Attr("name")
		value, _ := s.Attr("value")
		switch {
		case goquery.NodeName(s) == "textarea":
			value = s.Text()
		case s.AttrOr("type", "") == "checkbox" && s.AttrOr("checked", "no") == "no":
			return
		}
		form.Add(name, value)
	})
	return form, doc
}

// TestAskAgain_FormFilledAndLinkedBothWays: a failed run's page offers its
// owner "Ask again", which opens the start form filled in as the run was
// asked for; submitting it starts a new run that links back, and the old
// page links to it; support sees the chain. Refunded runs offer nothing.
func TestAskAgain_FormFilledAndLinkedBothWays(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	old := b.failed()
	before := a.frozen(t, old.ID)
	c := a.signedIn(t, "customer@example.com")
	oldPath := "/runs/" + old.ID.String()

	page := a.get(t, c, oldPath).doc(t)
	if href, _ := page.Find("#ask-again").Attr("href"); href != oldPath+"/again" {
		t.Fatalf("Ask again links to %q, want %s/again", href, oldPath)
	}
	form, doc := a.askAgainForm(t, c, old.ID)
	order := fmt.Sprint(old.OrderID)
	if form.Get("retry_of") != old.ID.String() || uuid.Validate(form.Get("request_id")) != nil ||
		fmt.Sprint(form["order_id"]) != "["+order+"]" || form.Get("amount_"+order) != "25.00" || form.Get("reason") != old.Reason {
		t.Errorf("form = %v; want order %s ticked, 25.00, %q, retry_of %s and a request ID", form, order, old.Reason, old.ID)
	}
	if href, _ := doc.Find("#asking-again a").Attr("href"); href != oldPath {
		t.Errorf("the form's note links to %q, want %s", href, oldPath)
	}

	r := a.post(t, c, "/runs", form)
	wantStatus(t, r, http.StatusSeeOther)
	newPath := r.header.Get("Location")
	again := a.post(t, c, "/runs", form) // the same form again: the same run
	wantRedirect(t, again, newPath)
	id, err := uuid.Parse(strings.TrimPrefix(newPath, "/runs/"))
	if err != nil {
		t.Fatalf("Location = %q", newPath)
	}
	run, err := a.store.RunByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if run.RetryOf.UUID != old.ID || run.ClientRequestID != form.Get("request_id") || run.Amount != old.Amount || run.OrderID != old.OrderID {
		t.Errorf("new run %+v, want €25.00 of order %d under the form's key, naming %s", run, old.OrderID, old.ID)
	}

	newPage := a.get(t, c, newPath).doc(t)
	link := newPage.Find("#retry-of a")
	if href, _ := link.Attr("href"); href != oldPath || !strings.HasPrefix(newPage.Find("#retry-of").Text(), "This asks again for the request of") ||
		!strings.Contains(newPage.Find("#retry-of").Text(), "(Failed)") {
		t.Errorf("new page: %q linking %q, want it to ask again for %s, which failed", newPage.Find("#retry-of").Text(), href, oldPath)
	}
	if newPage.Find("#ask-again").Length() != 0 {
		t.Error("a run that goes on offers Ask again")
	}
	oldPage := a.get(t, c, oldPath).doc(t)
	said := strings.Join(strings.Fields(oldPage.Find("#asked-again").Text()), " ")
	if href, _ := oldPage.Find("#asked-again a").Attr("href"); href != newPath || !strings.HasPrefix(said, "Asked again: the request of") || !strings.HasSuffix(said, "UTC.") {
		t.Errorf("old page: %q linking %q, want it asked again by %s", said, href, newPath)
	}

	support := a.get(t, a.signedIn(t, "support@example.com"), "/support/runs/"+id.String()).doc(t)
	var chain []string
	support.Find("#retry-chain li").Each(func(_ int, s *goquery.Selection) { chain = append(chain, s.AttrOr("data-run-id", "")) })
	if want := fmt.Sprint([]string{old.ID.String(), id.String()}); fmt.Sprint(chain) != want {
		t.Errorf("support's chain = %v, want %s", chain, want)
	}
	if after := a.frozen(t, old.ID); after != before {
		t.Errorf("the old run changed:\n%s\nwant\n%s", after, before)
	}
}

// TestAskAgain_PageRefused: a refunded run offers no "Ask again" and its
// form is a 409 that says why; someone else's run is 404, as is a form
// posted with another's run in retry_of; staff may not ask.
func TestAskAgain_PageRefused(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	old := b.failed()
	oldPath := "/runs/" + old.ID.String()
	c := a.signedIn(t, "customer@example.com")
	done := b.completed()
	if a.get(t, c, "/runs/"+done.ID.String()).doc(t).Find("#ask-again").Length() != 0 {
		t.Error("a refunded run offers Ask again")
	}
	refused := a.get(t, c, "/runs/"+done.ID.String()+"/again")
	wantStatus(t, refused, http.StatusConflict)
	if !strings.Contains(refused.body, "This request was refunded") {
		t.Errorf("409 page does not say why:\n%.600s", refused.body)
	}
	wantStatus(t, a.get(t, a.signedIn(t, "customer2@example.com"), oldPath+"/again"), http.StatusNotFound)
	wantStatus(t, a.get(t, a.signedIn(t, "approver@example.com"), oldPath+"/again"), http.StatusForbidden)
	// A forged retry_of names no run of the poster's.
	forged := a.post(t, a.signedIn(t, "customer2@example.com"), "/runs", url.Values{"request_id": {uuid.NewString()},
		"retry_of": {old.ID.String()}, "order_id": {fmt.Sprint(a.order(t, "customer2@example.com", "Coffee beans, 1 kg").ID)},
		"amount": {"1.00"}, "reason": {"x"}})
	wantStatus(t, forged, http.StatusNotFound)
}

// TestAskAgain_RequestPartlyRefunded: a request's page offers asking again
// for its refunds not made, and the form holds those only.
func TestAskAgain_RequestPartlyRefunded(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.signedIn(t, "customer@example.com")
	fam := a.startFamily(t, familyAmounts...)
	a.refundChild(t, fam.Children[0].ID, true)
	a.refundChild(t, fam.Children[1].ID, false)
	a.refundChild(t, fam.Children[2].ID, false)
	page := a.get(t, c, "/runs/"+fam.Parent.ID.String()).doc(t)
	if got := strings.TrimSpace(page.Find("#ask-again").Text()); got != "Ask again for the two orders not refunded" {
		t.Errorf("button = %q", got)
	}
	form, _ := a.askAgainForm(t, c, fam.Parent.ID)
	o1, o2 := fmt.Sprint(fam.Children[1].OrderID), fmt.Sprint(fam.Children[2].OrderID)
	picked := form["order_id"]
	slices.Sort(picked)
	if fmt.Sprint(picked) != fmt.Sprint(slices.Sorted(slices.Values([]string{o1, o2}))) || form.Get("amount_"+o1) != "2.00" || form.Get("amount_"+o2) != "1.50" {
		t.Errorf("form = %v, want orders %s (2.00) and %s (1.50)", form, o1, o2)
	}
	r := a.post(t, c, "/runs", form)
	wantStatus(t, r, http.StatusSeeOther)
	newPage := a.get(t, c, r.header.Get("Location")).doc(t)
	if href, _ := newPage.Find("#retry-of a").Attr("href"); href != "/runs/"+fam.Parent.ID.String() {
		t.Errorf("the new request links to %q, want the old one", href)
	}
	if href, _ := a.get(t, c, "/runs/"+fam.Parent.ID.String()).doc(t).Find("#asked-again a").Attr("href"); href != r.header.Get("Location") {
		t.Errorf("the old request links to %q, want %s", href, r.header.Get("Location"))
	}
}
