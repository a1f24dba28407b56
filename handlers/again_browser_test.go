package handlers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
)

// TestBrowser_AskAgainFromFailedRun: in Chromium, the customer opens a
// failed run, clicks "Ask again", finds the form filled in with its order,
// amount and reason, submits it, and lands on a new run that says what it
// asks again for; its link leads back to the old run, which now links to
// the new one. The old run is as it was.
func TestBrowser_AskAgainFromFailedRun(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{DemoLogins: true})
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	old := b.failed()
	before := a.frozen(t, old.ID)
	oldPath := "/runs/" + old.ID.String()

	ctx := browsertest.New(t)
	if err := browsertest.Login(ctx, a.srv.URL, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(a.srv.URL+oldPath),
		chromedp.WaitVisible(chromedp.CSS("#outcome")),
		chromedp.Click(chromedp.CSS("#ask-again")),
		chromedp.WaitVisible(chromedp.CSS("#start-form")),
	); err != nil {
		t.Fatal(err)
	}
	got := filledForm(t, ctx)
	order := itoa(old.OrderID)
	if len(got.Ticked) != 1 || got.Ticked[0] != order || got.Amount != "25.00" || got.Reason != old.Reason || got.RetryOf != old.ID.String() {
		t.Fatalf("the form = %+v; want order %s ticked, 25.00, %q, asking again for %s", got, order, old.Reason, old.ID)
	}

	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#start-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#retry-of")),
	); err != nil {
		t.Fatal(err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	id, err := uuid.Parse(strings.TrimPrefix(loc, a.srv.URL+"/runs/"))
	if err != nil {
		t.Fatalf("landed on %s, want the new run's page", loc)
	}
	run, err := a.store.RunByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if run.RetryOf.UUID != old.ID || run.OrderID != old.OrderID || run.Amount != old.Amount || run.Reason != old.Reason {
		t.Errorf("the new run = %+v, want it to ask again for %s with the same order, amount and reason", run, old.ID)
	}
	said, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#retry-of').innerText`))
	if err != nil || !strings.HasPrefix(said, "This asks again for the request of") {
		t.Errorf("the new run's page says %q (%v), want what it asks again for", said, err)
	}

	// Its link leads back; the old run now links to the new one.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS("#retry-of a")),
		chromedp.WaitVisible(chromedp.CSS(`#asked-again a[href="/runs/`+id.String()+`"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if said, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#asked-again').innerText`)); err != nil || !strings.HasPrefix(said, "Asked again: the request of") {
		t.Errorf("the old run's page says %q (%v), want that it was asked again", said, err)
	}
	if after := a.frozen(t, old.ID); after != before {
		t.Errorf("the old run changed:\n%s\nwant\n%s", after, before)
	}
	// The form and both ends of the link fit a phone and a laptop.
	checkAskAgainPagesFit(t, ctx, a.srv.URL, oldPath, id)
}

// filledForm is the start form as the browser holds it: the orders
// ticked, the first one's amount, the reason and the run it asks again for.
type filled struct {
	Ticked  []string `json:"ticked"`
	Amount  string   `json:"amount"`
	Reason  string   `json:"reason"`
	RetryOf string   `json:"retryOf"`
}

func filledForm(t *testing.T, ctx context.Context) filled {
	t.Helper()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[filled](`(() => {
		const f = document.querySelector('#start-form');
		const ticked = [...f.querySelectorAll('input[name="order_id"]:checked')].map(i => i.value);
		return {ticked, amount: ticked.length ? f.querySelector('input[name="amount_' + ticked[0] + '"]').value : '',
			reason: f.querySelector('textarea[name="reason"]').value,
			retryOf: f.querySelector('input[name="retry_of"]').value};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// checkAskAgainPagesFit opens the form asking again for the old run and
// the pages of both runs at every width (checkPage).
func checkAskAgainPagesFit(t *testing.T, ctx context.Context, base, oldPath string, id uuid.UUID) {
	t.Helper()
	for _, p := range []shownPage{
		{name: "ask-again", path: oldPath + "/again", ready: "#asking-again"},
		{name: "run-asked-again", path: oldPath, ready: "#asked-again"},
		{name: "run-asks-again", path: "/runs/" + id.String(), ready: "#retry-of"},
	} {
		for _, w := range pageWidths {
			checkPage(t, ctx, base, p, w)
		}
	}
}
