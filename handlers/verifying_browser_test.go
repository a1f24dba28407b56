package handlers_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
)

// TestBrowser_VerifyingThenCompletedLive: the customer watches a refund
// whose answer was lost. While it is verified the page says so in the
// present tense, counts from when verifying began and says what happens
// next; when the provider confirms, the line turns to the past, the timer
// goes, and the narration ends with the outcome, as a reload shows too.
func TestBrowser_VerifyingThenCompletedLive(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{Stream: stream.Config{Retry: 200 * time.Millisecond}}, withListener())
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	run := b.planned("Trail running shoes", 3000, "One shoe is a size smaller than the other.")
	op := b.sent(run)
	ctx := browsertest.New(t)
	if err := browsertest.Login(ctx, a.srv.URL, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/runs/"+run.ID.String()), chromedp.WaitVisible(chromedp.CSS("#run-status"))); err != nil {
		t.Fatal(err)
	}
	wait := func(what, cond string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if _, err := chromedp.Run(wctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#run').innerText`))
			t.Fatalf("waiting for %s: %v\n%s", what, err, text)
		}
	}
	wait("the stream", `document.querySelector('#stream-indicator').dataset.state === 'live'`)
	b.record(op, store.Outcome{State: store.OpReconciling, Reason: "no answer from the payment provider: timeout after 5s"})
	var began time.Time
	if err := a.db.GetContext(b.ctx, &began, `SELECT created_at FROM run_events WHERE run_id = $1 AND type = $2`,
		run.ID, store.EventOperationReconciling); err != nil {
		t.Fatal(err)
	}
	wait("verifying, counted from when it began", `(() => {
		const step = document.querySelector('#run-progress [aria-current="step"]'), timer = document.querySelector('#step-timer');
		return step.textContent === 'Verifying the result' && !!timer && timer.dataset.since === '`+strconv.FormatInt(began.UnixMilli(), 10)+`' &&
			document.querySelector('#next-step').textContent.includes('the refund is never sent twice'); })()`)
	b.refunded(run, op, "re_3Vb8Mn")
	for _, when := range []string{"live", "after a reload"} {
		if when != "live" {
			if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#run-status"))); err != nil {
				t.Fatal(err)
			}
		}
		wait("the outcome "+when, `(() => {
			const steps = [...document.querySelectorAll('#run-progress li')].map(li => li.textContent).join(' | ');
			return steps === 'Requested | Order checked | Approved | Sent to the payment provider | Refunded' &&
				!document.querySelector('#step-timer') && !document.querySelector('#next-step') &&
				document.querySelector('#outcome-text').textContent === 'Refunded €30.00.' &&
				document.querySelector('#narration-end').textContent === 'Refunded €30.00.' &&
				document.querySelector('#stream-end').textContent === 'The run has finished.'; })()`)
	}
}
