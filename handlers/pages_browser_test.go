package handlers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
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
}

// TestBrowser_EveryPageFits opens every page of every role in Chromium at
// 360 and 1280 px wide and fails if one scrolls sideways (wide tables must
// scroll inside their own box), lacks the skip link, or marks the wrong
// navigation link as current. With SCREENSHOTS=1 it also writes a picture
// of each page to docs/screenshots/.
func TestBrowser_EveryPageFits(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{DemoLogins: true})
	runs := a.showcase(t)
	roles := []struct {
		name, email string // email "" is a visitor
		pages       []shownPage
	}{
		{"visitor", "", []shownPage{{"login", "/login", `input[name="email"]`, "", "", ""}}},
		{"customer", "customer@example.com", []shownPage{
			{"customer-home", "/", "#runs", "/", "", ""},
			{"customer-run", "/runs/" + runs.done.ID.String(), "#run-status", "", "", ""},
			{"error", "/runs/" + uuid.NewString(), ".error-page", "", "", ""},
		}},
		{"approver", "approver@example.com", []shownPage{
			{"approver-home", "/", "#approval-queue", "/", "", ""},
			{"approver-run", "/runs/" + runs.waiting.ID.String(), "#run-status", "", "", ""},
		}},
		{"support", "support@example.com", []shownPage{
			{"support-search", "/support/runs", "#support-runs", "/support/runs", "", ""},
			{"support-run", "/support/runs/" + runs.done.ID.String(), "#support-timeline", "/support/runs", "", ""},
			{"audit", "/support/audit", "#audit", "/support/audit", "", ""},
		}},
		{"admin", "admin@example.com", []shownPage{
			{"admin-users", "/admin/users", "#users", "/admin/users", "", ""},
			// copy.js shows the copy button; the token stays plain text.
			{"admin-token", "/admin/users", "#new-token", "", "form.new-token", `!document.querySelector('#copy-token').hidden`},
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
			}
			for _, p := range role.pages {
				for _, w := range pageWidths {
					checkPage(t, ctx, a.srv.URL, p, w)
				}
			}
		})
	}
}

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
	_, err = a.store.FinishRun(ctx, done.ID, store.StateCompleted, "Your refund of €129.99 for the trail running shoes is confirmed by the payment provider (reference re_7Hc2Qx).")
	must(err)

	canceled := start("customer@example.com", "Rain jacket", 2000, "Wrong size.")
	_, err = a.store.RequestCancel(store.WithActor(ctx, store.Actor{UserID: customer.ID, IP: "127.0.0.1"}), canceled.ID, customer.ID)
	must(err)
	_, err = a.store.FinishRun(ctx, canceled.ID, store.StateCanceled, "Canceled before anything was sent to the payment provider.")
	must(err)

	waiting := start("customer2@example.com", "Espresso machine", 34900, "It arrived with a cracked water tank.")
	narrate(waiting, "The order was paid in full; the amount needs an approver.")
	_, err = a.store.RequestApproval(ctx, waiting.ID, store.ActionProposed{Action: "refund", OrderID: waiting.OrderID, Amount: waiting.Amount, Currency: waiting.Currency})
	must(err)
	start("customer@example.com", "Water bottle", 1599, "It leaks.")

	admin := a.user(t, "admin@example.com")
	actx := store.WithActor(ctx, store.Actor{UserID: admin.ID, IP: "127.0.0.1"})
	_, _, err = a.store.CreateToken(actx, customer.ID, "billing script")
	must(err)
	must(a.store.SetGrant(actx, a.user(t, "customer2@example.com").ID, store.GrantRefundAccess, false))
	must(a.store.SetGrant(actx, a.user(t, "customer2@example.com").ID, store.GrantRefundAccess, true))
	return showcaseRuns{done: done, waiting: waiting}
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
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](state+` === 'created'`)); err != nil {
		t.Fatal(err)
	}
	live := `document.getElementById('stream-indicator')?.dataset.state === 'live'`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](live, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the list's stream did not open: %v", err)
	}
	if _, err := a.store.RequestApproval(context.Background(), run.ID, proposalFor(run)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](state+` === 'awaiting approval'`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the list did not follow the run: %v", err)
	}
	if _, err := a.store.FinishRun(context.Background(), run.ID, store.StateCanceled, "Canceled."); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](state+` === 'canceled'`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the list did not follow the run's end: %v", err)
	}
	inLive, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[aria-live="polite"] #run-row-`+run.ID.String()+`') !== null`))
	if err != nil || !inLive {
		t.Errorf("the replaced row is not inside the live region (%v)", err)
	}
}
