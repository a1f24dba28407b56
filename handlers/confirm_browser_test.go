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

// confirmState is what a run page's cancel confirmation shows.
type confirmState struct {
	Open    bool   `json:"open"`
	Reason  string `json:"reason"`
	Focused string `json:"focused"` // the focused element's id
	Applied int64  `json:"applied"`
	Offered bool   `json:"offered"` // the summary and the confirm button are usable
	Blocked bool   `json:"blocked"` // both are marked unusable
	Note    string `json:"note"`    // what the actions say while they wait
}

const confirmStateJS = `(() => {
	const d = document.getElementById('cancel-details');
	const s = document.getElementById('cancel'), b = document.getElementById('cancel-confirm');
	const note = document.querySelector('#run-actions .actions-offline');
	return {
		open: !!d && d.open,
		reason: (document.getElementById('cancel-reason') || {}).value || '',
		focused: document.activeElement ? document.activeElement.id : '',
		applied: +document.getElementById('run').dataset.applied,
		offered: !!s && !!b && s.getAttribute('aria-disabled') !== 'true' && !b.disabled,
		blocked: !!s && !!b && s.getAttribute('aria-disabled') === 'true' && b.disabled && b.getAttribute('aria-disabled') === 'true',
		note: note && !note.hidden ? note.textContent : '',
	};
})()`

func readConfirm(t *testing.T, ctx context.Context) confirmState {
	t.Helper()
	c, err := chromedp.Run(ctx, chromedp.Evaluate[confirmState](confirmStateJS))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// lastSeqOf is the run's last committed seq.
func (a *app) lastSeqOf(t *testing.T, r *store.Run) int64 {
	t.Helper()
	run, err := a.store.RunByID(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return run.LastSeq
}

// TestBrowser_RedrawKeepsTheConfirmationOpen: a viewer has opened "Cancel
// run…" (and, as staff, begun typing a reason) when the stream draws the
// run's decisions again because an approver approved meanwhile. The
// confirmation stays open, with what was typed, and typing goes on.
func TestBrowser_RedrawKeepsTheConfirmationOpen(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{Stream: stream.Config{Retry: 200 * time.Millisecond}}, withListener())
	if _, err := a.store.CreateUser(context.Background(), "approver2@example.com", "Ada Approver", store.RoleApprover, devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	avery := a.user(t, "approver@example.com")

	// openCancel opens the run's page as email, waits for it to be live
	// and opens the cancel confirmation, typing reason if there is one.
	openCancel := func(t *testing.T, email string, run *store.Run, reason string) context.Context {
		t.Helper()
		ctx := browsertest.New(t)
		if err := browsertest.Login(ctx, a.srv.URL, email, devdb.DemoPassword); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/runs/"+run.ID.String())); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the page live", `document.getElementById('stream-indicator')?.dataset.state === 'live'`)
		steps := []chromedp.Action[chromedp.Void]{chromedp.Click(chromedp.CSS("#cancel"))}
		if reason != "" {
			steps = append(steps, chromedp.SendKeys(chromedp.CSS("#cancel-reason"), reason))
		}
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
		if c := readConfirm(t, ctx); !c.Open || c.Reason != reason {
			t.Fatalf("before the redraw: %+v, want the confirmation open with %q", c, reason)
		}
		return ctx
	}
	// redraw has Avery approve the run, which the stream sends with the
	// run's decisions drawn again (the cancel is still offered: nothing
	// was sent to the provider), and waits for the page to apply it.
	redraw := func(t *testing.T, ctx context.Context, run *store.Run) {
		t.Helper()
		if _, err := a.store.Approve(context.Background(), run.ID, avery.ID, ""); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the approval applied", `+document.getElementById('run').dataset.applied >= `+strconv.FormatInt(a.lastSeqOf(t, run), 10)+
			` && !!document.querySelector('#timeline li[data-type="approval.granted"]')`)
	}

	t.Run("customer", func(t *testing.T) {
		t.Parallel()
		run := a.queued(t, "customer@example.com", 1250)
		ctx := openCancel(t, "customer@example.com", run, "")
		redraw(t, ctx, run)
		if c := readConfirm(t, ctx); !c.Open {
			t.Errorf("after the redraw: %+v, want the confirmation still open", c)
		}
	})
	t.Run("approver", func(t *testing.T) {
		t.Parallel()
		run := a.queued(t, "customer2@example.com", 1250)
		ctx := openCancel(t, "approver2@example.com", run, "customer called")
		redraw(t, ctx, run)
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.getElementById('approve')`)); err != nil || !ok {
			t.Fatalf("the approve is still offered after Avery approved (%v): no redraw happened", err)
		}
		c := readConfirm(t, ctx)
		if !c.Open || c.Reason != "customer called" || c.Focused != "cancel-reason" {
			t.Errorf("after the redraw: %+v, want the confirmation open with the reason typed and the cursor in it", c)
		}
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#cancel-reason"), " back")); err != nil {
			t.Fatal(err)
		}
		if c := readConfirm(t, ctx); c.Reason != "customer called back" {
			t.Errorf("typing on after the redraw gave %q, want %q", c.Reason, "customer called back")
		}
	})
}

// TestBrowser_NoDecisionsWhileReconnecting: while the run page's stream is
// cut, the page may be out of date, so its decisions are held: the cancel
// neither opens nor sends, and says why; once the page is live again they
// are offered again and work.
func TestBrowser_NoDecisionsWhileReconnecting(t *testing.T) {
	t.Parallel()
	b := &browserApp{}
	a := newApp(t, handlers.Config{Stream: stream.Config{Retry: 200 * time.Millisecond}}, withListener(), wrapHandler(b.outage))
	b.streamApp = &streamApp{app: a, customer: a.user(t, "customer@example.com")}
	b.ctx = browsertest.New(t)
	if err := browsertest.Login(b.ctx, a.srv.URL, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	run := a.queued(t, "customer@example.com", 1250)
	b.open(t, run.ID)
	b.waitLive(t)
	if c := readConfirm(t, b.ctx); !c.Offered || c.Note != "" {
		t.Fatalf("live: %+v, want the cancel offered", c)
	}

	b.offline.Store(true)
	a.conns.closeAll()
	b.waitPage(t, "reconnecting", `document.querySelector('#stream-indicator').dataset.state === 'reconnecting'`)
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS("#cancel"))); err != nil {
		t.Fatal(err)
	}
	c := readConfirm(t, b.ctx)
	if !c.Blocked || c.Open {
		t.Errorf("reconnecting: %+v, want the cancel marked disabled and not opening", c)
	}
	if want := "Reconnecting… Decisions can be sent again once the page is live."; c.Note != want {
		t.Errorf("reconnecting, the decisions say %q, want %q", c.Note, want)
	}

	b.offline.Store(false)
	b.waitLive(t)
	if c := readConfirm(t, b.ctx); !c.Offered || c.Blocked || c.Note != "" {
		t.Errorf("live again: %+v, want the cancel offered and nothing held", c)
	}
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS("#cancel")), chromedp.Click(chromedp.CSS("#cancel-confirm"))); err != nil {
		t.Fatal(err)
	}
	b.waitPage(t, "the cancel taken", `document.querySelector('#decision-result').textContent === 'You asked to cancel this run.'`)
}
