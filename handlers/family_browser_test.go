package handlers_test

import (
	"cmp"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// TestBrowser_FamilyPageGoesLive opens a three-refund request's page in
// Chromium while its refunds go on, and ends them one by one (refunded,
// declined by the payment provider, canceled by the customer with the
// page's own cancel): the page's words and cards follow each, over its one
// stream, without a reload, and the ending fits 360 and 1280 px
// (SCREENSHOTS=1 writes docs/screenshots/family-ended-customer-<width>.png).
func TestBrowser_FamilyPageGoesLive(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{DemoLogins: true}, withListener())
	fam := a.startFamily(t, familyAmounts...)
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	ctx := browsertest.NewWithTimeout(t, 3*time.Minute)
	if err := browsertest.Login(ctx, a.srv.URL, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	path := "/runs/" + fam.Parent.ID.String()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(a.srv.URL+path),
		chromedp.WaitVisible(chromedp.CSS("#family-outcome"))); err != nil {
		t.Fatal(err)
	}
	// A mark a reload would lose.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded = true`)); err != nil {
		t.Fatal(err)
	}
	wait := func(what, cond string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if _, err := chromedp.Run(wctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#run').innerText`))
			t.Fatalf("waiting for %s: %v\npage: %s", what, err, text)
		}
	}
	outcomeIs := func(s string) string {
		return `window.notReloaded === true && document.querySelector('#family-outcome').textContent.trim() === ` + jsString(s)
	}
	wait("the stream to be live", `document.querySelector('#stream-indicator').dataset.state === 'live'`)

	b.childRefunded(&fam.Children[0])
	wait("the first refund", outcomeIs("Refunded €1.50 of €5.00 so far: one order refunded; two being checked."))
	b.childDeclined(&fam.Children[1])
	wait("the decline", outcomeIs("Refunded €1.50 of €5.00 so far: one order refunded, one declined by the payment provider; one being checked."))
	// The last is canceled from the request's page, while it waits for an
	// approver; the agent then ends it.
	b.checked(&fam.Children[2])
	b.awaiting(&fam.Children[2])
	// Everything so far is applied (the parent's child.finished too), so
	// nothing redraws the cancel while it is clicked.
	parent, err := a.store.RunByID(b.ctx, fam.Parent.ID)
	b.must(err)
	wait("the request's log", `document.querySelector('#run').dataset.applied.split('.')[0] === '`+strconv.FormatInt(parent.LastSeq, 10)+`'`)
	wait("the cancel offered", `document.querySelector('#child-3').dataset.state === 'awaiting_approval' && !!document.querySelector('#cancel')`)
	// htmx has taken the form (else the click would send it as a plain form).
	wait("htmx to take the cancel", `!!document.querySelector('#cancel-details form')['htmx-internal-data']`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#cancel")), chromedp.Click(chromedp.CSS("#cancel-confirm"))); err != nil {
		t.Fatal(err)
	}
	wait("the cancel's answer", `document.querySelector('#decision-result').textContent === 'You asked to cancel this request and each of its refunds not yet ended.'`)
	wait("the card's pending cancel", `document.querySelector('#child-3 .child-pending')?.textContent.startsWith('Cancel requested by you')`)
	b.finish(&fam.Children[2], store.StateCanceled, views.Answers{}.Canceled(false))
	wait("the cancel", outcomeIs("Refunded €1.50 of €5.00: one order refunded, one declined by the payment provider, one canceled by you."))
	wait("the cards", `[...document.querySelectorAll('.child')].map(c => c.dataset.outcome).join() === 'completed,declined,canceled'`)
	wait("the stream's end", `document.querySelector('#stream-indicator').dataset.state === 'closed' && document.querySelector('#run-state').textContent === 'Partly refunded (1 of 3)'`)

	for _, w := range []int64{1280, 360} {
		checkPage(t, ctx, a.srv.URL, shownPage{name: "family-ended-customer", path: path, ready: "#family-outcome",
			check: `document.querySelectorAll('.child').length === 3`}, w)
	}
}

// TestBrowser_FamilyPageResumesAfterACut: the request page's one stream is
// cut, and a refund is declined while the page cannot reconnect; once it
// can, the page asks for every run after its own part of the family cursor
// it applied (no run starts over: no card says it went on offline), and
// shows the decline without a reload.
func TestBrowser_FamilyPageResumesAfterACut(t *testing.T) {
	t.Parallel()
	var (
		offline atomic.Bool
		mu      sync.Mutex
		asked   []string // each stream request's cursor
	)
	a := newApp(t, handlers.Config{DemoLogins: true, Stream: stream.Config{Retry: 200 * time.Millisecond}}, withListener(),
		wrapHandler(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/events") {
					mu.Lock()
					asked = append(asked, cmp.Or(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")))
					mu.Unlock()
					if offline.Load() {
						http.Error(w, "offline", http.StatusServiceUnavailable)
						return
					}
				}
				next.ServeHTTP(w, r)
			})
		}))
	fam := a.startFamily(t, familyAmounts...)
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	ctx := browsertest.NewWithTimeout(t, 3*time.Minute)
	if err := browsertest.Login(ctx, a.srv.URL, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/runs/"+fam.Parent.ID.String()),
		chromedp.WaitVisible(chromedp.CSS("#family-outcome"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded = true`)); err != nil {
		t.Fatal(err)
	}
	wait := func(what, cond string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if _, err := chromedp.Run(wctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	wait("the stream to be live", `document.querySelector('#stream-indicator').dataset.state === 'live'`)
	b.childRefunded(&fam.Children[0])
	wait("the first refund", `document.querySelector('#child-1').dataset.outcome === 'completed'`)

	offline.Store(true)
	a.conns.closeAll()
	wait("the page to notice", `document.querySelector('#stream-indicator').dataset.state === 'reconnecting'`)
	b.childDeclined(&fam.Children[1])
	applied, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#run').dataset.applied`))
	if err != nil {
		t.Fatal(err)
	}
	offline.Store(false)
	wait("the decline, after the cut", `window.notReloaded === true && document.querySelector('#child-2').dataset.outcome === 'declined'`)
	if got, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.child-offline').length`)); got != 0 {
		t.Errorf("%d cards say they went on offline, want none: every run resumes", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if last := asked[len(asked)-1]; last != applied || len(strings.Split(last, ".")) != 4 || strings.HasPrefix(last, "0.") {
		t.Errorf("the page resumed from %q (asked %q), want the family cursor it applied, %q", last, asked, applied)
	}
}

// TestBrowser_FamilyWaitingFits: a request with two refunds waiting for an
// approver and one being verified, as an approver sees it (both decisions
// offered), fits 360 and 1280 px (SCREENSHOTS=1 writes
// docs/screenshots/family-waiting-approver-<width>.png).
func TestBrowser_FamilyWaitingFits(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{DemoLogins: true})
	fam := a.startFamily(t, familyAmounts...)
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	op := b.sent(func() *store.Run { b.checked(&fam.Children[0]); return &fam.Children[0] }())
	b.record(op, store.Outcome{State: store.OpReconciling, Reason: "no answer from the payment provider: timeout after 5s"})
	for _, i := range []int{1, 2} {
		b.checked(&fam.Children[i])
		b.awaiting(&fam.Children[i])
	}
	ctx := browsertest.NewWithTimeout(t, 3*time.Minute)
	if err := browsertest.Login(ctx, a.srv.URL, "approver@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	p := shownPage{name: "family-waiting-approver", path: "/runs/" + fam.Parent.ID.String(), ready: "#family-outcome",
		check: `!!document.querySelector('#approve') && !!document.querySelector('#cancel')`}
	for _, w := range []int64{1280, 360} {
		checkPage(t, ctx, a.srv.URL, p, w)
	}
}
