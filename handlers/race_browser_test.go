package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// keptReason is what a page says after another approver decided the run
// its viewer was deciding on.
type keptReason struct {
	Said   string `json:"said"`
	Reason string `json:"reason"`
}

// keptReasonJS reads it: on the run page from the kept reason's box, on
// the queue from the note that took the card's place.
const keptReasonJS = `(() => {
	const box = document.querySelector('.kept-reason');
	if (!box) return {said: '', reason: ''};
	const note = box.closest('#queue-decided li');
	const said = note ? note.firstChild.textContent : box.querySelector('p').textContent;
	return {said, reason: box.querySelector('textarea')?.value ?? ''};
})()`

// TestBrowser_DecisionRaceKeepsTheReason: Ada has half typed a reason to
// approve a run, on its page and on a card of her queue, when Avery
// decides it. Each screen says who decided what, and keeps what Ada typed.
func TestBrowser_DecisionRaceKeepsTheReason(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{Stream: stream.Config{Retry: 200 * time.Millisecond}}, withListener())
	if _, err := a.store.CreateUser(context.Background(), "approver2@example.com", "Ada Approver", store.RoleApprover, devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	avery := a.user(t, "approver@example.com")
	onPage := a.queued(t, "customer@example.com", 1250)
	onQueue := a.queued(t, "customer2@example.com", 700)
	ctx := browsertest.New(t)
	if err := browsertest.Login(ctx, a.srv.URL, "approver2@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}

	t.Run("run page", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/runs/"+onPage.ID.String())); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the page live", `document.getElementById('stream-indicator')?.dataset.state === 'live'`)
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#approve")),
			chromedp.SendKeys(chromedp.CSS("#approve-reason"), "receipt looks")); err != nil {
			t.Fatal(err)
		}
		if _, err := a.store.Approve(context.Background(), onPage.ID, avery.ID, "photos checked"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the decision told", `!!document.querySelector('.kept-reason')`)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[keptReason](keptReasonJS))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got.Said, "Approved by Avery Approver (approver)") || !strings.Contains(got.Said, "photos checked") || got.Reason != "receipt looks" {
			t.Errorf("page says %+v, want Avery's approval and Ada's reason kept", got)
		}
	})
	t.Run("queue", func(t *testing.T) {
		card := "#" + views.QueueItemID(onQueue.ID)
		if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the queue live", queueLive+` && `+cardShown(views.QueueItemID(onQueue.ID)))
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(card+" summary.cancel")),
			chromedp.SendKeys(chromedp.CSS(card+` details[open] input[name="reason"]`), "customer called")); err != nil {
			t.Fatal(err)
		}
		if _, err := a.store.RequestCancelBecause(context.Background(), onQueue.ID, avery.ID, ""); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the card replaced by who decided", cardGone(views.QueueItemID(onQueue.ID))+` && !!document.querySelector('#queue-decided .kept-reason')`)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[keptReason](keptReasonJS))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got.Said, "Avery Approver (approver) asked to cancel the refund of $7.00") || got.Reason != "customer called" {
			t.Errorf("queue says %+v, want Avery's cancel and Ada's reason kept", got)
		}
	})
}
