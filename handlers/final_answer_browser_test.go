package handlers_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// shownAnswer is how a page shows a run's final answer.
type shownAnswer struct {
	Count int    `json:"count"` // #final-answer elements
	Text  string `json:"text"`  // the first one's words
	Times int    `json:"times"` // how often its words are in <main>
}

const shownAnswerJS = `(() => {
	const squash = s => s.replace(/\s+/g, ' ').trim();
	const all = document.querySelectorAll('#final-answer');
	const text = all.length ? squash(all[0].textContent) : '';
	const main = squash(document.querySelector('main').textContent);
	return {count: all.length, text, times: text ? main.split(text).length - 1 : 0};
})()`

// apiFinalMessage is the run's final_message as the API gives it to its
// owner.
func (b *browserApp) apiFinalMessage(t *testing.T, runID uuid.UUID) string {
	t.Helper()
	r := b.get(t, b.customerClient(t), "/api/runs/"+runID.String())
	wantStatus(t, r, http.StatusOK)
	var snap struct {
		FinalMessage string `json:"final_message"`
	}
	if err := json.Unmarshal([]byte(r.body), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.FinalMessage == "" {
		t.Fatalf("the finished run has no final_message: %s", r.body)
	}
	return snap.FinalMessage
}

// wantAnswerOnce checks the page open in the browser: the final answer
// shown once, the API's words exactly.
func (b *browserApp) wantAnswerOnce(t *testing.T, where, want string) {
	t.Helper()
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[shownAnswer](shownAnswerJS))
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 1 || got.Times != 1 || got.Text != want {
		t.Errorf("%s: final answer shown %d times in %d elements as %q, want once as the API's %q", where, got.Times, got.Count, got.Text, want)
	}
}

// cutThenFinish opens a run's page, cuts it off, lets the run finish
// meanwhile and, if expire, lets the replay window pass; then the page
// comes back and must match the database (with the reset's banner exactly
// when the window passed).
func (b *browserApp) cutThenFinish(t *testing.T, expire bool) uuid.UUID {
	t.Helper()
	run := b.startRun(t)
	b.waitState(t, run.ID, store.StateAwaitingApproval)
	b.open(t, run.ID)
	b.waitLive(t)
	b.offline.Store(true)
	b.conns.closeAll()
	b.waitPage(t, "reconnecting", `document.querySelector('#stream-indicator').dataset.state === 'reconnecting'`)
	b.approve(t, run.ID)
	b.waitState(t, run.ID, store.StateCompleted)
	if expire {
		b.streamApp.run = run
		b.expire(t)
	}
	b.offline.Store(false)
	p, _ := b.wantPageMatchesDB(t, run.ID)
	if reset := p.Banner != ""; reset != expire {
		t.Errorf("banner %q: want a reset exactly when the cut outlasted the replay window (%v)", p.Banner, expire)
	}
	return run.ID
}

// newRestartingBrowserApp is newBrowserApp whose server can be restarted:
// the browser talks to one address, behind which restart puts a second
// server over the same database (its own pool, its own Listener, nothing
// in memory), as a restarted process is, once the first has told its
// streams to come back. The executor goes on, as a worker process would.
func newRestartingBrowserApp(t *testing.T) (b *browserApp, restart func()) {
	t.Helper()
	var serving atomic.Pointer[http.Handler]
	b = &browserApp{narrator: newGatedNarrator(4, -1)}
	cfg := handlers.Config{Stream: stream.Config{Retry: 200 * time.Millisecond}}
	a := newApp(t, cfg, withExecutor(b.narrator, payments.Faults{}), wrapHandler(func(first http.Handler) http.Handler {
		serving.Store(&first)
		return b.outage(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*serving.Load()).ServeHTTP(w, r) }))
	}))
	b.streamApp = &streamApp{app: a, customer: a.user(t, "customer@example.com")}
	b.approver = a.user(t, "approver@example.com")
	b.ctx = browsertest.New(t)
	if err := browsertest.Login(b.ctx, a.srv.URL, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	return b, func() {
		t.Helper()
		ctx := context.Background()
		st, err := store.Open(ctx, a.store.URL(), store.WithAnswers(views.Answers{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		l := store.NewListener(st.URL(), slog.New(slog.DiscardHandler))
		if err := l.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Stop)
		st.WakeLocal(l)
		cfg.SessionKey, cfg.Listener = testSessionKey, l
		second, err := handlers.New(cfg, st, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { shutdown(t, second) })
		var h http.Handler = second
		serving.Store(&h)
		shutdown(t, a.e) // the first server tells its streams to come back, and is gone
	}
}

// wantAnswerAs signs the browser in as email and checks the page at path.
func (b *browserApp) wantAnswerAs(t *testing.T, email, path, want string) {
	t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name="email"]`))); err != nil {
		t.Fatal(err)
	}
	if err := browsertest.Login(b.ctx, b.srv.URL, email, devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(b.ctx, chromedp.Navigate(b.srv.URL+path), chromedp.WaitVisible(chromedp.CSS("#final-answer"))); err != nil {
		t.Fatal(err)
	}
	b.wantAnswerOnce(t, email+"'s page", want)
}

// TestBrowser_FinalAnswerOnce: a customer's run page is open while the
// run finishes behind a network cut (the page resumes from its cursor, or
// starts again from a snapshot when the cut outlasted the replay window),
// or across a restart of the server. Each time the page shows the final
// answer once, the API's final_message word for word, live and after a
// reload; after the restart so do the approver's and support's pages.
func TestBrowser_FinalAnswerOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		expire bool
	}{{"cut", false}, {"reset", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBrowserApp(t, newGatedNarrator(4, -1), payments.Faults{})
			id := b.cutThenFinish(t, tc.expire)
			want := b.apiFinalMessage(t, id)
			b.wantAnswerOnce(t, "back after the cut", want)
			b.reload(t)
			b.wantAnswerOnce(t, "reloaded", want)
		})
	}
	t.Run("restart", func(t *testing.T) {
		t.Parallel()
		b, restart := newRestartingBrowserApp(t)
		run := b.startRun(t)
		b.waitState(t, run.ID, store.StateAwaitingApproval)
		b.open(t, run.ID)
		b.waitLive(t)
		before := b.streams.Load()
		restart()
		testkit.WaitUntil(t, "the page to come back to the second server", 20*time.Second, func() bool { return b.streams.Load() > before })
		b.waitLive(t)

		b.approve(t, run.ID)
		b.waitState(t, run.ID, store.StateCompleted)
		b.wantPageMatchesDB(t, run.ID)
		want := b.apiFinalMessage(t, run.ID)
		b.wantAnswerOnce(t, "live across the restart", want)
		b.reload(t)
		b.wantAnswerOnce(t, "reloaded", want)
		b.wantAnswerAs(t, "approver@example.com", "/runs/"+run.ID.String(), want)
		b.wantAnswerAs(t, "support@example.com", "/support/runs/"+run.ID.String(), want)
	})
}
