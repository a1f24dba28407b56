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

// TestQueueBrowser_ApproveAllOfARequest: an approver sees a request's
// three children grouped under it, approves all of them with one confirmed
// action, reads the answer, and the group leaves the live queue; a run of
// its own stays. Every child is approved once in PostgreSQL.
func TestQueueBrowser_ApproveAllOfARequest(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{Stream: stream.Config{Retry: 200 * time.Millisecond}}, withListener())
	single := a.queued(t, "customer2@example.com", 1250)
	fam := a.queuedFamily(t, "customer@example.com", 1000, 2000, 500)
	group := "#" + views.QueueRequestID(fam.Parent.ID)

	ctx := browsertest.New(t)
	if err := browsertest.Login(ctx, a.srv.URL, "approver@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the live queue with the request's three children under it", queueLive+` && `+
		`document.querySelectorAll('`+group+` .queue-item').length === 3 && `+cardShown(views.QueueItemID(single.ID)))

	for _, sel := range []string{group + "-approve summary", group + "-approve button.approve"} {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
			t.Fatalf("click %s: %v", sel, err)
		}
	}
	waitFor(t, ctx, "the answer", `document.getElementById('decision-result').textContent === 'You approved 3 refunds of this request.'`)
	waitFor(t, ctx, "the request to leave the queue", cardGone(views.QueueRequestID(fam.Parent.ID))+` && `+
		cardShown(views.QueueItemID(single.ID))+` && `+countIs("1 refund waits for a decision."))

	for _, ch := range fam.Children {
		run, err := a.store.RunByID(context.Background(), ch.ID)
		if err != nil || run.State != store.StateSubmitting {
			t.Errorf("child %d = %v, %v; want submitting", ch.Position, run, err)
		}
		if n := a.events(t, &ch, store.EventApprovalGranted); n != 1 {
			t.Errorf("child %d: approval.granted events = %d, want 1", ch.Position, n)
		}
	}
}
