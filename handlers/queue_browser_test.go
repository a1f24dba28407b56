package handlers_test

import (
	"context"
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

// waitFor waits until the JavaScript condition holds in the browser tab
// ctx, and says how long that took (for the log: timing is no assertion).
func waitFor(t *testing.T, ctx context.Context, what, cond string) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(10*time.Millisecond))); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return time.Since(start)
}

func cardGone(id string) string  { return `!document.getElementById(` + jsString(id) + `)` }
func cardShown(id string) string { return `!!document.getElementById(` + jsString(id) + `)` }
func countIs(text string) string {
	return `document.getElementById('queue-count').textContent === ` + jsString(text)
}
func jsString(s string) string { return "'" + s + "'" } // ids and our own words: no quotes inside
const queueLive = `document.getElementById('stream-indicator')?.dataset.state === 'live'`

// TestQueueBrowser_TwoApprovers: two approvers watch the queue in their own
// browser contexts; one approves from the queue, and the card leaves the
// other's queue without a reload; a new request joins both. One of them
// watches on a 360 px wide screen, which must not scroll sideways.
func TestQueueBrowser_TwoApprovers(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{Stream: stream.Config{Retry: 200 * time.Millisecond}}, withListener())
	if _, err := a.store.CreateUser(context.Background(), "approver2@example.com", "Ada Approver", store.RoleApprover, devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	first := a.queued(t, "customer2@example.com", 1250)
	second := a.queued(t, "customer@example.com", 500)

	one := browsertest.New(t)
	two, cancel := chromedp.NewContext(one, chromedp.WithNewBrowserContext())
	defer cancel()
	if err := chromedp.Do(two, chromedp.EmulateViewport(360, 780)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		ctx   context.Context
		email string
	}{{one, "approver@example.com"}, {two, "approver2@example.com"}} {
		if err := browsertest.Login(s.ctx, a.srv.URL, s.email, devdb.DemoPassword); err != nil {
			t.Fatal(err)
		}
		waitFor(t, s.ctx, s.email+"'s queue to be live with both cards",
			queueLive+` && `+cardShown(views.QueueItemID(first.ID))+` && `+cardShown(views.QueueItemID(second.ID)))
	}
	if wide, err := chromedp.Run(two, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)); err != nil || wide {
		t.Errorf("the queue scrolls sideways at 360 px (%v)", err)
	}

	start := time.Now()
	// Approve asks first: open the confirmation, then confirm.
	card := "#" + views.QueueItemID(first.ID)
	for _, sel := range []string{card + " summary.approve", card + " button.approve"} {
		if err := chromedp.Do(one, chromedp.Click(chromedp.CSS(sel))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, one, "the decider's answer", `document.getElementById('decision-result').textContent === 'You approved this refund.'`)
	waitFor(t, two, "the approved card to leave the other queue", cardGone(views.QueueItemID(first.ID))+` && `+countIs("1 refund waits for a decision."))
	t.Logf("approve clicked → card gone from the other approver's queue: %v", time.Since(start))
	waitFor(t, one, "the approved card to leave the decider's queue", cardGone(views.QueueItemID(first.ID)))
	if run, err := a.store.RunByID(context.Background(), first.ID); err != nil || run.State != store.StateSubmitting {
		t.Errorf("the approved run is %v (%v), want submitting", run, err)
	}

	start = time.Now()
	third := a.queued(t, "customer2@example.com", 300)
	for _, ctx := range []context.Context{one, two} {
		waitFor(t, ctx, "the new request to join the queue", cardShown(views.QueueItemID(third.ID))+` && `+countIs("2 refunds wait for a decision, oldest first."))
	}
	t.Logf("request committed → card shown in both queues: %v", time.Since(start))
}
