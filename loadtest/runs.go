package main

// Mode runs: closed-loop starts through POST /api/runs, K in flight, each
// followed until it ends; runs a minute and durations come from the runs
// table, the bottleneck from pg_stat_activity, pg_stat_wal and /proc.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lib/pq"
)

// starter starts runs for one customer, one minor unit at a time, over the
// orders that still have something refundable.
type starter struct {
	c      *apiClient
	prefix string           // idempotency keys start with it, so SQL finds this invocation's runs
	pace   <-chan time.Time // a start waits for a tick (-rpm); nil: no wait

	mu     sync.Mutex
	orders []order
	next   int
	n      int
}

func (s *starter) loadOrders(ctx context.Context) error {
	all, err := s.c.orders(ctx)
	if err != nil {
		return err
	}
	for _, o := range all {
		if o.Refundable > 0 {
			s.orders = append(s.orders, o)
		}
	}
	if len(s.orders) == 0 {
		return errors.New("the customer has no order with anything left to refund")
	}
	if s.prefix == "" {
		s.prefix = "lt-"
	}
	return nil
}

func (s *starter) start(ctx context.Context) (runJSON, error) {
	if s.pace != nil {
		select {
		case <-s.pace:
		case <-ctx.Done():
			return runJSON{}, ctx.Err()
		}
	}
	s.mu.Lock()
	var o *order
	for range len(s.orders) {
		cand := &s.orders[s.next%len(s.orders)]
		s.next++
		if cand.Refundable > 0 {
			o = cand
			break
		}
	}
	if o == nil {
		s.mu.Unlock()
		return runJSON{}, errors.New("every order of the customer is fully refunded")
	}
	o.Refundable--
	s.n++
	key := fmt.Sprintf("%s%d-%d", s.prefix, o.ID, s.n)
	s.mu.Unlock()
	return s.c.startRun(ctx, key, o.ID, 1)
}

// runsSummary is what runs mode prints.
type runsSummary struct {
	meta
	Inflight       int                `json:"inflight"`
	Slots          int                `json:"slots"`
	Pace           string             `json:"pace"`
	Workers        int                `json:"extra_workers"`
	Pool           int                `json:"pool"`
	Window         float64            `json:"window_s"`
	Finished       int                `json:"finished"`
	Completed      int                `json:"completed"`
	RunsPerMin     float64            `json:"runs_per_min"`
	DurP50         float64            `json:"duration_p50_s"`
	DurP99         float64            `json:"duration_p99_s"`
	ServiceP50     float64            `json:"service_p50_s"`
	ServiceP99     float64            `json:"service_p99_s"`
	Errors         int                `json:"errors"`
	FirstError     string             `json:"first_error,omitempty"`
	ActiveBackends float64            `json:"active_backends"`
	Waits          []waitShare        `json:"waits"`
	CPU            map[string]float64 `json:"cpu_pct"`
	CommitsPerS    float64            `json:"commits_per_s"`
	// CommitsPerRun is commits in refundd's database per run finished in
	// the window, the load test's checks taken out: the transactions a run
	// costs, all parts counted.
	CommitsPerRun float64 `json:"commits_per_run"`
	// ChecksPerS are the load test's own statements asking which of its
	// runs ended (endWatch), taken out of CommitsPerRun.
	ChecksPerS float64 `json:"checks_per_s"`
	// Statements are the most called statements a run costs (-statements).
	Statements      []stmtShare `json:"statements_per_run,omitempty"`
	WALSyncsPerS    float64     `json:"wal_syncs_per_s"`
	WALWritesPerS   float64     `json:"wal_writes_per_s"`
	WALRecordsPerS  float64     `json:"wal_records_per_s"`
	NotifyLockShare float64     `json:"lock_object_share"`
}

// waitShare is one wait event: backends waiting on it, on average.
type waitShare struct {
	Event    string  `json:"event"`
	Backends float64 `json:"backends"`
}

func (s *runsSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d in flight, WORKER_SLOTS %d, NARRATION_PACE %s, %d extra workers, pool %d; %.0f s measured, load %s → %s\n\n",
		s.Inflight, s.Slots, s.Pace, s.Workers, s.Pool, s.Window, s.LoadAvg[0], s.LoadAvg[1])
	fmt.Fprintf(&b, "runs a minute: %.0f (%d finished, %d completed)\n", s.RunsPerMin, s.Finished, s.Completed)
	fmt.Fprintf(&b, "run duration (start to end): p50 %.2f s, p99 %.2f s; from first claim: p50 %.2f s, p99 %.2f s\n",
		s.DurP50, s.DurP99, s.ServiceP50, s.ServiceP99)
	fmt.Fprintf(&b, "CPU, %% of one core: refundd %.0f, postgres %.0f, load test %.0f, machine %.0f of 200\n",
		s.CPU["refundd"], s.CPU["postgres"], s.CPU["loadtest"], s.CPU["machine"])
	fmt.Fprintf(&b, "commits/s %.0f (%.1f a run, the load test's %.0f checks/s taken out), WAL syncs/s %.0f, WAL writes/s %.0f, WAL records/s %.0f\n",
		s.CommitsPerS, s.CommitsPerRun, s.ChecksPerS, s.WALSyncsPerS, s.WALWritesPerS, s.WALRecordsPerS)
	fmt.Fprintf(&b, "active backends (avg): %.2f; waiting on:", s.ActiveBackends)
	for _, w := range s.Waits {
		fmt.Fprintf(&b, " %s %.2f;", w.Event, w.Backends)
	}
	fmt.Fprintf(&b, "\nerrors: %d %s\n", s.Errors, s.FirstError)
	if len(s.Statements) > 0 {
		b.WriteString("\nstatements a run (pg_stat_statements calls in the window over the runs finished in it):\n")
		for _, st := range s.Statements {
			fmt.Fprintf(&b, "%7.2f  %s\n", st.PerRun, st.Query)
		}
	}
	return b.String()
}

// runRuns starts the own processes (dev and the extra workers), keeps
// -inflight runs going, and measures the window after the warm-up.
func runRuns(ctx context.Context, e *env) (*runsSummary, error) {
	o := e.o
	sum := &runsSummary{meta: newMeta(o), Inflight: o.inflight, Slots: o.slots, Pace: cmpOr(o.pace, "default"),
		Workers: o.workers, Pool: o.pool}
	base, pids, err := e.startRunsProcesses(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := e.loadWindow(ctx, base, pids, sum); err != nil {
		return nil, err
	}
	return sum, nil
}

// starters signs in as each customer (or uses the token) and reads their
// orders, for runs named with prefix.
func (e *env) starters(ctx context.Context, base, prefix string) ([]*starter, error) {
	pace := newPacer(ctx, e.o.rpm)
	var starters []*starter
	for i := range max(len(e.o.emails), 1) {
		if e.o.token != "" && i > 0 {
			break
		}
		c, err := e.client(ctx, base, i)
		if err != nil {
			return nil, err
		}
		s := &starter{c: c, prefix: prefix, pace: pace}
		if err := s.loadOrders(ctx); err != nil {
			return nil, err
		}
		starters = append(starters, s)
	}
	return starters, nil
}

// loadWindow keeps -inflight runs going against base (at most -rpm starts
// a minute, when set), measures the window after the warm-up into sum,
// and returns the window measured.
func (e *env) loadWindow(ctx context.Context, base string, pids []int, sum *runsSummary) (*sampler, error) {
	o := e.o
	db, err := sql.Open("postgres", e.dbURL)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(2)
	tag := make([]byte, 4)
	rand.Read(tag)
	prefix := "lt-" + hex.EncodeToString(tag) + "-"
	starters, err := e.starters(ctx, base, prefix)
	if err != nil {
		return nil, err
	}
	loopCtx, stopLoops := context.WithCancel(ctx)
	var loops sync.WaitGroup
	var errs atomic.Int64
	var firstErr atomic.Value
	ends := &endWatch{waiting: map[string]chan struct{}{}}
	loops.Go(func() { ends.run(loopCtx, db, o.poll, &errs, &firstErr) })
	for i := range o.inflight {
		loops.Go(func() { closedLoop(loopCtx, starters[i%len(starters)], ends, o.poll, &errs, &firstErr) })
	}
	fmt.Fprintf(e.progress, "loadtest: %d runs in flight; measuring after %s for %s…\n", o.inflight, o.warmup, o.duration-o.warmup)
	if !sleep(ctx, o.warmup) {
		stopLoops()
		return nil, ctx.Err()
	}
	var before, after map[string]float64
	if o.statements {
		if before, err = stmtCalls(ctx, db); err != nil {
			stopLoops()
			return nil, err
		}
	}
	checked := ends.checks.Load()
	smp, err := sampleWindow(ctx, db, base, pids, o.duration-o.warmup)
	checked = ends.checks.Load() - checked
	if err == nil && o.statements {
		after, err = stmtCalls(ctx, db)
	}
	stopLoops()
	loops.Wait()
	if err != nil {
		return nil, err
	}
	smp.fill(sum)
	if err := countRuns(ctx, db, prefix, smp.from, smp.to, sum); err != nil {
		return nil, err
	}
	sum.ChecksPerS = float64(checked) / max(sum.Window, 1e-9)
	if sum.RunsPerMin > 0 {
		sum.CommitsPerRun = (sum.CommitsPerS - sum.ChecksPerS) * 60 / sum.RunsPerMin
	}
	if o.statements {
		sum.Statements = topStatements(before, after, float64(sum.Finished))
	}
	sum.Errors = int(errs.Load())
	if err, _ := firstErr.Load().(error); err != nil {
		sum.FirstError = err.Error()
	}
	sum.finish()
	return smp, nil
}

// newPacer hands out rpm starts a minute, evenly; nil (rpm 0): no limit.
func newPacer(ctx context.Context, rpm int) <-chan time.Time {
	if rpm <= 0 {
		return nil
	}
	t := time.NewTicker(time.Minute / time.Duration(rpm))
	context.AfterFunc(ctx, t.Stop)
	return t.C
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// startRunsProcesses starts `refundd dev` and the extra workers (or, with
// -url, uses the running refundd) and returns the base URL and the pids
// whose CPU counts as refundd's.
func (e *env) startRunsProcesses(ctx context.Context) (string, []int, error) {
	o := e.o
	if o.url != "" {
		return o.url, nil, nil
	}
	set := map[string]string{"WORKER_SLOTS": fmt.Sprint(o.slots), "DB_POOL_SIZE": fmt.Sprint(o.pool)}
	if o.pace != "" {
		set["NARRATION_PACE"] = o.pace
	}
	dev, err := e.startRefundd(ctx, "dev", set)
	if err != nil {
		return "", nil, err
	}
	e.cleanup = append(e.cleanup, dev.stop)
	pids := []int{dev.pid()}
	// It prints where its provider listens right after its own URL.
	var provider string
	for deadline := time.Now().Add(10 * time.Second); provider == "" && time.Now().Before(deadline); {
		provider, _, _ = strings.Cut(dev.line("Simulated payment provider at "), " ")
		sleep(ctx, 20*time.Millisecond)
	}
	if provider == "" {
		return "", nil, errors.New("refundd dev did not say where its payment provider listens")
	}
	set["PROVIDER_URL"] = provider
	for range o.workers {
		w, err := e.startRefundd(ctx, "worker", set)
		if err != nil {
			return "", nil, err
		}
		e.cleanup = append(e.cleanup, w.stop)
		pids = append(pids, w.pid())
	}
	return dev.url, pids, nil
}

// closedLoop starts a run, waits until it ends, and starts the next.
func closedLoop(ctx context.Context, s *starter, ends *endWatch, pause time.Duration, errs *atomic.Int64, firstErr *atomic.Value) {
	for ctx.Err() == nil {
		r, err := s.start(ctx)
		if err != nil {
			if ctx.Err() == nil {
				errs.Add(1)
				firstErr.CompareAndSwap(nil, err)
				sleep(ctx, pause)
			}
			continue
		}
		if terminal(r.State) {
			continue
		}
		select {
		case <-ctx.Done():
		case <-ends.wait(r.ID):
		}
	}
}

// endWatch is the load test's one observer of its runs in flight: every
// -poll it asks refundd's database, in one statement, which of them have
// ended, and wakes their loops. Polling each run through the API instead
// (GET /api/runs/{id}, four times a run) was a third of the statements
// PostgreSQL ran and a share of refundd's CPU: the load test's work, not a
// run's.
type endWatch struct {
	mu      sync.Mutex
	waiting map[string]chan struct{} // by run ID
	checks  atomic.Int64             // statements sent: each commits once
}

// wait is closed once run id has ended.
func (w *endWatch) wait(id string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	w.waiting[id] = ch
	return ch
}

func (w *endWatch) run(ctx context.Context, db *sql.DB, every time.Duration, errs *atomic.Int64, firstErr *atomic.Value) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.mu.Lock()
		ids := slices.Collect(maps.Keys(w.waiting))
		w.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		w.checks.Add(1)
		ended, err := endedOf(ctx, db, ids)
		if err != nil {
			if ctx.Err() == nil {
				errs.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
			continue
		}
		w.mu.Lock()
		for _, id := range ended {
			close(w.waiting[id])
			delete(w.waiting, id)
		}
		w.mu.Unlock()
	}
}

// endedOf is which of the runs ids have ended.
func endedOf(ctx context.Context, db *sql.DB, ids []string) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT id::text FROM runs WHERE id = ANY($1::uuid[]) AND finished_at IS NOT NULL`, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("which runs ended: %w", err)
	}
	defer rows.Close()
	var ended []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("which runs ended: %w", err)
		}
		ended = append(ended, id)
	}
	return ended, rows.Err()
}

// countRuns reads this invocation's runs that finished in [from, to).
func countRuns(ctx context.Context, db *sql.DB, prefix string, from, to time.Time, sum *runsSummary) error {
	var p50, p99 sql.NullFloat64
	err := db.QueryRowContext(ctx, `
        SELECT count(*), count(*) FILTER (WHERE state = 'completed'),
            percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at)),
            percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at))
        FROM runs WHERE client_request_id LIKE $1 AND finished_at >= $2 AND finished_at < $3`,
		prefix+"%", from, to).Scan(&sum.Finished, &sum.Completed, &p50, &p99)
	if err != nil {
		return fmt.Errorf("count the runs: %w", err)
	}
	sum.Window = to.Sub(from).Seconds()
	sum.RunsPerMin = float64(sum.Finished) / sum.Window * 60
	sum.DurP50, sum.DurP99 = p50.Float64, p99.Float64
	// In a closed loop most of a run's life is its wait in the queue; from
	// its first claim (run.planning) to its end is the service time.
	err = db.QueryRowContext(ctx, `
        SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM r.finished_at - p.created_at)),
            percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM r.finished_at - p.created_at))
        FROM runs r CROSS JOIN LATERAL (
            SELECT created_at FROM run_events e WHERE e.run_id = r.id AND e.type = 'run.planning' ORDER BY seq LIMIT 1) p
        WHERE r.client_request_id LIKE $1 AND r.finished_at >= $2 AND r.finished_at < $3`,
		prefix+"%", from, to).Scan(&p50, &p99)
	if err != nil {
		return fmt.Errorf("service times: %w", err)
	}
	sum.ServiceP50, sum.ServiceP99 = p50.Float64, p99.Float64
	return nil
}
