package handlers_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// shownTime is a <time> as the browser shows it.
type shownTime struct {
	ISO  string `json:"iso"`
	Text string `json:"text"`
}

// TestBrowser_TimesInTheViewersZone: support in Paris reads every time of a
// run's page in Paris time, with the zone named, at the precision the page
// chose; the datetime attribute keeps the instant.
func TestBrowser_TimesInTheViewersZone(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.supportRun(t)
	ctx := browsertest.New(t)
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Paris"})
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := browsertest.Login(ctx, a.srv.URL, "support@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/support/runs/"+run.ID.String()),
		chromedp.WaitVisible(chromedp.CSS("#support-timeline time[data-local]"))); err != nil {
		t.Fatal(err)
	}
	times, err := chromedp.Run(ctx, chromedp.Evaluate[[]shownTime](
		`[...document.querySelectorAll('time[datetime]')].map(e => ({iso: e.getAttribute('datetime'), text: e.textContent}))`))
	if err != nil || len(times) == 0 {
		t.Fatalf("times = %v, %v", times, err)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range times {
		at, err := time.Parse(time.RFC3339Nano, tm.ISO)
		if err != nil {
			t.Fatalf("datetime %q: %v", tm.ISO, err)
		}
		// The instant as Paris reads it, to the millisecond support sees.
		want := at.In(paris).Format("15:04:05.000")
		_, offset := at.In(paris).Zone()
		zone := fmt.Sprintf("GMT+%d", offset/3600) // Chromium's short name for Paris time
		if !strings.Contains(tm.Text, want) || !strings.Contains(tm.Text, zone) || strings.Contains(tm.Text, "UTC") {
			t.Errorf("<time datetime=%q> reads %q, want Paris time %s and the zone %s", tm.ISO, tm.Text, want, zone)
		}
	}
}

// TestBrowser_RunIDsDoNotWrap: at 1280 px, support's search shows each run
// ID on one line.
func TestBrowser_RunIDsDoNotWrap(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	a.showcase(t)
	ctx := browsertest.New(t)
	if err := browsertest.Login(ctx, a.srv.URL, "support@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(a.srv.URL+"/support/runs"),
		chromedp.WaitVisible(chromedp.CSS("#support-runs tbody tr"))); err != nil {
		t.Fatal(err)
	}
	lines, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](
		`[...document.querySelectorAll('#support-runs td[data-label="Run"] code')].map(c => new Set([...c.getClientRects()].map(r => Math.round(r.top))).size)`))
	if err != nil || len(lines) == 0 {
		t.Fatalf("run IDs = %v, %v", lines, err)
	}
	for i, n := range lines {
		if n != 1 {
			t.Errorf("run ID %d spans %d lines at 1280 px, want 1", i+1, n)
		}
	}
}

// TestBrowser_AdminConfirmsDestructiveActions: with JavaScript off, an
// admin's first click on "Disable…" or "Revoke…" changes nothing; only the
// confirm button inside acts.
func TestBrowser_AdminConfirmsDestructiveActions(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	cam := a.user(t, "customer2@example.com")
	ctx := browsertest.New(t)
	if err := browsertest.Login(ctx, a.srv.URL, "admin@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}), chromedp.Navigate(a.srv.URL+"/admin/users"))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		what, id string
		disabled func() bool
	}{
		{"revoke the grant", "#user-" + strconv.FormatInt(cam.ID, 10) + "-revoke-refund_access", func() bool { return !a.user(t, cam.Email).Has("refund_access") }},
		{"disable the account", "#user-" + strconv.FormatInt(cam.ID, 10) + "-disable", func() bool { return a.user(t, cam.Email).Disabled() }},
	} {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(step.id+" summary"))); err != nil {
			t.Fatalf("%s: open: %v", step.what, err)
		}
		if step.disabled() {
			t.Fatalf("%s: done on the first click", step.what)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(step.id+` button[type="submit"]`))); err != nil {
			t.Fatalf("%s: confirm: %v", step.what, err)
		}
		testkit.WaitUntil(t, step.what, 30*time.Second, step.disabled)
	}
}

// heard is what the run page's live regions said, in order.
type heard struct {
	Said []string `json:"said"`
	At   []int64  `json:"at"` // ms since the recorder started
}

// TestBrowser_RunPageAnnouncesChanges: a screen reader watching a run hears
// each new status at once, and the narration in a few throttled pieces,
// not word by word; the connection indicator is a live region of its own.
func TestBrowser_RunPageAnnouncesChanges(t *testing.T) {
	t.Parallel()
	g := newGatedNarrator(20, 0)
	b := newBrowserApp(t, g, payments.Faults{})
	run := b.startRun(t)
	b.open(t, run.ID)
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`(() => {
		const el = document.querySelector('#run-announcer'), t0 = performance.now();
		window.__heard = {said: [], at: []};
		new MutationObserver(() => { __heard.said.push(el.textContent); __heard.at.push(Math.round(performance.now() - t0)); })
			.observe(el, {childList: true, characterData: true, subtree: true});
		return document.querySelector('#stream-indicator').getAttribute('aria-live') === 'polite' &&
			el.getAttribute('aria-live') === 'polite';
	})()`)); err != nil {
		t.Fatal(err)
	}
	b.waitLive(t)
	g.open()
	b.approve(t, run.ID)
	b.waitState(t, run.ID, store.StateCompleted)
	b.waitPage(t, "the narration read out", `__heard.said.some(s => s.includes('word01'))`)
	h, err := chromedp.Run(b.ctx, chromedp.Evaluate[heard](`window.__heard`))
	if err != nil {
		t.Fatal(err)
	}
	var statuses, narrations []int64
	for i, s := range h.Said {
		if strings.HasPrefix(s, "Status: ") {
			statuses = append(statuses, h.At[i])
		} else {
			narrations = append(narrations, h.At[i])
		}
	}
	if len(statuses) < 2 {
		t.Errorf("status announcements %v, want one per change (awaiting approval, …, completed)", h.Said)
	}
	for i := 1; i < len(narrations); i++ {
		if gap := narrations[i] - narrations[i-1]; gap < views.NarrationAnnounceEvery-500 {
			t.Errorf("narration read out %d ms after the last time, want at most every %d ms: %v", gap, views.NarrationAnnounceEvery, h.Said)
		}
	}
	if p := b.page(t); len(narrations) == 0 || len(narrations) >= p.NarrSpans {
		t.Errorf("%d narration announcements for %d pieces, want a few", len(narrations), p.NarrSpans)
	}
}
