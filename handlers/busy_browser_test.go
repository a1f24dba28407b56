package handlers_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
)

// TestBrowser_StreamCapBacksOff: a run page whose stream is refused at the
// user's cap shows why in words, comes back only after the server's retry
// hint (htmx-ext-sse alone would retry after 0.5, 1, 2 s), and goes live
// once a slot frees.
func TestBrowser_StreamCapBacksOff(t *testing.T) {
	t.Parallel()
	const busy = 2 * time.Second
	var mu sync.Mutex
	var tries []time.Time
	count := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/streams" {
				mu.Lock()
				tries = append(tries, time.Now())
				mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	}
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{MaxPerUser: 1, Busy: busy, Retry: 200 * time.Millisecond}},
		withListener(), wrapHandler(count))
	// The user's one stream, so the page's is refused.
	held := a.open(t, a.customerClient(t), jsonStreamPath(a.run.ID, "1"), "")

	ctx := browsertest.New(t)
	if err := browsertest.Login(ctx, a.srv.URL, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/runs/"+a.run.ID.String()),
		chromedp.WaitVisible(chromedp.CSS("#run-status"))); err != nil {
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
	wait("the busy words", `(function(){ var el = document.querySelector('#stream-indicator');
		return el.dataset.state === 'busy' && el.textContent.indexOf('the most live views') >= 0 })()`)
	// Two hints' time: room for two more tries, not for htmx's own four.
	wait("two retry hints to pass", `new Promise(function(r){ setTimeout(function(){ r(true) }, `+strconv.Itoa(int((2*busy+500*time.Millisecond).Milliseconds()))+`) })`)
	mu.Lock()
	got := append([]time.Time(nil), tries...)
	mu.Unlock()
	if len(got) < 2 {
		t.Fatalf("%d stream requests, want the page to have tried again", len(got))
	}
	for i := 1; i < len(got); i++ {
		if gap := got[i].Sub(got[i-1]); gap < busy*9/10 {
			t.Errorf("try %d came %v after the one before, want no sooner than the server's hint of %v", i+1, gap, busy)
		}
	}
	if text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#stream-indicator').textContent`)); err != nil || !strings.Contains(text, "the most live views") {
		t.Errorf("between tries the indicator says %q (%v), want the busy words kept", text, err)
	}
	held.cancel()
	wait("the page to go live once a slot frees", `document.querySelector('#stream-indicator').dataset.state === 'live'`)
}
