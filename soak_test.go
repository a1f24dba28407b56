package main

// The chaos soak: the real binaries (two serve, two worker, one provider)
// on one PostgreSQL of their own, many concurrent refund runs from several
// customers, and every fault the design claims to survive, injected while
// they run. At the end the invariants are checked from outside: refundd
// verify, every run finished or honestly waiting, the provider's ledger and
// ours refund for refund, and every stream client's applied history.
//
//	go test -run Soak -count=1 -v .                      # the small size make test runs
//	go test -run Soak -soak.runs=2000 -soak.duration=10m -timeout 30m -v .

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

var (
	soakRuns     = flag.Int("soak.runs", 40, "chaos soak: refund runs to start, spread over -soak.duration")
	soakDuration = flag.Duration("soak.duration", 15*time.Second,
		"chaos soak: how long faults are injected (at least one round of every kind; under a minute, with half-length fault windows)")
)

// soakThreshold is the soak's APPROVAL_THRESHOLD: runs of at least this
// many cents wait for the approver.
const soakThreshold = 5000

// soakProc is one of the soak's refundd processes, and how to start it again.
type soakProc struct {
	args  []string
	env   []string
	ready string
	p     *process
}

// soakHarness is the system under test and the soak's view of it. Only
// the test's goroutine uses its processes and cluster; the tallies are
// shared with the clients.
type soakHarness struct {
	t        *testing.T
	cluster  *devdb.Cluster
	st       *store.Store
	db       *sqlx.DB
	env      []string
	provider *payments.Client
	procs    map[string]*soakProc
	api      *soakAPI
	// pace scales the fault windows: a short soak (make test) halves them
	// to fit one round of every kind into its time.
	pace float64

	faults *tally // faults injected, by kind
	stats  *tally // what the clients did and saw
	viol   *tally // invariant violations
	notes  *tally // findings that break no invariant (a process that died by itself)
}

func newSoakHarness(t *testing.T) *soakHarness {
	t.Helper()
	h := &soakHarness{t: t, cluster: soakCluster(t), procs: map[string]*soakProc{},
		faults: &tally{}, stats: &tally{}, viol: &tally{}, notes: &tally{}, pace: 1}
	if *soakDuration < time.Minute {
		h.pace = 0.5
	}
	dbURL := h.cluster.URL("postgres")
	providerAddr := freeAddr(t)
	h.env = []string{"DATABASE_URL=" + dbURL, "PROVIDER_ADDR=" + providerAddr, "PROVIDER_URL=http://" + providerAddr,
		"PROVIDER_SECRET=" + testProviderSecret,
		"SESSION_KEY=" + testSessionKey, "WORKER_LEASE=3s", "APPROVAL_THRESHOLD=" + strconv.Itoa(soakThreshold),
		// Bounds the performance work may add must not refuse the soak's own load.
		"MAX_STREAMS_PER_USER=100000", "START_RATE_PER_USER=1000000"}
	if out, err := h.command("migrate").CombinedOutput(); err != nil {
		t.Fatalf("refundd migrate: %v\n%s", err, out)
	}
	ctx := context.Background()
	var err error
	if h.st, err = store.Open(ctx, dbURL, store.WithAnswers(views.Answers{})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.st.Close() })
	if h.db, err = sqlx.Open("postgres", dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.db.Close() })
	if err := devdb.SeedDemo(ctx, h.st); err != nil {
		t.Fatal(err)
	}
	h.procs["provider"] = &soakProc{args: []string{"provider"}, ready: "simulated payment provider running"}
	var serves []string
	for i := range 2 {
		addr := freeAddr(t)
		serves = append(serves, "http://"+addr)
		h.procs["serve"+strconv.Itoa(i)] = &soakProc{args: []string{"serve"}, env: []string{"ADDR=" + addr}, ready: "refundd is running at"}
		h.procs["worker"+strconv.Itoa(i)] = &soakProc{args: []string{"worker"}, ready: "worker running"}
	}
	for _, name := range []string{"provider", "serve0", "serve1", "worker0", "worker1"} {
		h.start(name)
	}
	h.provider = payments.NewClient("http://"+providerAddr, 10*time.Second).WithSecret(testProviderSecret)
	t.Cleanup(h.provider.Close)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	h.api = &soakAPI{http: &http.Client{Transport: tr}, serves: serves, stats: h.stats, notes: h.notes}
	t.Cleanup(tr.CloseIdleConnections)
	return h
}

// command is `refundd <args>` with the soak's environment, for the CLI.
func (h *soakHarness) command(args ...string) *exec.Cmd {
	cmd := exec.Command(buildBinary(h.t), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, h.env...)
	return cmd
}

func (h *soakHarness) start(name string) {
	sp := h.procs[name]
	sp.p = spawn(h.t, append(append([]string(nil), h.env...), sp.env...), sp.ready, sp.args...)
}

func exited(p *process) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs a process, unless it already died by itself (a finding).
func (h *soakHarness) kill(name string) {
	p := h.procs[name].p
	if exited(p) {
		h.unplannedExit(name)
		return
	}
	p.cmd.Process.Kill()
	<-p.done
}

// terminate asks a process to stop (SIGTERM) and waits a bounded time.
func (h *soakHarness) terminate(name string) {
	p := h.procs[name].p
	if exited(p) {
		h.unplannedExit(name)
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		h.notes.note("slow_shutdown", "%s still running 20 s after SIGTERM", name)
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (h *soakHarness) unplannedExit(name string) {
	out := h.procs[name].p.out.String()
	if len(out) > 2000 {
		out = out[len(out)-2000:]
	}
	h.notes.note("unplanned_exit", "%s exited by itself (%v); its output ends:\n%s", name, h.procs[name].p.cmd.ProcessState, out)
}

// revive starts again every process that died by itself.
func (h *soakHarness) revive() {
	for _, name := range []string{"provider", "serve0", "serve1", "worker0", "worker1"} {
		if exited(h.procs[name].p) {
			h.unplannedExit(name)
			h.start(name)
		}
	}
}

// setFaults replaces the provider's fault settings.
func (h *soakHarness) setFaults(f payments.Faults) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.provider.SetFaults(ctx, f); err != nil {
		h.t.Fatalf("set the provider's faults: %v", err)
	}
}

// pollUntil polls cond every 20 ms until it holds (true) or timeout
// passes (false): for waits whose end is a finding, not a failure.
func pollUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// pause waits for a random time in [lo, hi], scaled by the soak's pace:
// pacing, not waiting for a condition.
func (h *soakHarness) pause(lo, hi time.Duration) {
	d := time.Duration(float64(lo+rand.N(hi-lo+1)) * h.pace)
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}

// summary is the soak's one line of figures, for docs/RELIABILITY.md.
func (h *soakHarness) summary(runs map[string]int) string {
	var states []string
	for _, s := range []string{store.StateCompleted, store.StateFailed, store.StateCanceled, store.StateAwaitingApproval} {
		states = append(states, fmt.Sprintf("%s=%d", s, runs[s]))
	}
	return fmt.Sprintf("soak: runs=%d (%s); faults: %s; clients: %s; violations=%d %s; notes: %s",
		runs["total"], strings.Join(states, " "), h.faults, h.stats, h.viol.total(), h.viol, h.notes)
}

// soakCustomer is a customer and the API token they call with.
type soakCustomer struct {
	user  *store.User
	token string
}

// journey is one refund a customer asks for, and what the soak did to it.
type journey struct {
	cust   soakCustomer
	order  *store.Order
	amount int64
	key    string
	// twin: another journey asks for most of the same order at once, so
	// at most one of them fits what was paid.
	twin bool
	// leaveWaiting: the approver never decides, so the run waits honestly.
	leaveWaiting bool

	// Set by the journey's goroutine before its watchers start.
	runID    uuid.UUID
	watchers []*watcher
}

// soakLoad is the customers' and the approver's side: runs started,
// streams watched, approvals and cancels sent.
type soakLoad struct {
	h        *soakHarness
	approver string // the approver's token

	mu       sync.Mutex
	journeys []*journey // those that got a run
	approved map[uuid.UUID]int

	starting sync.WaitGroup // journeys not yet past their start
	launched chan struct{}  // closed once every journey has begun
	clients  sync.WaitGroup // watchers, approvals and cancels
}

// seedLoad creates the customers (two demo ones and two more), their
// tokens, one order per journey, and the journeys.
func (h *soakHarness) seedLoad(n int) (*soakLoad, []*journey) {
	h.t.Helper()
	ctx := context.Background()
	token := func(u *store.User) string {
		_, secret, err := h.st.CreateToken(ctx, u.ID, "soak")
		if err != nil {
			h.t.Fatal(err)
		}
		return secret
	}
	var custs []soakCustomer
	for i, email := range []string{"customer@example.com", "customer2@example.com", "soak3@example.com", "soak4@example.com"} {
		u, err := h.st.UserByEmail(ctx, email)
		if errors.Is(err, store.ErrNotFound) {
			u, err = h.st.CreateUser(ctx, email, "Soak Customer "+strconv.Itoa(i), store.RoleCustomer, "pw", store.GrantRefundAccess)
		}
		if err != nil {
			h.t.Fatal(err)
		}
		custs = append(custs, soakCustomer{user: u, token: token(u)})
	}
	approver, err := h.st.UserByEmail(ctx, "approver@example.com")
	if err != nil {
		h.t.Fatal(err)
	}
	var js []*journey
	for i := 0; len(js) < n; i++ {
		c := custs[i%len(custs)]
		o, err := h.st.CreateOrder(ctx, c.user.ID, "Soak order "+strconv.Itoa(i), 10000, "EUR")
		if err != nil {
			h.t.Fatal(err)
		}
		j := &journey{cust: c, order: o, amount: 100 + rand.Int64N(9900), key: "soak-" + strconv.Itoa(len(js))}
		j.leaveWaiting = j.amount >= soakThreshold && rand.IntN(20) == 0
		js = append(js, j)
		if rand.IntN(10) == 0 && len(js) < n {
			j.amount, j.twin = 6000, true
			js = append(js, &journey{cust: c, order: o, amount: 6000, twin: true, key: "soak-" + strconv.Itoa(len(js))})
		}
	}
	return &soakLoad{h: h, approver: token(approver), approved: map[uuid.UUID]int{}, launched: make(chan struct{})}, js
}

// run starts the journeys spread evenly over window, each in a goroutine
// of its own, until ctx ends.
func (l *soakLoad) run(ctx context.Context, js []*journey, window time.Duration) {
	l.starting.Add(len(js))
	go func() {
		defer close(l.launched)
		tick := time.NewTicker(max(window/time.Duration(len(js)), time.Millisecond))
		defer tick.Stop()
		for i, j := range js {
			if i > 0 {
				select {
				case <-ctx.Done():
					l.starting.Add(-(len(js) - i))
					return
				case <-tick.C:
				}
			}
			go l.journey(ctx, j)
		}
	}()
}

// journey starts one run (with duplicate starts), watches it, and now and
// then cancels it or sends a start that reuses its key for another amount.
func (l *soakLoad) journey(ctx context.Context, j *journey) {
	id, ok := l.start(ctx, j)
	if !ok {
		l.starting.Done()
		return
	}
	j.runID = id
	n := 1
	if rand.IntN(10) < 3 {
		n = 2 // a second tab, opened a little later
	}
	for i := range n {
		w := newWatcher(l.h.api, j.cust.token, id, l.h.viol, func() {
			// On the watcher's goroutine, itself a client: Go never races Wait.
			l.clients.Go(func() { l.approve(ctx, j) })
		})
		w.skippedSeqs = func() []store.SeqRange {
			// The jump is seen just after PostgreSQL came back, when the
			// test's own pool may still hold connections the restart
			// closed: ask again (bounded) rather than call the jump a loss.
			for range 50 {
				r, err := l.h.st.RunByID(context.WithoutCancel(ctx), id)
				if err == nil {
					return r.SkippedSeqs()
				}
				time.Sleep(100 * time.Millisecond)
			}
			return nil
		}
		j.watchers = append(j.watchers, w)
		l.clients.Go(func() {
			if i > 0 && !pauseFor(ctx, 2*time.Second) {
				return
			}
			w.run(ctx)
		})
	}
	if rand.IntN(10) == 0 {
		l.clients.Go(func() { l.mismatch(ctx, j) })
	}
	if rand.IntN(100) < 15 {
		l.clients.Go(func() {
			// Anywhere from before planning to after the refund.
			if pauseFor(ctx, 50*time.Millisecond+rand.N(4*time.Second)) {
				l.cancel(ctx, j)
			}
		})
	}
	l.mu.Lock()
	l.journeys = append(l.journeys, j)
	l.mu.Unlock()
	l.starting.Done()
}

// start sends the journey's start one to three times at once with the
// same Idempotency-Key (a double click, a retry racing the first try):
// every answer must name the same run, and at most one may say created.
func (l *soakLoad) start(ctx context.Context, j *journey) (uuid.UUID, bool) {
	n := 1 + rand.IntN(3)
	l.h.stats.add("starts_duplicated", n-1)
	answers := make([]answer, n)
	errs := make([]error, n)
	body := map[string]any{"order_id": j.order.ID, "amount": j.amount, "reason": "soak: arrived broken"}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			answers[i], errs[i] = l.h.api.call(ctx, j.cust.token, http.MethodPost, "/api/runs", j.key, body)
		})
	}
	wg.Wait()
	ids := map[uuid.UUID]bool{}
	created, refused := 0, 0
	for i, a := range answers {
		var run struct{ ID uuid.UUID }
		switch {
		case errs[i] != nil:
			return uuid.Nil, false // the soak is ending
		case a.status == http.StatusCreated || a.status == http.StatusOK:
			if err := json.Unmarshal(a.body, &run); err != nil || run.ID == uuid.Nil {
				l.h.viol.note("start_bad_answer", "key %s: %d %s", j.key, a.status, a.body)
				continue
			}
			ids[run.ID] = true
			if a.status == http.StatusCreated {
				created++
			}
		case a.status == http.StatusUnprocessableEntity && j.twin && a.errorCode() == store.CodeInvalid:
			refused++ // its twin holds what is left of the order
		default:
			l.h.viol.note("start_unexpected", "key %s: %d %s", j.key, a.status, a.body)
		}
	}
	if len(ids) > 1 || created > 1 || (refused > 0 && len(ids) > 0) {
		l.h.viol.note("start_not_idempotent", "key %s sent %d times: runs %v, %d created, %d refused", j.key, n, ids, created, refused)
	}
	if refused > 0 {
		l.h.stats.inc("starts_refused_over_paid")
	}
	for id := range ids {
		return id, true
	}
	return uuid.Nil, false
}

// mismatch reuses the journey's key for another amount: a clear 422,
// never a second run.
func (l *soakLoad) mismatch(ctx context.Context, j *journey) {
	a, err := l.h.api.call(ctx, j.cust.token, http.MethodPost, "/api/runs", j.key,
		map[string]any{"order_id": j.order.ID, "amount": j.amount - 1, "reason": "soak: arrived broken"})
	if err != nil {
		return
	}
	l.h.stats.inc("starts_key_reused")
	if a.status != http.StatusUnprocessableEntity || a.errorCode() != store.CodeIdempotencyConflict {
		l.h.viol.note("start_key_reuse_accepted", "key %s for %d: %d %s", j.key, j.amount-1, a.status, a.body)
	}
}

// approve is the approver deciding a run a watcher saw waiting, one to
// three times at once (two tabs, a double click). At most one approval
// may be the one that counts.
func (l *soakLoad) approve(ctx context.Context, j *journey) {
	if j.leaveWaiting || !pauseFor(ctx, time.Second) {
		return
	}
	n := 1 + rand.IntN(3)
	l.h.stats.add("approvals_duplicated", n-1)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			a, err := l.h.api.call(ctx, l.approver, http.MethodPost, "/api/runs/"+j.runID.String()+"/approve", "", nil)
			if err != nil {
				return
			}
			var d struct{ Result string }
			json.Unmarshal(a.body, &d)
			switch {
			case a.status == http.StatusOK && d.Result == "approved":
				l.mu.Lock()
				l.approved[j.runID]++
				twice := l.approved[j.runID] > 1
				l.mu.Unlock()
				if twice {
					l.h.viol.note("approved_twice", "run %s", j.runID)
				}
			case a.status == http.StatusOK && d.Result == "already_approved":
			case a.status == http.StatusConflict: // it finished meanwhile (canceled)
			default:
				l.h.viol.note("approve_unexpected", "run %s: %d %s", j.runID, a.status, a.body)
			}
		})
	}
	wg.Wait()
}

// cancel is the customer cancelling at a random moment.
func (l *soakLoad) cancel(ctx context.Context, j *journey) {
	a, err := l.h.api.call(ctx, j.cust.token, http.MethodPost, "/api/runs/"+j.runID.String()+"/cancel", "", nil)
	if err != nil {
		return
	}
	var d struct{ Result string }
	json.Unmarshal(a.body, &d)
	switch {
	case a.status == http.StatusOK:
		l.h.stats.inc("cancels_" + d.Result)
	case a.status == http.StatusConflict:
		l.h.stats.inc("cancels_after_finish")
	default:
		l.h.viol.note("cancel_unexpected", "run %s: %d %s", j.runID, a.status, a.body)
	}
}

// chaosAction is one kind of fault; do injects it and undoes it.
type chaosAction struct {
	name string
	do   func()
}

func (h *soakHarness) chaosActions() []chaosAction {
	provider := func(name string, f func() payments.Faults) chaosAction {
		return chaosAction{name, func() {
			h.setFaults(f())
			h.faults.inc(name)
			h.pause(time.Second, 2500*time.Millisecond)
			h.setFaults(payments.Faults{})
		}}
	}
	return []chaosAction{
		// Longer than the worker's 5 s provider timeout: it gives up, and
		// the provider, seeing the caller gone, commits nothing.
		provider("provider_timeout", func() payments.Faults { return payments.Faults{Latency: 6 * time.Second} }),
		provider("provider_5xx", func() payments.Faults { return payments.Faults{Error5xxRate: 0.5} }),
		provider("provider_outage", func() payments.Faults { return payments.Faults{FailBeforeCommit: true} }),
		provider("provider_commit_then_drop", func() payments.Faults {
			// Dropped at once, or only when the caller gives up.
			return payments.Faults{CommitThenDrop: true, DropAfter: []time.Duration{0, 50 * time.Millisecond}[rand.IntN(2)]}
		}),
		provider("provider_lookup_5xx", func() payments.Faults { return payments.Faults{LookupError5xxNext: 5, Error5xxNext: 2} }),
		provider("provider_decline", func() payments.Faults { return payments.Faults{DeclineNext: 1} }),
		{"worker_sigkill", h.killWorker},
		{"worker_sigkill_after_commit", h.killWorkerAfterCommit},
		{"serve_sigkill", func() { h.restartServe(false) }},
		{"serve_sigterm", func() { h.restartServe(true) }},
		{"pg_stop_fast", func() { h.stopPostgres(false) }},
		{"pg_stop_immediate", func() { h.stopPostgres(true) }},
	}
}

// chaos injects faults, one at a time in random order with short calm
// gaps, for d, at least one round of every kind, and until the load has
// launched every run, so that no run starts in a calm tail.
func (h *soakHarness) chaos(d time.Duration, launched <-chan struct{}) {
	actions := h.chaosActions()
	deadline := time.Now().Add(d)
	more := func() bool {
		select {
		case <-launched:
			return time.Now().Before(deadline)
		default:
			return true
		}
	}
	for round := 0; round == 0 || more(); round++ {
		for _, i := range rand.Perm(len(actions)) {
			if round > 0 && !more() {
				break
			}
			began := time.Now()
			actions[i].do()
			h.revive()
			h.t.Logf("soak: %s took %v", actions[i].name, time.Since(began).Round(10*time.Millisecond))
			h.pause(100*time.Millisecond, 600*time.Millisecond)
		}
	}
}

// killWorker SIGKILLs a worker mid-work; it comes back after a moment,
// and meanwhile the other one must take over its runs once their leases
// run out.
func (h *soakHarness) killWorker() {
	name := "worker" + strconv.Itoa(rand.IntN(2))
	h.kill(name)
	h.faults.inc("worker_sigkill")
	h.pause(0, 2*time.Second)
	h.start(name)
}

// killWorkerAfterCommit holds the provider's answers after it committed,
// waits for a refund to commit, and SIGKILLs the worker that holds that
// run: the provider has the refund and our log does not.
func (h *soakHarness) killWorkerAfterCommit() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := map[string]bool{}
	if before, err := h.provider.Ledger(ctx); err == nil {
		for _, rc := range before {
			seen[rc.Key] = true
		}
	}
	h.setFaults(payments.Faults{HoldAfterCommit: true})
	var key string
	caught := pollUntil(8*time.Second, func() bool {
		l, err := h.provider.Ledger(ctx)
		for _, rc := range l {
			if !seen[rc.Key] {
				key = rc.Key
			}
		}
		return err == nil && key != ""
	})
	if !caught {
		h.setFaults(payments.Faults{})
		h.stats.inc("hold_after_commit_caught_nothing")
		return
	}
	var owner sql.NullString
	err := h.db.GetContext(ctx, &owner, `SELECT r.lease_owner FROM runs r JOIN operations o ON o.run_id = r.id WHERE o.id = $1`, key)
	name, kind := h.workerByLease(owner.String), "worker_sigkill_after_commit"
	if err != nil || name == "" {
		// Its worker gave up on the held answer and let the run go
		// already: the kill is an ordinary one.
		h.stats.note("hold_after_commit_owner_gone", "refund %s: lease owner %q, err %v", key, owner.String, err)
		name, kind = "worker"+strconv.Itoa(rand.IntN(2)), "worker_sigkill"
	}
	h.kill(name)
	h.faults.inc(kind)
	// Release the other held answers; the dead worker's is gone with it.
	h.setFaults(payments.Faults{})
	h.start(name)
}

// workerByLease names the worker whose ID (host-pid-suffix) is owner.
func (h *soakHarness) workerByLease(owner string) string {
	parts := strings.Split(owner, "-")
	if len(parts) < 3 {
		return ""
	}
	pid, _ := strconv.Atoi(parts[len(parts)-2])
	for _, name := range []string{"worker0", "worker1"} {
		if p := h.procs[name].p; !exited(p) && p.cmd.Process.Pid == pid {
			return name
		}
	}
	return ""
}

// restartServe stops a serve (gracefully or not) and starts it again on
// the same address; its clients meanwhile reach the other one.
func (h *soakHarness) restartServe(graceful bool) {
	name := "serve" + strconv.Itoa(rand.IntN(2))
	if graceful {
		h.terminate(name)
		h.faults.inc("serve_sigterm")
	} else {
		h.kill(name)
		h.faults.inc("serve_sigkill")
	}
	h.pause(0, time.Second)
	h.start(name)
}

// stopPostgres stops PostgreSQL (fast: clients are disconnected and the
// server checkpoints; immediate: like a crash, recovery at start) for two
// to four seconds.
func (h *soakHarness) stopPostgres(immediate bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop, name := h.cluster.Stop, "pg_stop_fast"
	if immediate {
		stop, name = h.cluster.Kill, "pg_stop_immediate"
	}
	if err := stop(ctx); err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	h.faults.inc(name)
	h.pause(2*time.Second, 4*time.Second)
	if _, err := h.cluster.Start(ctx); err != nil {
		h.t.Fatalf("start PostgreSQL after %s: %v", name, err)
	}
}

// calm ends every fault: a healthy provider, every process running.
func (h *soakHarness) calm() {
	h.setFaults(payments.Faults{})
	h.revive()
}

// waitFor is WaitUntil for the soak's ending: a wait that runs out is a
// violation to report with the others, not a reason to skip the checks.
func (h *soakHarness) waitFor(what string, timeout time.Duration, cond func() bool) bool {
	if pollUntil(timeout, cond) {
		return true
	}
	h.viol.note("timed_out", "waiting %v for %s", timeout, what)
	return false
}

// settle waits until every run has finished or waits for an approval
// nobody will give, and reports those that did not.
func (h *soakHarness) settle(l *soakLoad, timeout time.Duration) {
	waiting := []string{}
	for _, j := range l.all() {
		if j.leaveWaiting {
			waiting = append(waiting, j.runID.String())
		}
	}
	const q = `SELECT id::text || ' ' || state FROM runs
		WHERE state NOT IN ('completed', 'failed', 'canceled')
		  AND NOT (state = 'awaiting_approval' AND id::text = ANY($1))`
	var stuck []string
	began, first := time.Now(), -1
	ok := h.waitFor("every run to finish or wait honestly", timeout, func() bool {
		stuck = nil
		err := h.db.Select(&stuck, q, pq.Array(waiting))
		if err == nil && first < 0 {
			first = len(stuck)
		}
		return err == nil && len(stuck) == 0
	})
	h.t.Logf("soak: %d runs were still going when the faults stopped; all settled within %v", first, time.Since(began).Round(time.Second))
	if !ok {
		h.viol.note("runs_not_settled", "%d runs neither finished nor honestly waiting: %v", len(stuck), stuck[:min(len(stuck), 20)])
	}
}

// caughtUp waits until every watcher has applied its run's whole log
// (and, for a finished run, got the close event).
func (h *soakHarness) caughtUp(l *soakLoad, timeout time.Duration) {
	var behind []string
	h.waitFor("every stream client to catch up", timeout, func() bool {
		behind = nil
		for _, j := range l.all() {
			var r struct {
				State   string `db:"state"`
				LastSeq int64  `db:"last_seq"`
			}
			if err := h.db.Get(&r, `SELECT state, last_seq FROM runs WHERE id = $1`, j.runID); err != nil {
				return false
			}
			for _, w := range j.watchers {
				if w.cur.Load() != r.LastSeq || store.Terminal(r.State) != w.closed.Load() {
					behind = append(behind, fmt.Sprintf("%s %s seq %d/%d closed %t", j.runID, r.State, w.cur.Load(), r.LastSeq, w.closed.Load()))
				}
			}
		}
		return len(behind) == 0
	})
	if len(behind) > 0 {
		h.viol.note("clients_behind", "%d stream clients behind: %v", len(behind), behind[:min(len(behind), 10)])
	}
}

// all is a copy of the journeys that got a run.
func (l *soakLoad) all() []*journey {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.journeys)
}

// waitGroup waits for wg for at most timeout.
func (h *soakHarness) waitGroup(what string, wg *sync.WaitGroup, timeout time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	h.waitFor(what, timeout, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

// checkClients compares each stream client's applied state with the
// database's snapshot of its run.
func (h *soakHarness) checkClients(l *soakLoad) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, j := range l.all() {
		a, err := h.api.call(ctx, j.cust.token, http.MethodGet, "/api/runs/"+j.runID.String(), "", nil)
		var s soakSnapshot
		if err == nil && a.status == http.StatusOK {
			err = json.Unmarshal(a.body, &s)
		}
		if err != nil || a.status != http.StatusOK {
			h.viol.note("snapshot_unreadable", "run %s: %d %v", j.runID, a.status, err)
			continue
		}
		want, err := s.progress()
		if err != nil {
			h.viol.note("snapshot_unreadable", "run %s: %v", j.runID, err)
			continue
		}
		for i, w := range j.watchers {
			if got := describe(w.prog); got != describe(want) || w.cur.Load() != s.CoveringSeq {
				h.viol.note("client_state_differs", "run %s client %d (cursor %d):\n got  %s\n want %s", j.runID, i, w.cur.Load(), got, describe(want))
			}
		}
		h.stats.add("stream_clients", len(j.watchers))
	}
}

// checkRuns counts the runs by state, and finds runs no start returned.
func (h *soakHarness) checkRuns(l *soakLoad) map[string]int {
	var rows []struct {
		ID    uuid.UUID `db:"id"`
		State string    `db:"state"`
	}
	if err := h.db.Select(&rows, `SELECT id, state FROM runs`); err != nil {
		h.t.Fatal(err)
	}
	known := map[uuid.UUID]bool{}
	for _, j := range l.all() {
		known[j.runID] = true
	}
	counts := map[string]int{"total": len(rows)}
	for _, r := range rows {
		counts[r.State]++
		if !known[r.ID] {
			h.viol.note("run_nobody_started", "run %s (%s) was returned by no start", r.ID, r.State)
		}
	}
	return counts
}

// checkVerify runs `refundd verify` against the database and the provider.
func (h *soakHarness) checkVerify() {
	out, err := h.command("verify").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok: every invariant holds") || strings.Contains(string(out), "skipped") {
		h.viol.note("refundd_verify", "%v:\n%s", err, out)
	}
}

// checkLedgers compares the provider's ledger with ours refund for refund:
// each succeeded operation has exactly one provider refund with its key,
// amount and order; no provider refund lacks an operation; no run or order
// got more money back than it may.
func (h *soakHarness) checkLedgers() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	receipts, err := h.provider.Ledger(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	ops, err := h.st.AllOperations(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	opByKey := map[string]store.Operation{}
	for _, op := range ops {
		opByKey[op.ID.String()] = op
	}
	refunds := map[string]int{} // succeeded provider refunds per key
	byOrder := map[string]int64{}
	for _, rc := range receipts {
		op, ok := opByKey[rc.Key]
		switch {
		case !ok:
			h.viol.note("provider_refund_without_operation", "%s %s %d", rc.Key, rc.Status, rc.Amount)
		case rc.Amount != op.Amount || rc.Currency != op.Currency || rc.OrderRef != strconv.FormatInt(op.OrderID, 10):
			h.viol.note("provider_refund_differs", "%s: provider %d %s order %s, ours %d %s order %d", rc.Key, rc.Amount, rc.Currency, rc.OrderRef, op.Amount, op.Currency, op.OrderID)
		case rc.Status == payments.StatusSucceeded && (op.State != store.OpSucceeded || op.ProviderRef.String != rc.Ref):
			h.viol.note("ledgers_disagree", "%s: provider refunded %s, ours is %s %q", rc.Key, rc.Ref, op.State, op.ProviderRef.String)
		case rc.Status != payments.StatusSucceeded && op.State != store.OpFailed:
			h.viol.note("ledgers_disagree", "%s: provider says %s, ours is %s", rc.Key, rc.Status, op.State)
		}
		if rc.Status == payments.StatusSucceeded {
			refunds[rc.Key]++
			byOrder[rc.OrderRef] += rc.Amount
			h.stats.inc("provider_refunds")
		}
	}
	perRun := map[uuid.UUID]int{}
	for _, op := range ops {
		switch {
		case op.State == store.OpSucceeded && refunds[op.ID.String()] != 1:
			h.viol.note("operation_refunds", "operation %s succeeded with %d provider refunds", op.ID, refunds[op.ID.String()])
		case op.State != store.OpSucceeded && op.State != store.OpFailed:
			h.viol.note("operation_unsettled", "operation %s is still %s", op.ID, op.State)
		}
		if op.State == store.OpSucceeded {
			perRun[op.RunID]++
		}
	}
	h.checkRunsAgainstRefunds(perRun, byOrder)
}

// checkRunsAgainstRefunds: a completed run got exactly one refund, any
// other none, and no order got back more than was paid.
func (h *soakHarness) checkRunsAgainstRefunds(perRun map[uuid.UUID]int, byOrder map[string]int64) {
	var runs []struct {
		ID    uuid.UUID `db:"id"`
		State string    `db:"state"`
	}
	if err := h.db.Select(&runs, `SELECT id, state FROM runs`); err != nil {
		h.t.Fatal(err)
	}
	for _, r := range runs {
		if n := perRun[r.ID]; (r.State == store.StateCompleted) != (n == 1) || n > 1 {
			h.viol.note("run_refunds", "run %s is %s with %d succeeded refunds", r.ID, r.State, n)
		}
	}
	var orders []struct {
		ID     int64 `db:"id"`
		Amount int64 `db:"amount"`
	}
	if err := h.db.Select(&orders, `SELECT id, amount FROM orders`); err != nil {
		h.t.Fatal(err)
	}
	for _, o := range orders {
		if got := byOrder[strconv.FormatInt(o.ID, 10)]; got > o.Amount {
			h.viol.note("order_over_refunded", "order %d: provider refunded %d of %d paid", o.ID, got, o.Amount)
		}
	}
}

// TestSoak_ChaosKeepsEveryInvariant runs the chaos soak; see the top of
// this file. It does not run in parallel: it owns the machine's two cores
// while it runs, so its timings mean something.
func TestSoak_ChaosKeepsEveryInvariant(t *testing.T) {
	setup := time.Now()
	buildBinary(t)
	built := time.Since(setup)
	h := newSoakHarness(t)
	l, js := h.seedLoad(*soakRuns)
	ctx, stopClients := context.WithCancel(context.Background())
	defer stopClients()
	t.Logf("soak: set up in %v (building the binary %v)", time.Since(setup).Round(100*time.Millisecond), built.Round(100*time.Millisecond))
	began := time.Now()
	// Starts are spread over the chaos, so faults meet runs at every stage.
	l.run(ctx, js, *soakDuration)
	h.chaos(*soakDuration, l.launched)
	h.calm()
	chaosFor := time.Since(began)

	h.waitGroup("every start to be answered", &l.starting, time.Minute)
	// Under chaos the workers fall behind a large load (2,000 runs in 10
	// minutes left 800 still going); what is left must still settle.
	h.settle(l, 2*time.Minute+time.Duration(*soakRuns)*100*time.Millisecond)
	h.caughtUp(l, time.Minute)
	stopClients()
	h.waitGroup("the stream clients to stop", &l.clients, 30*time.Second)

	h.checkClients(l)
	runs := h.checkRuns(l)
	h.checkLedgers()
	h.checkVerify()
	t.Logf("%s; chaos %v, settled %v after", h.summary(runs), chaosFor.Round(time.Second), (time.Since(began) - chaosFor).Round(time.Second))
	for _, d := range h.notes.Details() {
		t.Log("note: " + d)
	}
	for _, d := range h.viol.Details() {
		t.Error("violation: " + d)
	}
}

// TestSoakWatcher_SeesGapsReusedSeqsAndBackwardResets shows the soak's
// stream client is no empty check: fed a log with a hole, a seq that names
// another event on replay, and a reset behind its cursor, it reports each.
func TestSoakWatcher_SeesGapsReusedSeqsAndBackwardResets(t *testing.T) {
	t.Parallel()
	runID := uuid.New()
	viol := &tally{}
	w := newWatcher(&soakAPI{stats: &tally{}}, "", runID, viol, nil)
	msg := func(seq int64, id uuid.UUID) testkit.SSEEvent {
		// Business events: a reset may go back past lost narration only.
		b, err := json.Marshal(store.Event{RunID: runID, Seq: seq, EventID: id, Type: store.EventRunPlanning,
			Class: store.ClassBusiness, Payload: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return testkit.SSEEvent{ID: strconv.FormatInt(seq, 10), Data: string(b)}
	}
	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()}
	var last int64
	for _, seq := range []int64{1, 2, 4} { // 3 is missing
		w.handle(msg(seq, ids[seq]), &last)
	}
	last = 1 // a reconnect from an older cursor replays 2, now another event
	w.handle(msg(2, uuid.New()), &last)
	reset := testkit.SSEEvent{Event: "reset", ID: "1", Data: `{"access":"full","run":{"id":"` + runID.String() + `","state":"planning"},"covering_seq":1,"operations":[]}`}
	w.handle(reset, &last)
	for _, kind := range []string{"stream_gap", "stream_out_of_order", "stream_seq_reused", "stream_reset_backwards"} {
		if viol.get(kind) != 1 {
			t.Errorf("%s reported %d times, want 1 (all: %s)", kind, viol.get(kind), viol)
		}
	}
	if got, want := w.cur.Load(), int64(1); got != want {
		t.Errorf("cursor after the reset = %d, want %d", got, want)
	}

	// A jump over the seqs a restart skipped misses nothing; one past
	// them still does.
	viol = &tally{}
	w = newWatcher(&soakAPI{stats: &tally{}}, "", runID, viol, nil)
	w.skippedSeqs = func() []store.SeqRange { return []store.SeqRange{{From: 3, To: 1002}} }
	last = 0
	for _, seq := range []int64{1, 2, 1003, 1005} {
		w.handle(msg(seq, uuid.New()), &last)
	}
	if viol.get("stream_gap") != 1 || viol.get("stream_out_of_order") != 1 {
		t.Errorf("over a restart's skip: %s, want only 1004 missed", viol)
	}
}
