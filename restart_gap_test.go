package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store"
)

// gapApp is real refundd processes (provider, worker, serve) over a
// PostgreSQL of the test's own, which the test restarts.
type gapApp struct {
	t       *testing.T
	cluster *devdb.Cluster
	env     []string
	base    string
	serve   *process
	st      *store.Store
}

func newGapApp(t *testing.T) *gapApp {
	t.Helper()
	a := &gapApp{t: t, cluster: soakCluster(t)}
	dbURL := a.cluster.URL("postgres")
	providerAddr, addr := freeAddr(t), freeAddr(t)
	a.base = "http://" + addr
	a.env = []string{"DATABASE_URL=" + dbURL, "PROVIDER_ADDR=" + providerAddr, "PROVIDER_URL=http://" + providerAddr,
		"SESSION_KEY=" + testSessionKey, "ADDR=" + addr, "APPROVAL_THRESHOLD=1", "NARRATION_PACE=5ms", "STREAM_DRAIN=1s",
		"PROVIDER_SECRET=" + testProviderSecret}
	if out, err := a.command("migrate").CombinedOutput(); err != nil {
		t.Fatalf("refundd migrate: %v\n%s", err, out)
	}
	ctx := context.Background()
	var err error
	if a.st, err = store.Open(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.st.Close() })
	if err := devdb.SeedDemo(ctx, a.st); err != nil {
		t.Fatal(err)
	}
	spawn(t, a.env, "simulated payment provider running", "provider")
	spawn(t, a.env, "worker running", "worker")
	a.serve = spawn(t, a.env, "refundd is running at", "serve")
	return a
}

func (a *gapApp) command(args ...string) *exec.Cmd {
	cmd := exec.Command(buildBinary(a.t), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, a.env...)
	return cmd
}

// restart stops the server (SIGTERM), restarts PostgreSQL (a fast stop:
// everything committed is kept) and starts the server again on its address.
func (a *gapApp) restart() {
	a.t.Helper()
	if err := a.serve.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		a.t.Fatal(err)
	}
	select {
	case <-a.serve.done:
	case <-time.After(time.Minute):
		a.t.Fatal("serve did not exit within a minute of SIGTERM")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := a.cluster.Stop(ctx); err != nil {
		a.t.Fatal(err)
	}
	if _, err := a.cluster.Start(ctx); err != nil {
		a.t.Fatal(err)
	}
	a.serve = spawn(a.t, a.env, "refundd is running at", "serve")
}

func (a *gapApp) user(email string) *store.User {
	a.t.Helper()
	u, err := a.st.UserByEmail(context.Background(), email)
	if err != nil {
		a.t.Fatal(err)
	}
	return u
}

// TestRestart_GapIsNotALoss: PostgreSQL and the server restart while a run
// waits for its approver, with the customer's page open. The run's next
// event skips 1,000 seqs (the epoch skip); nothing was pruned, and neither
// the page nor support nor the API nor `refundd events` says anything is
// missing.
func TestRestart_GapIsNotALoss(t *testing.T) {
	t.Parallel()
	a := newGapApp(t)
	ctx := context.Background()
	customer := a.user("customer@example.com")
	orders, err := a.st.OrdersByCustomer(ctx, customer.ID)
	if err != nil || len(orders) == 0 {
		t.Fatalf("orders: %v (%d)", err, len(orders))
	}
	run, _, err := a.st.StartRun(ctx, store.StartRequest{OwnerID: customer.ID, ClientRequestID: uuid.NewString(),
		OrderID: orders[0].ID, Amount: 100, Reason: "restart test"})
	if err != nil {
		t.Fatal(err)
	}
	before := testkit.WaitRunState(t, a.st, run.ID, store.StateAwaitingApproval, time.Minute).LastSeq

	b := browsertest.NewWithTimeout(t, 4*time.Minute)
	if err := browsertest.Login(b, a.base, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(b, chromedp.Navigate(a.base+"/runs/"+run.ID.String())); err != nil {
		t.Fatal(err)
	}
	waitJS(t, b, "the page live", time.Minute, `document.querySelector('#stream-indicator')?.dataset.state === 'live'`)

	approver := a.user("approver@example.com")
	a.restart()
	// The test's own pool may hold connections the restart broke.
	testkit.WaitUntil(t, "the approval", time.Minute, func() bool {
		_, err := a.st.Approve(ctx, run.ID, approver.ID, "")
		return err == nil
	})
	after := testkit.WaitRunState(t, a.st, run.ID, store.StateCompleted, 2*time.Minute)
	if want := []int64{before}; !slices.Equal(after.SeqGaps, want) || after.LastSeq <= before+1000 || after.ReplayFloor != 0 {
		t.Fatalf("after the restart: gaps %v (want %v), last_seq %d (want past %d), replay_floor %d (want 0)",
			after.SeqGaps, want, after.LastSeq, before+1000, after.ReplayFloor)
	}
	t.Run("the page that watched", func(t *testing.T) { wantPageWhole(t, b, "") })
	t.Run("the page reloaded", func(t *testing.T) { wantPageWhole(t, b, a.base+"/runs/"+run.ID.String()) })
	t.Run("the API", func(t *testing.T) { a.wantAPIWhole(t, run.ID, before) })
	t.Run("support", func(t *testing.T) { a.wantSupportWhole(t, run.ID, before) })
	t.Run("refundd events", func(t *testing.T) {
		out, err := a.command("events", "--run", run.ID.String(), "--after", "1").CombinedOutput()
		if err != nil || strings.Contains(string(out), "no longer kept") || !strings.Contains(string(out), `"run.completed"`) {
			t.Errorf("refundd events --after 1: %v\n%s", err, out)
		}
	})
	wantVerifyClean(t, a.env)
}

// waitJS waits until cond (JavaScript) is true in the browser.
func waitJS(t *testing.T, b context.Context, what string, timeout time.Duration, cond string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := chromedp.Run(b, chromedp.Evaluate[bool](cond))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %v for %s: %v", timeout, what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// wantPageWhole waits for the run page (navigating to it first unless
// open is "") to show the run completed, then wants no word of loss on it.
func wantPageWhole(t *testing.T, b context.Context, open string) {
	if open != "" {
		if _, err := chromedp.Run(b, chromedp.Navigate(open)); err != nil {
			t.Fatal(err)
		}
	}
	waitJS(t, b, "the outcome", 2*time.Minute, `document.querySelector('#run-status')?.dataset.state === 'completed'`)
	text, err := chromedp.Run(b, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	for _, loss := range []string{"no longer kept", "while you were offline", "pruned"} {
		if strings.Contains(text, loss) {
			t.Errorf("the page says %q after a restart that lost nothing:\n%s", loss, text)
		}
	}
}

// get reads path as the demo user with email, through a fresh session.
func (a *gapApp) get(t *testing.T, email, path string) (int, string) {
	t.Helper()
	c := newClient(t)
	res, err := c.PostForm(a.base+"/login", url.Values{"email": {email}, "password": {devdb.DemoPassword}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	res, err = c.Get(a.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(body)
}

func (a *gapApp) wantAPIWhole(t *testing.T, runID uuid.UUID, before int64) {
	status, body := a.get(t, "customer@example.com", "/api/runs/"+runID.String())
	var snap struct {
		ReplayFloor *int64 `json:"replay_floor"`
	}
	if err := json.Unmarshal([]byte(body), &snap); status != http.StatusOK || err != nil || snap.ReplayFloor == nil || *snap.ReplayFloor != 0 {
		t.Errorf("GET /api/runs/{id}: %d, replay_floor %v (%v), want 200 and 0:\n%s", status, snap.ReplayFloor, err, body)
	}
	status, body = a.get(t, "customer@example.com", "/api/runs/"+runID.String()+"/events?after=1")
	if status != http.StatusOK || !strings.Contains(body, `"run.completed"`) {
		t.Errorf("GET /api/runs/{id}/events?after=1 (before the skip at %d): %d, want 200 with the rest of the log:\n%s", before, status, body)
	}
}

func (a *gapApp) wantSupportWhole(t *testing.T, runID uuid.UUID, before int64) {
	status, body := a.get(t, "support@example.com", "/support/runs/"+runID.String())
	if status != http.StatusOK || strings.Contains(body, "no longer kept") || !strings.Contains(body, "Nothing has been pruned") {
		t.Errorf("support's page: %d; want it to say nothing was pruned:\n%s", status, body)
	}
	if !strings.Contains(body, "were skipped when the database restarted") {
		t.Errorf("support's page does not name the seqs the restart skipped after %d", before)
	}
}
