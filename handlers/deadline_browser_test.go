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
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/views"
)

// TestDeadlineBrowser_DueSoonAndExpiry: in Chromium, a queue card is
// marked due soon, in words, when the last tenth of its 3 s comes, with no
// reload; the run page shows the deadline in the browser's own time; and
// when the system ends the run, the open page says so live.
func TestDeadlineBrowser_DueSoonAndExpiry(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{Stream: stream.Config{Retry: 200 * time.Millisecond}}, withListener())
	ctx := context.Background()
	run := a.startRun(t, "customer@example.com", 1000)
	if _, err := a.store.RequestApprovalWithin(ctx, run.ID, proposalFor(run), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	tab := browsertest.New(t)
	if err := browsertest.Login(tab, a.srv.URL, "approver@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	card := `document.getElementById(` + jsString(views.QueueItemID(run.ID)) + `)`
	waitFor(t, tab, "the card", `!!`+card)
	took := waitFor(t, tab, "the card to be marked due soon",
		card+`.classList.contains('due-soon') && !`+card+`.querySelector('.due-soon-mark').hidden && `+
			card+`.querySelector('.due-soon-mark').textContent === `+jsString(views.DueSoonMark))
	t.Logf("marked due soon %v after the card was shown", took)

	if err := chromedp.Do(tab, chromedp.Navigate(a.srv.URL+"/runs/"+run.ID.String())); err != nil {
		t.Fatal(err)
	}
	// localtime.js wrote the deadline again in the browser's zone.
	waitFor(t, tab, "the deadline in the viewer's time", `(() => { const el = document.querySelector('#decide-by time');
		return !!el && el.dataset.local === el.getAttribute('datetime') && el.textContent !== '' })()`)
	waitFor(t, tab, "the page to be live", `document.getElementById('stream-indicator')?.dataset.state === 'live'`)

	testkit.WaitUntil(t, "the deadline to pass and the system to end the run", 10*time.Second, func() bool {
		expired, err := a.store.ExpireApproval(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		return expired
	})
	waitFor(t, tab, "the page to say the system canceled it", `document.getElementById('outcome-text')?.textContent === 'Canceled by the system.'
		&& !document.getElementById('decide-by')`)
}
