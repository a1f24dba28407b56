package handlers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// Widths every page must fit: a small phone and a laptop.
var pageWidths = []int64{360, 1280}

// screenshotDir is where SCREENSHOTS=1 writes the pages' pictures (see
// README, "Screenshots"); without it the test only checks.
const screenshotDir = "../docs/screenshots"

// shownPage is one page a role opens, and what shows it is ready.
type shownPage struct {
	name  string // file name stem of its screenshot
	path  string
	ready string // CSS selector
	nav   string // the navigation link marked current, "" if none
	// submit, if set, is a form on the page at path to fill (its text
	// inputs get "deploy script") and submit; ready is then on the answer.
	submit string
	// check, if set, is JavaScript that must be true once ready.
	check string
	// whole, if set, selects boxes that must show their content whole:
	// nothing in them wider than they are (not even behind a scrollbar)
	// and no text clipped.
	whole string
}

// TestBrowser_EveryPageFits opens every page of every role in Chromium at
// 360 and 1280 px wide and fails if one scrolls sideways (wide tables must
// scroll inside their own box), lacks the skip link, or marks the wrong
// navigation link as current; support's run page, a long one too, must show
// its timeline whole, with no scrolling inside its box. It does so in
// English and in Chinese (each user's saved choice, a visitor's cookie),
// where a page must also show no English word of the words table. With
// SCREENSHOTS=1 it also writes a picture of each page to
// docs/screenshots/ ([zh-CN-]<page>-<width>.png).
func TestBrowser_EveryPageFits(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"en", "zh-CN"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			everyPageFits(t, lang)
		})
	}
}

func everyPageFits(t *testing.T, lang string) {
	a := newApp(t, handlers.Config{DemoLogins: true})
	runs := a.showcase(t)
	prefix := ""
	if lang != "en" {
		prefix = lang + "-"
		for _, email := range []string{"customer@example.com", "approver@example.com", "support@example.com", "admin@example.com"} {
			if err := a.store.SetLanguage(context.Background(), a.user(t, email).ID, lang); err != nil {
				t.Fatal(err)
			}
		}
	}
	roles := []struct {
		name, email string // email "" is a visitor
		pages       []shownPage
	}{
		{"visitor", "", []shownPage{{"login", "/login", `input[name="email"]`, "", "", "", ""}}},
		{"customer", "customer@example.com", []shownPage{
			{"customer-home", "/", "#runs", "/", "", "", ""},
			{"customer-run", "/runs/" + runs.done.ID.String(), "#run-status", "", "", "", ""},
			{"error", "/runs/" + uuid.NewString(), ".error-page", "", "", "", ""},
		}},
		{"approver", "approver@example.com", []shownPage{
			{"approver-home", "/", "#approval-queue", "/", "", "", ""},
			{"approver-run", "/runs/" + runs.waiting.ID.String(), "#run-status", "", "", "", ""},
		}},
		{"support", "support@example.com", []shownPage{
			{"support-search", "/support/runs", "#support-runs", "/support/runs", "", "", ""},
			{"support-run", "/support/runs/" + runs.done.ID.String(), "#support-timeline", "/support/runs", "", "", supportWhole},
			// A long timeline: narration stretches, a verification, reasons.
			{"support-run-long", "/support/runs/" + runs.long.ID.String(), "#support-timeline", "/support/runs", "", "", supportWhole},
			{"audit", "/support/audit", "#audit", "/support/audit", "", "", ""},
		}},
		{"admin", "admin@example.com", []shownPage{
			{"admin-users", "/admin/users", "#users", "/admin/users", "", "", ""},
			// copy.js shows the copy button; the token stays plain text.
			{"admin-token", "/admin/users", "#new-token", "", "form.new-token", `!document.querySelector('#copy-token').hidden`, ""},
		}},
	}
	for _, role := range roles {
		t.Run(role.name, func(t *testing.T) {
			t.Parallel() // a browser of its own each
			// A busy machine (load 40 on 2 cores seen) needs minutes for
			// a few pages and their full-page screenshots.
			ctx := browsertest.NewWithTimeout(t, 4*time.Minute)
			if role.email != "" {
				if err := browsertest.Login(ctx, a.srv.URL, role.email, devdb.DemoPassword); err != nil {
					t.Fatal(err)
				}
			} else if lang != "en" {
				// A visitor chooses with the picker (a cookie keeps it).
				if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/login"),
					chromedp.SetValue(chromedp.CSS(`.lang-picker select`), lang),
					chromedp.Submit(chromedp.CSS(`.lang-picker`)),
					chromedp.WaitVisible(chromedp.CSS(`html[lang=`+strconv.Quote(lang)+`] input[name="email"]`))); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range role.pages {
				p.name = prefix + p.name
				for _, w := range pageWidths {
					checkPage(t, ctx, a.srv.URL, p, w)
					if lang != "en" {
						wantNoEnglish(t, ctx, p.name)
					}
				}
			}
		})
	}
}

// supportWhole is what of support's run page must show whole, at every
// width: its timeline (issue 33: at 1280 px a long word in one row made it
// wider than its box, and every row's words were cut at the box's edge)
// and its ledger.
const supportWhole = "#support-timeline .table-wrap, #ledger .ledger-op"

// wholeJS lists what does not show whole in the boxes a selector picks:
// a box wider inside than it is (so part of it is behind a scrollbar), an
// element past the box's edges, and an element whose own content is
// clipped. What is visually hidden on purpose (clip-path) is left out.
const wholeJS = `(sel => {
	const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
		(typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\s+/).join('.') : '');
	const hidden = (e, box) => { for (; e && e !== box.parentElement; e = e.parentElement) {
		if (getComputedStyle(e).clipPath !== 'none') return true; } return false; };
	const out = [];
	const boxes = [...document.querySelectorAll(sel)];
	if (!boxes.length) return ['nothing matches ' + sel];
	for (const box of boxes) {
		const b = box.getBoundingClientRect();
		if (box.scrollWidth > box.clientWidth + 1) out.push(name(box) + ' is ' + box.scrollWidth + ' px wide inside, ' + box.clientWidth + ' px shown');
		for (const e of box.querySelectorAll('*')) {
			if (hidden(e, box)) continue;
			const r = e.getBoundingClientRect();
			if (r.width === 0 && r.height === 0) continue;
			if (r.right > b.right + 0.5 || r.left < b.left - 0.5) {
				out.push(name(e) + ' [' + Math.round(r.left) + ', ' + Math.round(r.right) + '] outside its box [' + Math.round(b.left) + ', ' + Math.round(b.right) + ']: ' + e.textContent.trim().slice(0, 40));
			} else if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible') {
				out.push(name(e) + ' clips its text: ' + e.textContent.trim().slice(0, 40));
			}
		}
	}
	return out.slice(0, 8);
})`

// layoutReport is what the page says about its width.
type layoutReport struct {
	Width       int64    `json:"width"`
	ScrollWidth int64    `json:"scrollWidth"`
	Wide        []string `json:"wide"` // elements past the right edge
	SkipLink    bool     `json:"skipLink"`
	Current     []string `json:"current"` // hrefs marked aria-current
}

const layoutJS = `(() => {
	const w = window.innerWidth;
	const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
		(typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\s+/).join('.') : '');
	const wide = [...document.querySelectorAll('body *')]
		.filter(e => e.getBoundingClientRect().right > w + 0.5 && !e.closest('.table-wrap'))
		.slice(0, 8)
		.map(e => name(e) + ' right=' + Math.round(e.getBoundingClientRect().right));
	return {
		width: w,
		scrollWidth: document.documentElement.scrollWidth,
		wide,
		skipLink: !!document.querySelector('body > a.skip-link[href="#main"]') && !!document.getElementById('main'),
		current: [...document.querySelectorAll('nav a[aria-current="page"]')].map(a => a.getAttribute('href')),
	};
})()`

func checkPage(t *testing.T, ctx context.Context, base string, p shownPage, width int64) {
	t.Helper()
	steps := []chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(width, 800), chromedp.Navigate(base + p.path)}
	if p.submit != "" {
		steps = append(steps,
			chromedp.SendKeys(chromedp.CSS(p.submit+` input[type="text"]`), "deploy script"),
			chromedp.Submit(chromedp.CSS(p.submit)))
	}
	steps = append(steps, chromedp.WaitVisible(chromedp.CSS(p.ready)))
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s at %d px: %v", p.name, width, err)
	}
	if p.check != "" {
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](p.check)); err != nil {
			t.Errorf("%s at %d px: %s never held: %v", p.name, width, p.check, err)
		}
	}
	r, err := chromedp.Run(ctx, chromedp.Evaluate[layoutReport](layoutJS))
	if err != nil {
		t.Fatal(err)
	}
	if r.ScrollWidth > r.Width {
		t.Errorf("%s (%s) at %d px scrolls sideways: %d px wide; past the edge: %v", p.name, p.path, width, r.ScrollWidth, r.Wide)
	}
	if p.whole != "" {
		cut, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](wholeJS+"("+strconv.Quote(p.whole)+")"))
		if err != nil {
			t.Fatal(err)
		}
		if len(cut) > 0 {
			t.Errorf("%s (%s) at %d px does not show %s whole: %v", p.name, p.path, width, p.whole, cut)
		}
	}
	if !r.SkipLink {
		t.Errorf("%s has no skip link to #main", p.name)
	}
	if want := []string{p.nav}; p.nav == "" && len(r.Current) != 0 || p.nav != "" && fmt.Sprint(r.Current) != fmt.Sprint(want) {
		t.Errorf("%s: current nav links = %v, want %q", p.name, r.Current, p.nav)
	}
	if os.Getenv("SCREENSHOTS") == "1" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(screenshotDir, fmt.Sprintf("%s-%d.png", p.name, width))
		if err := os.WriteFile(file, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// showcaseRuns are the runs the page tour shows.
type showcaseRuns struct {
	done, waiting *store.Run
	long          *store.Run // a long timeline: stretches of narration, a verification, reasons
}

// showcase fills the database with what a person would see after a while:
// a refund approved, verified and confirmed; one waiting for an approver;
// one canceled; one just asked for; and some administration.
func (a *app) showcase(t *testing.T) showcaseRuns {
	t.Helper()
	ctx := context.Background()
	customer, approver := a.user(t, "customer@example.com"), a.user(t, "approver@example.com")
	start := func(email, item string, amount int64, reason string) *store.Run {
		t.Helper()
		u := a.user(t, email)
		run, _, err := a.store.StartRun(ctx, store.StartRequest{OwnerID: u.ID, ClientRequestID: uuid.NewString(),
			OrderID: a.order(t, email, item).ID, Amount: amount, Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	narrate := func(run *store.Run, text string) {
		t.Helper()
		_, err := a.store.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{Text: text}))
		must(err)
	}

	done := start("customer@example.com", "Trail running shoes", 12999, "The soles came apart after two runs.")
	narrate(done, "I'm looking at order #1: trail running shoes, €129.99, paid in full. ")
	narrate(done, "A full refund is within policy, but at this amount an approver decides.")
	_, err := a.store.RequestApproval(ctx, done.ID, store.ActionProposed{Action: "refund", OrderID: done.OrderID, Amount: done.Amount, Currency: done.Currency})
	must(err)
	_, err = a.store.Approve(store.WithActor(ctx, store.Actor{UserID: approver.ID, IP: "127.0.0.1"}), done.ID, approver.ID, "")
	must(err)
	op, err := a.store.SubmitOperation(ctx, done.ID)
	must(err)
	_, err = a.store.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpReconciling, Reason: "the provider did not answer within 5s"})
	must(err)
	_, err = a.store.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpSucceeded, ProviderRef: "re_7Hc2Qx"})
	must(err)
	_, err = a.store.FinishRun(ctx, done.ID, store.StateCompleted, views.Answers{}.Refunded(done.Amount, done.Currency, "re_7Hc2Qx", false))
	must(err)

	canceled := start("customer@example.com", "Rain jacket", 2000, "Wrong size.")
	_, err = a.store.RequestCancel(store.WithActor(ctx, store.Actor{UserID: customer.ID, IP: "127.0.0.1"}), canceled.ID, customer.ID)
	must(err)
	_, err = a.store.FinishRun(ctx, canceled.ID, store.StateCanceled, views.Answers{}.Canceled(false))
	must(err)

	waiting := start("customer2@example.com", "Espresso machine", 34900, "It arrived with a cracked water tank.")
	narrate(waiting, "The order was paid in full; the amount needs an approver.")
	_, err = a.store.RequestApproval(ctx, waiting.ID, store.ActionProposed{Action: "refund", OrderID: waiting.OrderID, Amount: waiting.Amount, Currency: waiting.Currency})
	must(err)
	start("customer@example.com", "Water bottle", 1599, "It leaks.")
	long := a.longRun(t)

	admin := a.user(t, "admin@example.com")
	actx := store.WithActor(ctx, store.Actor{UserID: admin.ID, IP: "127.0.0.1"})
	_, _, err = a.store.CreateToken(actx, customer.ID, "billing script")
	must(err)
	must(a.store.SetGrant(actx, a.user(t, "customer2@example.com").ID, store.GrantRefundAccess, false))
	must(a.store.SetGrant(actx, a.user(t, "customer2@example.com").ID, store.GrantRefundAccess, true))
	return showcaseRuns{done: done, waiting: waiting, long: long}
}

// longRun is a refund whose log is long, as a real one's gets: the agent
// narrates between its steps (a link in its words among them), an
// approver decides with a reason, the provider does not answer at once and
// the result is verified before it is confirmed.
func (a *app) longRun(t *testing.T) *store.Run {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	u, approver := a.user(t, "customer2@example.com"), a.user(t, "approver@example.com")
	order := a.order(t, "customer2@example.com", "Coffee beans, 1 kg")
	run, _, err := a.store.StartRun(ctx, store.StartRequest{OwnerID: u.ID, ClientRequestID: uuid.NewString(), OrderID: order.ID, Amount: 600,
		Reason: "Two of the bags arrived split open and the beans spilled all over the box; the courier's photos are attached to the delivery note."})
	must(err)
	narrate := func(words ...string) {
		t.Helper()
		for _, w := range words {
			_, err := a.store.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{Text: w}))
			must(err)
		}
	}
	_, err = a.store.BeginAttempt(ctx, run.ID, "planning")
	must(err)
	// A model quotes what it reads: here a link, one long word.
	narrate("Reading https://courier.example/deliveries/DN-2026-12-04-000734521/photos?size=original first. ",
		"I'm looking at order #"+strconv.FormatInt(order.ID, 10)+": coffee beans, 1 kg, paid in full. ",
		"The customer asks for part of it back because two bags arrived split open. ")
	_, err = a.store.RequestApproval(ctx, run.ID, store.ActionProposed{Action: "refund", OrderID: run.OrderID, Amount: run.Amount, Currency: run.Currency})
	must(err)
	narrate("A partial refund is within policy for goods damaged in transit; an approver decides at this amount. ")
	_, err = a.store.Approve(store.WithActor(ctx, store.Actor{UserID: approver.ID, IP: "127.0.0.1"}), run.ID, approver.ID,
		"Photos checked against the courier's delivery note: two bags split, within policy for damaged goods.")
	must(err)
	_, err = a.store.BeginAttempt(ctx, run.ID, "submitting")
	must(err)
	narrate("Sending the refund to the payment provider now. ")
	op, err := a.store.SubmitOperation(ctx, run.ID)
	must(err)
	call, err := a.store.BeginProviderCall(ctx, op.ID, store.CallSubmit)
	must(err)
	must(a.store.EndProviderCall(ctx, call, 0, 5*time.Second, "no answer within 5s"))
	_, err = a.store.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpReconciling, Reason: "the provider did not answer within 5s"})
	must(err)
	narrate("The provider did not answer in time, so I'm asking it whether the refund arrived before doing anything else. ")
	call, err = a.store.BeginProviderCall(ctx, op.ID, store.CallLookup)
	must(err)
	must(a.store.EndProviderCall(ctx, call, 200, 80*time.Millisecond, "succeeded, reference re_9Lm3Vt0QbX8kPq2Zr"))
	_, err = a.store.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpSucceeded, ProviderRef: "re_9Lm3Vt0QbX8kPq2Zr"})
	must(err)
	_, err = a.store.FinishRun(ctx, run.ID, store.StateCompleted, views.Answers{}.Refunded(run.Amount, run.Currency, "re_9Lm3Vt0QbX8kPq2Zr", false))
	must(err)
	return run
}

// TestBrowser_CustomerRunsLive: the customer's list of runs follows each
// run's state without a reload, over its stream (the page says "Live"),
// inside its polite live region.
func TestBrowser_CustomerRunsLive(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.startRun(t, "customer@example.com", 100)
	ctx := browsertest.New(t)
	if err := browsertest.Login(ctx, a.srv.URL, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	state := `document.querySelector('#run-row-` + run.ID.String() + ` .state').textContent`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](state+` === 'Waiting for the agent'`)); err != nil {
		t.Fatal(err)
	}
	live := `document.getElementById('stream-indicator')?.dataset.state === 'live'`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](live, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the list's stream did not open: %v", err)
	}
	if _, err := a.store.RequestApproval(context.Background(), run.ID, proposalFor(run)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](state+` === 'Waiting for an approver'`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the list did not follow the run: %v", err)
	}
	if _, err := a.store.FinishRun(context.Background(), run.ID, store.StateCanceled, store.Say("Canceled.")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](state+` === 'Canceled'`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the list did not follow the run's end: %v", err)
	}
	inLive, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[aria-live="polite"] #run-row-`+run.ID.String()+`') !== null`))
	if err != nil || !inLive {
		t.Errorf("the replaced row is not inside the live region (%v)", err)
	}
}
