package handlers_test

import (
	"context"
	"fmt"
	"net/http"
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
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store"
)

// TestBrowser_TenTabsShareOneStream: ten run tabs in one Chromium over
// plain HTTP/1.1 (six connections per origin) all stay live, because the
// tabs share one connection to /streams through a SharedWorker
// (static/tabs.js) instead of opening one stream each.
func TestBrowser_TenTabsShareOneStream(t *testing.T) {
	t.Parallel()
	var shared, single atomic.Int64 // /streams open now; one-run streams ever
	count := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/streams":
				countOpen(&shared, next, w, r)
				return
			case strings.HasPrefix(r.URL.Path, "/runs/") && strings.HasSuffix(r.URL.Path, "/events") && r.URL.Path != "/runs/events":
				single.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	}
	// Room for the home page's list stream (where the login lands) and the
	// worker's reconnects, whose old connection and new one overlap for a
	// moment as the tabs join: the caps are not what this test is about.
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{MaxPerUser: 32}}, withListener(), wrapHandler(count))
	runs := []*store.Run{a.run}
	for range 9 {
		runs = append(runs, a.app.startRun(t, "customer@example.com", 1))
	}
	browser := browsertest.New(t)
	if err := browsertest.Login(browser, a.srv.URL, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	tabs := []context.Context{browser}
	for range len(runs) - 1 {
		tab, cancel := chromedp.NewContext(browser)
		t.Cleanup(cancel)
		// Opened one by one (chromedp opens a tab at its first action).
		if err := chromedp.Do(tab); err != nil {
			t.Fatal(err)
		}
		tabs = append(tabs, tab)
	}
	wait := func(tab context.Context, what, cond string) {
		ctx, cancel := context.WithTimeout(tab, 40*time.Second)
		defer cancel()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			state, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector('#stream-indicator').textContent`))
			t.Errorf("waiting for %s: %v (indicator: %q)", what, err, state)
		}
	}
	// All at once: the browser session has a minute in all.
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Go(func() {
			err := chromedp.Do(tabs[i], chromedp.Navigate(a.srv.URL+"/runs/"+r.ID.String()),
				chromedp.WaitVisible(chromedp.CSS("#run-status")))
			if err != nil {
				t.Errorf("tab %d: %v (shared streams open %d, own streams %d)", i+1, err, shared.Load(), single.Load())
				return
			}
			wait(tabs[i], fmt.Sprintf("tab %d to be live", i+1), `document.querySelector('#stream-indicator').dataset.state === 'live'`)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, r := range runs {
		if _, err := a.store.Append(context.Background(), r.ID,
			store.EventOf(store.NarrationDelta{Text: fmt.Sprintf("tab%d ", i+1)})); err != nil {
			t.Fatal(err)
		}
	}
	for i, tab := range tabs {
		wg.Go(func() {
			wait(tab, fmt.Sprintf("tab %d to show its run's narration", i+1),
				fmt.Sprintf(`(document.querySelector('#narration') || {}).textContent.indexOf('tab%d ') >= 0`, i+1))
		})
	}
	wg.Wait()
	if n := single.Load(); n != 0 {
		t.Errorf("the tabs opened %d streams of their own, want them all on the shared one", n)
	}
	testkit.WaitUntil(t, "one shared connection", 10*time.Second, func() bool { return shared.Load() == 1 })
}
