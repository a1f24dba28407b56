package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// The database fails over (issue 34): two PostgreSQL clusters with
// streaming replication, refundd's serve and worker on a floating address
// (a forwarder the test moves), the simulated provider as a process of its
// own with a database of its own. The primary is killed with SIGKILL and
// the standby promoted.

// TestFailover_AsyncStandbyLosesTheTailNotTheMoney: the standby stops
// receiving; on the primary alone 15 waiting runs are approved and 5 more
// requests started and approved, and all 20 refunded. The primary dies,
// the standby (which lacks all of that) is promoted and the address moves.
// The clients retry their 5 starts with the same keys; the 15 runs are
// found refunded at the provider. Exactly 20 refunds, nobody decides
// anything twice, no seq a client saw names another event, verify passes.
func TestFailover_AsyncStandbyLosesTheTailNotTheMoney(t *testing.T) {
	t.Parallel()
	testFailover(t, false)
}

// TestFailover_SyncStandbyLosesNothing: the same with a synchronous standby
// (synchronous_standby_names), which never stops receiving: everything any
// client was told is on the standby, and the retried starts find their runs.
func TestFailover_SyncStandbyLosesNothing(t *testing.T) {
	t.Parallel()
	testFailover(t, true)
}

const (
	failoverWaiting = 15 // runs waiting for approval when the standby stops receiving
	failoverLate    = 5  // requests started after it
	failoverAmount  = 100
)

func testFailover(t *testing.T, sync bool) {
	a := newFailoverApp(t, sync)
	began := time.Now()
	waiting, late, watchers := a.refundOnThePrimary(t, sync)
	// What the clients saw, seq by seq, from the old primary.
	seen := map[uuid.UUID]map[int64]uuid.UUID{}
	for _, id := range append(slices.Clone(waiting), slices.Collect(maps.Values(late))...) {
		seen[id] = a.clientLog(t, id)
	}
	t.Logf("before the kill: %d runs refunded on the primary in %v", len(seen), time.Since(began).Round(time.Millisecond))

	down, up := a.failOver(t)
	t.Logf("/readyz: 503 %v after the kill; 200 %v after the address moved to the promoted standby",
		down.Round(time.Millisecond), up.Round(time.Millisecond))
	if up > 5*time.Second {
		t.Errorf("/readyz took %v to say 200 after the new primary answered, want at most 5 s", up)
	}
	// Pages that were open come back with the cursors they hold.
	resumed := a.resume(t, waiting, seen)
	retried := a.retryStarts(t, late, sync)
	after := append(slices.Clone(waiting), retried...)
	for _, id := range after {
		testkit.WaitRunState(t, a.st, id, store.StateCompleted, time.Minute)
	}
	t.Logf("after the failover: every run ended, %v after the first start", time.Since(began).Round(time.Millisecond))

	t.Run("exactly one refund per request at the provider", func(t *testing.T) { a.wantOneRefundEach(t, after) })
	t.Run("nobody decided anything twice", func(t *testing.T) { a.wantNoSecondDecision(t, waiting, retried, sync) })
	t.Run("no seq names another event", func(t *testing.T) { a.wantNoSeqReused(t, seen, waiting, sync) })
	t.Run("the open streams went on or reset", func(t *testing.T) { a.wantWatchersWhole(t, append(watchers, resumed...)) })
	t.Run("the words say what happened", func(t *testing.T) { a.wantWords(t, waiting[0], sync) })
	t.Run("support finds every provider refund explained", func(t *testing.T) {
		const want = "Every one of the 20 refunds the payment provider holds is one of our runs"
		if status, body := a.page(t, "support@example.com", "/support/provider"); status != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/support/provider: %d, want it to say %q:\n%s", status, want, body)
		}
	})
	if !sync {
		t.Run("a request the database forgot is gone under its old ID", func(t *testing.T) {
			for key, old := range late {
				if ans := a.call(t, a.customer, http.MethodGet, "/api/runs/"+old.String(), "", nil); ans.status != http.StatusNotFound {
					t.Errorf("GET the forgotten run of %s: %d, want 404", key, ans.status)
				}
			}
		})
	}
	wantVerifyClean(t, a.env)
}

// refundOnThePrimary starts 15 runs and waits until they wait for an
// approver with every event of theirs on the standby (watching their
// streams), stops the standby's replication unless it is synchronous,
// then, on the primary alone, approves the 15 and starts and approves 5
// more (by request key), and waits for the 20 refunds.
func (a *failoverApp) refundOnThePrimary(t *testing.T, sync bool) (waiting []uuid.UUID, late map[string]uuid.UUID, ws []*watcher) {
	t.Helper()
	for i := range failoverWaiting {
		id, status := a.startRun(t, fmt.Sprintf("waiting-%d", i))
		if status != http.StatusCreated {
			t.Fatalf("start %d: %d, want 201", i, status)
		}
		waiting = append(waiting, id)
	}
	for _, id := range waiting {
		testkit.WaitRunState(t, a.st, id, store.StateAwaitingApproval, time.Minute)
	}
	ws = a.watch(t, waiting)
	a.waitStandbyCaughtUp(t)
	if !sync {
		a.stopReplication(t)
	}
	for _, id := range waiting {
		a.approve(t, id)
	}
	late = map[string]uuid.UUID{}
	for i := range failoverLate {
		key := fmt.Sprintf("late-%d", i)
		id, status := a.startRun(t, key)
		if status != http.StatusCreated {
			t.Fatalf("start %s: %d, want 201", key, status)
		}
		late[key] = id
		testkit.WaitRunState(t, a.st, id, store.StateAwaitingApproval, time.Minute)
		a.approve(t, id)
	}
	for _, id := range append(slices.Clone(waiting), slices.Collect(maps.Values(late))...) {
		testkit.WaitRunState(t, a.st, id, store.StateCompleted, time.Minute)
	}
	if n := len(a.ledger(t)); n != failoverWaiting+failoverLate {
		t.Fatalf("before the failover the provider holds %d refunds, want %d", n, failoverWaiting+failoverLate)
	}
	return waiting, late, ws
}

// retryStarts starts the late requests again with the same keys, as their
// clients do after a failure: the database forgot them (201, a new run)
// unless the standby was synchronous (200, the same run).
func (a *failoverApp) retryStarts(t *testing.T, late map[string]uuid.UUID, sync bool) []uuid.UUID {
	t.Helper()
	var retried []uuid.UUID
	for key, old := range late {
		id, status := a.startRun(t, key)
		want := http.StatusCreated
		if sync {
			want = http.StatusOK
		}
		if status != want || (sync && id != old) {
			t.Errorf("retried start %s: %d run %s, want %d (the old run was %s)", key, status, id, want, old)
		}
		retried = append(retried, id)
	}
	return retried
}

// failoverApp is the two clusters, the floating address, and refundd's
// provider, worker and serve processes.
type failoverApp struct {
	primary, standby *devdb.Cluster
	fwd              *forwarder
	env              []string
	base             string
	st               *store.Store // through the floating address
	provider         *payments.Client
	api              *soakAPI
	stats, viol      *tally
	customer         string // API tokens
	approver         string
	orderID          int64
}

func newFailoverApp(t *testing.T, sync bool) *failoverApp {
	t.Helper()
	ctx := context.Background()
	a := &failoverApp{primary: soakCluster(t), stats: &tally{}, viol: &tally{}}
	a.standby = failoverStandby(t, a.primary)
	if sync {
		a.sql(t, a.primary, `ALTER SYSTEM SET synchronous_standby_names = '*'`, `SELECT pg_reload_conf()`)
		a.waitPrimary(t, "the standby to be synchronous", `SELECT count(*) = 1 FROM pg_stat_replication WHERE sync_state = 'sync'`)
	} else {
		a.waitPrimary(t, "the standby to stream", `SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming'`)
	}
	a.fwd = newForwarder(t, a.primary.SocketPath())
	dbURL := "postgres://postgres@" + a.fwd.addr() + "/postgres?sslmode=disable&connect_timeout=5"
	providerAddr, addr := freeAddr(t), freeAddr(t)
	a.base = "http://" + addr
	a.env = []string{"DATABASE_URL=" + dbURL, "PROVIDER_ADDR=" + providerAddr, "PROVIDER_URL=http://" + providerAddr,
		"PROVIDER_SECRET=" + testProviderSecret, "SESSION_KEY=" + testSessionKey, "ADDR=" + addr,
		"APPROVAL_THRESHOLD=1", "NARRATION_PACE=5ms", "WORKER_LEASE=2s", "STREAM_DRAIN=1s"}
	migrate := refundd(t, a.env, "migrate")
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("refundd migrate: %v\n%s", err, out)
	}
	var err error
	if a.st, err = store.Open(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.st.Close() })
	if err := devdb.SeedDemo(ctx, a.st); err != nil {
		t.Fatal(err)
	}
	a.customer, a.orderID = a.token(t, "customer@example.com")
	a.approver, _ = a.token(t, "approver@example.com")

	// The provider keeps its books in a database of its own, which no
	// failover touches.
	spawn(t, append(slices.Clone(a.env), "DATABASE_URL="+storetest.URL(t)), "simulated payment provider running", "provider")
	a.provider = payments.NewClient("http://"+providerAddr, 5*time.Second).WithSecret(testProviderSecret)
	t.Cleanup(a.provider.Close)
	spawn(t, a.env, "worker running", "worker")
	spawn(t, a.env, "refundd is running at", "serve")
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	a.api = &soakAPI{http: &http.Client{Transport: tr}, serves: []string{a.base}, stats: a.stats, notes: a.viol}
	return a
}

// failoverStandby makes a streaming standby of primary under /dev/shm, as
// soakCluster makes its cluster, and starts it.
func failoverStandby(t *testing.T, primary *devdb.Cluster) *devdb.Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "refundd-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := devdb.NewCluster(dir, 5432)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Kill(ctx); err != nil {
			t.Errorf("stop the standby: %v", err)
		}
		os.RemoveAll(dir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.CloneStandby(ctx, primary); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// refundd is the command `refundd <args>` with env.
func refundd(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	return cmd
}

// sql runs statements on c directly, over its own socket.
func (a *failoverApp) sql(t *testing.T, c *devdb.Cluster, stmts ...string) {
	t.Helper()
	db := sqlx.MustOpen("postgres", c.URL("postgres"))
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// waitPrimary waits until cond (a query of one boolean) is true on the
// primary.
func (a *failoverApp) waitPrimary(t *testing.T, what, cond string) {
	t.Helper()
	db := sqlx.MustOpen("postgres", a.primary.URL("postgres"))
	defer db.Close()
	testkit.WaitUntil(t, what, 30*time.Second, func() bool {
		var ok bool
		return db.Get(&ok, cond) == nil && ok
	})
}

// waitStandbyCaughtUp waits until the standby has replayed everything the
// primary has written so far.
func (a *failoverApp) waitStandbyCaughtUp(t *testing.T) {
	t.Helper()
	p := sqlx.MustOpen("postgres", a.primary.URL("postgres"))
	defer p.Close()
	s := sqlx.MustOpen("postgres", a.standby.URL("postgres"))
	defer s.Close()
	var lsn string
	if err := p.Get(&lsn, `SELECT pg_current_wal_lsn()::text`); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the standby to replay "+lsn, 30*time.Second, func() bool {
		var ok bool
		return s.Get(&ok, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn) == nil && ok
	})
}

// stopReplication makes the standby stop receiving: it streams from
// nowhere until it is promoted.
func (a *failoverApp) stopReplication(t *testing.T) {
	t.Helper()
	a.sql(t, a.standby, `ALTER SYSTEM SET primary_conninfo = ''`, `SELECT pg_reload_conf()`)
	a.waitPrimary(t, "the standby to stop receiving", `SELECT count(*) = 0 FROM pg_stat_replication`)
}

// failOver kills the primary's postmaster with SIGKILL, waits for /readyz
// to say 503, promotes the standby and moves the floating address to it.
// down is how long /readyz took to say 503 after the kill, up how long it
// took to say 200 after the address moved.
func (a *failoverApp) failOver(t *testing.T) (down, up time.Duration) {
	t.Helper()
	pid, err := a.primary.PostmasterPID()
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the primary's postmaster to die", 10*time.Second, func() bool { return !processAlive(pid) })
	testkit.WaitUntil(t, "/readyz to say 503 without a primary", 15*time.Second, func() bool { return a.readyz() == http.StatusServiceUnavailable })
	down = time.Since(killed)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	a.fwd.moveTo(a.standby.SocketPath())
	moved := time.Now()
	testkit.WaitUntil(t, "/readyz to say 200 on the new primary", 30*time.Second, func() bool { return a.readyz() == http.StatusOK })
	return down, time.Since(moved)
}

func (a *failoverApp) readyz() int {
	c := http.Client{Timeout: 3 * time.Second}
	res, err := c.Get(a.base + "/readyz")
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// token makes an API token for the demo user with email, and names the
// user's first order.
func (a *failoverApp) token(t *testing.T, email string) (string, int64) {
	t.Helper()
	ctx := context.Background()
	u, err := a.st.UserByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := a.st.CreateToken(ctx, u.ID, "failover")
	if err != nil {
		t.Fatal(err)
	}
	orders, err := a.st.OrdersByCustomer(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	var order int64
	for _, o := range orders {
		if o.Amount >= 2*(failoverWaiting+failoverLate)*failoverAmount {
			order = o.ID
			break
		}
	}
	return secret, order
}

func (a *failoverApp) call(t *testing.T, token, method, path, key string, body any) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ans, err := a.api.call(ctx, token, method, path, key, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return ans
}

// startRun asks for a refund on the customer's order under the request
// key, as a client does (and retries, after a failure of the moment).
func (a *failoverApp) startRun(t *testing.T, key string) (uuid.UUID, int) {
	t.Helper()
	ans := a.call(t, a.customer, http.MethodPost, "/api/runs", key,
		map[string]any{"order_id": a.orderID, "amount": failoverAmount, "reason": "failover test"})
	var run struct {
		ID uuid.UUID `json:"id"`
	}
	if err := json.Unmarshal(ans.body, &run); err != nil || run.ID == uuid.Nil {
		t.Fatalf("start %s: %d %s", key, ans.status, ans.body)
	}
	return run.ID, ans.status
}

func (a *failoverApp) approve(t *testing.T, runID uuid.UUID) {
	t.Helper()
	if ans := a.call(t, a.approver, http.MethodPost, "/api/runs/"+runID.String()+"/approve", "", nil); ans.status != http.StatusOK {
		t.Fatalf("approve %s: %d %s", runID, ans.status, ans.body)
	}
}

func (a *failoverApp) ledger(t *testing.T) []payments.Receipt {
	t.Helper()
	l, err := a.provider.Ledger(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// clientLog reads a run's log through the API as its customer: what a
// client has seen, seq by seq.
func (a *failoverApp) clientLog(t *testing.T, runID uuid.UUID) map[int64]uuid.UUID {
	t.Helper()
	out := map[int64]uuid.UUID{}
	for after := int64(0); ; {
		ans := a.call(t, a.customer, http.MethodGet, fmt.Sprintf("/api/runs/%s/events?after=%d", runID, after), "", nil)
		var page struct {
			Next   int64         `json:"next"`
			More   bool          `json:"more"`
			Events []store.Event `json:"events"`
		}
		if err := json.Unmarshal(ans.body, &page); ans.status != http.StatusOK || err != nil {
			t.Fatalf("events of %s after %d: %d %v", runID, after, ans.status, err)
		}
		for _, e := range page.Events {
			out[e.Seq] = e.EventID
		}
		if !page.More {
			return out
		}
		after = page.Next
	}
}

// storeLog reads a run's log from the database (the new primary).
func (a *failoverApp) storeLog(t *testing.T, runID uuid.UUID) map[int64]uuid.UUID {
	t.Helper()
	evs, err := a.st.EventsAfter(context.Background(), runID, 0, store.MaxPage)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]uuid.UUID{}
	for _, e := range evs {
		out[e.Seq] = e.EventID
	}
	return out
}

// watch follows each run's stream as a client does.
func (a *failoverApp) watch(t *testing.T, runs []uuid.UUID) []*watcher {
	return a.watchFrom(t, runs, nil)
}

// resume follows each run's stream from what a client saw of it before
// the failover (seen, up to its highest seq): a page left open, coming back.
func (a *failoverApp) resume(t *testing.T, runs []uuid.UUID, seen map[uuid.UUID]map[int64]uuid.UUID) []*watcher {
	return a.watchFrom(t, runs, seen)
}

func (a *failoverApp) watchFrom(t *testing.T, runs []uuid.UUID, seen map[uuid.UUID]map[int64]uuid.UUID) []*watcher {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ws []*watcher
	for _, id := range runs {
		w := newWatcher(a.api, a.customer, id, a.viol, nil)
		w.tailMayBeLost = true
		if s := seen[id]; len(s) > 0 {
			w.resumeFrom(s, slices.Max(slices.Collect(maps.Keys(s))))
		}
		w.skippedSeqs = func() []store.SeqRange {
			for range 50 { // the pool may still hold connections the failover broke
				if r, err := a.st.RunByID(ctx, id); err == nil {
					return r.SkippedSeqs()
				}
				time.Sleep(100 * time.Millisecond)
			}
			return nil
		}
		ws = append(ws, w)
		wg.Go(func() { w.run(ctx) })
	}
	// Streams end with their runs; those that have not by the end of the
	// test are stopped.
	t.Cleanup(func() { cancel(); wg.Wait() })
	return ws
}

func (a *failoverApp) wantOneRefundEach(t *testing.T, runs []uuid.UUID) {
	ledger := a.ledger(t)
	if got, want := len(ledger), failoverWaiting+failoverLate; got != want {
		t.Errorf("the provider holds %d refunds, want %d", got, want)
	}
	byKey := map[string]payments.Receipt{}
	for _, rc := range ledger {
		byKey[rc.Key] = rc
	}
	for _, id := range runs {
		ops, err := a.st.OperationsByRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(ops) != 1 || ops[0].State != store.OpSucceeded || byKey[ops[0].ID.String()].Ref != ops[0].ProviderRef.String {
			t.Errorf("run %s: operations %+v, want one succeeded under a key the provider refunded", id, ops)
		}
	}
}

// wantNoSecondDecision: no run waits for a decision; the 15 runs asked
// once, before the failover, and were not decided again; the retried
// starts asked nobody.
func (a *failoverApp) wantNoSecondDecision(t *testing.T, waiting, retried []uuid.UUID, sync bool) {
	db := storetest.DB(t, a.st)
	var queued int
	if err := db.Get(&queued, `SELECT (SELECT count(*) FROM runs WHERE state = 'awaiting_approval') + (SELECT count(*) FROM queue_entries)`); err != nil {
		t.Fatal(err)
	}
	if queued != 0 {
		t.Errorf("%d runs wait for a decision (or sit in the queue), want none", queued)
	}
	count := func(id uuid.UUID, typ string) int {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = $2`, id, typ); err != nil {
			t.Fatal(err)
		}
		return n
	}
	wantGranted := 0 // the approvals were lost, and nobody was asked again
	if sync {
		wantGranted = 1
	}
	for _, id := range waiting {
		if asked, granted := count(id, store.EventApprovalRequested), count(id, store.EventApprovalGranted); asked != 1 || granted != wantGranted {
			t.Errorf("run %s: asked %d times, approved %d times; want asked once, approved %d", id, asked, granted, wantGranted)
		}
	}
	for _, id := range retried {
		if asked := count(id, store.EventApprovalRequested); asked != 1 && sync || asked != 0 && !sync {
			t.Errorf("retried run %s asked for a decision %d times", id, asked)
		}
	}
}

// wantNoSeqReused: every seq a client saw from the old primary names the
// same event on the new one, or no event at all (lost with the tail, and
// skipped since); a client resuming from its last cursor goes on after it
// or gets a reset.
func (a *failoverApp) wantNoSeqReused(t *testing.T, seen map[uuid.UUID]map[int64]uuid.UUID, waiting []uuid.UUID, sync bool) {
	var lost, maxLost, resets, resumes int
	for _, id := range waiting {
		now := a.storeLog(t, id)
		runLost := 0
		for seq, ev := range seen[id] {
			got, ok := now[seq]
			switch {
			case !ok:
				runLost++
			case got != ev:
				t.Errorf("run %s: seq %d was event %s, now %s", id, seq, ev, got)
			}
		}
		lost += runLost
		maxLost = max(maxLost, runLost)
		cursor := slices.Max(slices.Collect(maps.Keys(seen[id])))
		ans := a.call(t, a.customer, http.MethodGet, fmt.Sprintf("/api/runs/%s/events?after=%d", id, cursor), "", nil)
		switch ans.status {
		case http.StatusGone:
			resets++
		case http.StatusOK:
			resumes++
			var page struct{ Events []store.Event }
			json.Unmarshal(ans.body, &page)
			for _, e := range page.Events {
				if e.Seq <= cursor {
					t.Errorf("run %s: after cursor %d the log sent seq %d", id, cursor, e.Seq)
				}
			}
		default:
			t.Errorf("run %s: events after the client's cursor %d: %d %s", id, cursor, ans.status, ans.body)
		}
	}
	t.Logf("%d events the clients saw were lost with the tail (at most %d of one run); cursors: %d reset, %d resumed", lost, maxLost, resets, resumes)
	if sync && lost != 0 {
		t.Errorf("%d events the clients saw were lost with a synchronous standby, want none", lost)
	}
	if !sync && lost == 0 {
		t.Error("no event was lost: the standby was not behind, and the test proves nothing")
	}
}

func (a *failoverApp) wantWatchersWhole(t *testing.T, ws []*watcher) {
	for _, w := range ws {
		// The stream closes once it has sent the run's end.
		testkit.WaitUntil(t, "the stream of "+w.runID.String()+" to end with its run", 30*time.Second, w.closed.Load)
	}
	if n := a.viol.total(); n > 0 {
		t.Errorf("the streams saw %d violations: %s\n%s", n, a.viol, strings.Join(a.viol.Details(), "\n"))
	}
	t.Logf("streams: %s", a.stats)
}

// wantWords: the run's page and support's timeline say the refund was
// found at the provider after the database lost its record of it.
func (a *failoverApp) wantWords(t *testing.T, runID uuid.UUID, sync bool) {
	snap, err := a.st.Snapshot(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	const found = "found there by this request's key"
	if got := strings.Contains(snap.FinalMessage.Body, found); got == sync {
		t.Errorf("final message %q: says it was found at the provider %t, want %t", snap.FinalMessage.Body, got, !sync)
	}
	// Apostrophes are escaped in HTML: the words before them.
	for _, page := range []struct{ email, path, want string }{
		{"customer@example.com", "/runs/" + runID.String(), "it was found there by this request"},
		{"support@example.com", "/support/runs/" + runID.String(), "found there by the request"},
	} {
		status, body := a.page(t, page.email, page.path)
		if got := strings.Contains(body, page.want); status != http.StatusOK || got == sync {
			t.Errorf("%s as %s: %d, says %q: %t, want %t", page.path, page.email, status, page.want, got, !sync)
		}
	}
}

// page reads path as the demo user with email.
func (a *failoverApp) page(t *testing.T, email, path string) (int, string) {
	t.Helper()
	g := gapApp{t: t, base: a.base}
	return g.get(t, email, path)
}

// forwarder is the floating address: a TCP listener on loopback that pipes
// each connection to the unix socket of the server that is primary now.
// Moving it ends every connection it carried, as a moved address does.
type forwarder struct {
	ln     net.Listener
	mu     sync.Mutex
	target string // a socket path
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newForwarder(t *testing.T, target string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Go(f.accept)
	t.Cleanup(f.close)
	return f
}

func (f *forwarder) addr() string { return f.ln.Addr().String() }

func (f *forwarder) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		target := f.target
		f.mu.Unlock()
		f.wg.Go(func() { f.pipe(c, target) })
	}
}

func (f *forwarder) pipe(c net.Conn, target string) {
	s, err := net.DialTimeout("unix", target, 2*time.Second)
	if err != nil {
		c.Close() // nobody there: the client sees the connection end
		return
	}
	f.mu.Lock()
	if f.target != target { // moved while dialing
		f.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	f.conns[c], f.conns[s] = struct{}{}, struct{}{}
	f.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) { io.Copy(dst, src); done <- struct{}{} }
	go cp(s, c)
	go cp(c, s)
	<-done
	c.Close()
	s.Close()
	<-done
	f.mu.Lock()
	delete(f.conns, c)
	delete(f.conns, s)
	f.mu.Unlock()
}

// moveTo points the address at target and ends every connection it
// carried.
func (f *forwarder) moveTo(target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = target
	for c := range f.conns {
		c.Close()
	}
}

func (f *forwarder) close() {
	f.ln.Close()
	f.moveTo("")
	f.wg.Wait()
}
