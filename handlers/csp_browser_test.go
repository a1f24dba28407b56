package handlers_test

import (
	"context"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// cspRecorderJS runs in every document before the page's own scripts (the
// DevTools protocol puts it there, so the policy does not apply to it) and
// keeps every Content-Security-Policy violation the page reports.
const cspRecorderJS = `window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', e => {
  window.__cspViolations.push(e.violatedDirective + ' blocked=' + e.blockedURI + ' at ' + e.sourceFile + ':' + e.lineNumber);
});`

// recordCSPViolations installs cspRecorderJS for every page opened from now on.
func recordCSPViolations(t *testing.T, ctx context.Context) {
	t.Helper()
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorderJS})
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
}

func cspViolations(t *testing.T, ctx context.Context) []string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__cspViolations`))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestBrowser_NoCSPViolations drives the pages under the Content-Security-
// Policy as a person does, with htmx and its SSE extension at work (a live
// run page, a decision posted through htmx, out-of-band swaps, the stream
// closing, logging out), and finds no violation reported. Then it injects a
// <style> element, which the policy must refuse and the recorder must see,
// so a silent recorder cannot pass for a clean page.
func TestBrowser_NoCSPViolations(t *testing.T) {
	t.Parallel()
	g := newGatedNarrator(10, 0)
	b := newBrowserApp(t, g, payments.Faults{})
	recordCSPViolations(t, b.ctx)
	if err := chromedp.Do(b.ctx, chromedp.Navigate(b.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#whoami"))); err != nil {
		t.Fatal(err)
	}
	if v := cspViolations(t, b.ctx); len(v) > 0 {
		t.Errorf("home page: CSP violations %q", v)
	}

	run := b.startRun(t)
	b.open(t, run.ID)
	b.waitLive(t)
	g.open()
	b.waitPage(t, "the approval request", `document.querySelector('#run-status').dataset.state === 'awaiting_approval'`)
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS("#cancel")), chromedp.Click(chromedp.CSS("#cancel-confirm"))); err != nil {
		t.Fatal(err)
	}
	b.waitState(t, run.ID, store.StateCanceled)
	b.waitPage(t, "the canceled run, the stream closed", `document.querySelector('#run-status').dataset.state === 'canceled' &&
		document.querySelector('#stream-indicator').dataset.state === 'closed' &&
		document.querySelector('#outcome').textContent.trim() !== ''`)
	if v := cspViolations(t, b.ctx); len(v) > 0 {
		t.Errorf("run page: CSP violations %q", v)
	}

	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name="email"]`))); err != nil {
		t.Fatal(err)
	}
	if v := cspViolations(t, b.ctx); len(v) > 0 {
		t.Errorf("login page: CSP violations %q", v)
	}

	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`(() => {
		const s = document.createElement('style');
		s.textContent = 'body { color: red }';
		document.head.appendChild(s);
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	b.waitPage(t, "the injected style's violation", `window.__cspViolations.some(v => v.startsWith('style-src'))`)
}
