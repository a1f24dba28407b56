package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// queued is a run of the customer's of amount minor units that waits for
// an approver.
func (a *app) queued(t testing.TB, email string, amount int64) *store.Run {
	t.Helper()
	u, err := a.store.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	orders, err := a.store.OrdersByCustomer(context.Background(), u.ID)
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := a.store.StartRun(context.Background(), store.StartRequest{OwnerID: u.ID,
		ClientRequestID: fmt.Sprintf("q-%d-%d", u.ID, time.Now().UnixNano()), OrderID: orders[0].ID, Amount: amount, Reason: "arrived broken"})
	if err != nil {
		t.Fatal(err)
	}
	proposal := store.ActionProposed{Action: "refund", OrderID: run.OrderID, Amount: amount, Currency: run.Currency}
	if run, err = a.store.RequestApproval(context.Background(), run.ID, proposal); err != nil {
		t.Fatal(err)
	}
	return run
}

// queueURL is the sse-connect URL of the queue on the home page c sees.
func (a *app) queueURL(t *testing.T, c *http.Client, page string) string {
	t.Helper()
	r := a.get(t, c, page)
	wantStatus(t, r, http.StatusOK)
	u, ok := r.doc(t).Find("#approval-queue").Attr("sse-connect")
	if !ok {
		t.Fatalf("%s has no live queue:\n%s", page, r.body)
	}
	return u
}

func TestQueuePage_ShowsWhatADecisionRestsOn(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.queued(t, "customer2@example.com", 1250)
	doc := a.get(t, a.signedIn(t, "approver@example.com"), "/").doc(t)
	card := doc.Find("#" + views.QueueItemID(run.ID))
	text := strings.Join(strings.Fields(card.Text()), " ")
	facts := map[string]string{}
	card.Find("dt").Each(func(_ int, dt *goquery.Selection) {
		facts[dt.Text()] = strings.Join(strings.Fields(dt.Next().Text()), " ")
	})
	for fact, want := range map[string]string{
		"Customer": "Cam Customer (customer2@example.com)",
		"Item":     "Order #" + fmt.Sprint(run.OrderID) + ": Coffee beans, 1 kg, paid $24.50",
		"Amount":   "$12.50",
		"Reason":   "arrived broken",
		"Proposal": "The agent proposes to refund $12.50 on order #" + fmt.Sprint(run.OrderID) + ".",
	} {
		if facts[fact] != want {
			t.Errorf("%s = %q, want %q", fact, facts[fact], want)
		}
	}
	if asked := facts["Asked"]; !strings.HasSuffix(asked, " UTC") || !strings.Contains(asked, fmt.Sprint(time.Now().UTC().Year())) {
		t.Errorf("Asked = %q, want a date and time with its zone", asked)
	}
	for _, want := range []string{"Passed: No other refund was asked for on this order.", "Passed: The agent's proposal matches the request."} {
		if !strings.Contains(text, want) {
			t.Errorf("the card lacks %q:\n%s", want, text)
		}
	}
	if got := doc.Find("#queue-count").Text(); got != "1 refund waits for a decision." {
		t.Errorf("count = %q", got)
	}
	if n := card.Find(`form[action="/runs/` + run.ID.String() + `/approve"] button`).Length(); n != 1 {
		t.Errorf("approve buttons = %d, want 1", n)
	}
}

// TestQueuePage_Pages: past 50 the queue pages, and says how much it shows.
func TestQueuePage_Pages(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	for range 53 {
		a.queued(t, "customer2@example.com", 10)
	}
	c := a.signedIn(t, "approver@example.com")
	doc := a.get(t, c, "/").doc(t)
	if got, n := doc.Find("#queue-count").Text(), doc.Find(".queue-item").Length(); got != "Showing 50 of 53, oldest first." || n != 50 {
		t.Errorf("first page: %q with %d cards, want \"Showing 50 of 53, oldest first.\" with 50", got, n)
	}
	next, ok := doc.Find(`#queue-pager a[rel="next"]`).Attr("href")
	if !ok {
		t.Fatal("no link to the next page")
	}
	doc = a.get(t, c, next).doc(t)
	if got, n := doc.Find("#queue-count").Text(), doc.Find(".queue-item").Length(); got != "Showing 51–53 of 53, oldest first." || n != 3 {
		t.Errorf("second page: %q with %d cards, want \"Showing 51–53 of 53, oldest first.\" with 3", got, n)
	}
	if doc.Find(`#queue-pager a[rel="next"]`).Length() != 0 || doc.Find(`#queue-pager a`).Text() != "First page" {
		t.Errorf("second page's pager = %q, want only a link to the first page", doc.Find("#queue-pager").Text())
	}
	if u := a.queueURL(t, c, next); !strings.Contains(u, "start=") {
		t.Errorf("the second page's stream %q does not keep its place", u)
	}
	r := a.get(t, c, "/?queue_after=x")
	wantStatus(t, r, http.StatusUnprocessableEntity)
	if !strings.Contains(r.body, "not a page of the approval queue") {
		t.Errorf("a bad page says:\n%s", r.body)
	}
}

// TestQueueStream_Live: a decision made anywhere leaves every open queue,
// and a new request joins it, each as one message whose id is the queue
// version it brings the page to.
func TestQueueStream_Live(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{}, withListener())
	first := a.queued(t, "customer2@example.com", 100)
	second := a.queued(t, "customer@example.com", 100)
	sa := &streamApp{app: a}
	watcher := a.signedIn(t, "approver@example.com")
	url := a.queueURL(t, watcher, "/")
	if !strings.HasSuffix(url, "after=2") {
		t.Fatalf("sse-connect = %q, want the page's version 2", url)
	}
	s := sa.open(t, watcher, url, "")

	decider := a.signedIn(t, "approver@example.com")
	wantStatus(t, a.decide(t, decider, "/runs/"+first.ID.String(), "approve", map[string]string{"HX-Request": "true"}), http.StatusOK)
	ev := s.next(t)
	if ev.Event != "" || ev.ID != "3" || !strings.Contains(ev.Data, `id="`+views.QueueItemID(first.ID)+`" hx-swap-oob="delete"`) ||
		!strings.Contains(ev.Data, "1 refund waits for a decision.") || strings.Contains(ev.Data, views.QueueItemID(second.ID)) {
		t.Fatalf("after an approval got %+v, want version 3 removing the approved card", ev)
	}

	third := a.queued(t, "customer2@example.com", 100)
	ev = s.next(t)
	if ev.Event != "" || ev.ID != "4" || !strings.Contains(ev.Data, `hx-swap-oob="beforeend:#queue-list"`) ||
		!strings.Contains(ev.Data, `id="`+views.QueueItemID(third.ID)+`"`) || !strings.Contains(ev.Data, "2 refunds wait") {
		t.Fatalf("after a new request got %+v, want version 4 adding its card", ev)
	}

	// A cancel asked for takes the run out of the queue as well.
	if _, err := a.store.RequestCancel(context.Background(), second.ID, second.OwnerID); err != nil {
		t.Fatal(err)
	}
	if ev = s.next(t); ev.ID != "5" || !strings.Contains(ev.Data, views.QueueItemID(second.ID)) {
		t.Fatalf("after a cancel got %+v, want version 5 removing the card", ev)
	}
}

// TestQueueStream_Cursor: a cursor that is the current version resumes
// quietly; any other (behind, from the future, malformed) gets a reset with
// the page as it is now. Last-Event-ID wins over after=.
func TestQueueStream_Cursor(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{}, withListener())
	run := a.queued(t, "customer2@example.com", 100)
	sa := &streamApp{app: a}
	c := a.signedIn(t, "approver@example.com")
	for _, tc := range []struct{ name, path, lastEventID string }{
		{"behind", "/queue/events?after=0", ""},
		{"future", "/queue/events?after=99", ""},
		{"malformed", "/queue/events", "x1"},
		{"last-event-id wins", "/queue/events?after=1", "7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := sa.open(t, c, tc.path, tc.lastEventID).next(t)
			if ev.Event != "reset" || ev.ID != "1" || !strings.Contains(ev.Data, `id="queue-body" hx-swap-oob="true"`) ||
				!strings.Contains(ev.Data, views.QueueItemID(run.ID)) {
				t.Errorf("got %+v, want a reset to version 1 with the card", ev)
			}
		})
	}
	t.Run("not a page", func(t *testing.T) {
		s := sa.open(t, c, "/queue/events?after=1&start=-3", "")
		if ev := s.next(t); ev.Event != "close" || !strings.Contains(ev.Data, "not a page of the approval queue") {
			t.Errorf("got %+v, want the close event saying the page is not one", ev)
		}
		s.wantEnd(t)
	})
	t.Run("resumes", func(t *testing.T) {
		s := sa.open(t, c, "/queue/events?after=0", "1")
		other := a.queued(t, "customer2@example.com", 100)
		if ev := s.next(t); ev.Event != "" || ev.ID != "2" || !strings.Contains(ev.Data, views.QueueItemID(other.ID)) {
			t.Errorf("got %+v, want only the change to version 2", ev)
		}
	})
}

// TestQueueStream_OnlyApprovers: anyone else is told why and the stream
// closes, so the browser stops asking.
func TestQueueStream_OnlyApprovers(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{}, withListener())
	a.queued(t, "customer2@example.com", 100)
	sa := &streamApp{app: a}
	for _, tc := range []struct {
		name string
		c    *http.Client
		want string
	}{
		{"signed out", a.client(t), "Your session has ended"},
		{"customer", a.signedIn(t, "customer@example.com"), "for approvers"},
		{"support", a.signedIn(t, "support@example.com"), "for approvers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sa.open(t, tc.c, "/queue/events?after=0", "")
			ev := s.next(t)
			if ev.Event != "close" || !strings.Contains(ev.Data, tc.want) || strings.Contains(ev.Data, "queue-item") {
				t.Errorf("got %+v, want only a close event saying %q", ev, tc.want)
			}
			s.wantEnd(t)
		})
	}
	t.Run("logged out while watching", func(t *testing.T) {
		c := a.signedIn(t, "approver@example.com")
		s := sa.open(t, c, a.queueURL(t, c, "/"), "")
		wantRedirect(t, a.post(t, c, "/logout", nil), "/login")
		ev := s.next(t)
		if ev.Event != "close" || !strings.Contains(ev.Data, "Your session has ended") {
			t.Errorf("got %+v, want the close event", ev)
		}
		s.wantEnd(t)
	})
}
