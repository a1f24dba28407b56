package main

// Mode watchers: N SSE watchers on M runs, appends at a target rate, the
// same load on refundd and on the bare reference in interleaved rounds.

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// watchersKeys are the figures of a watchers round, in the order printed.
var watchersKeys = []metricKey{
	{"open_s", "time to open the streams, s"},
	{"open_first_half_s", "time to open the first half, s"},
	{"open_second_half_s", "time to open the second half (the first half open), s"},
	{"open_cpu_us", "the server's CPU per stream opened, µs"},
	{"open_pg_cpu_us", "PostgreSQL's CPU per stream opened, µs"},
	{"open_alloc_kb", "the server's allocations per stream opened, KB"},
	{"rss_kb_per_stream", "memory per idle stream (RSS growth / N), KB"},
	{"goroutines_per_stream", "goroutines per stream"},
	{"idle_cpu_pct", "idle CPU holding the streams, % of one core"},
	{"append_p50_ms", "append → client p50, ms"},
	{"append_p99_ms", "append → client p99, ms"},
	{"first_p50_ms", "first watcher of a run gets an event, median of events, ms"},
	{"last_p50_ms", "last watcher of a run gets an event, median of events, ms"},
	{"last_p90_ms", "last watcher of a run gets an event, p90 of events, ms"},
	{"last_p99_ms", "last watcher of a run gets an event, p99 of events, ms"},
	{"reads_per_wakeup", "store reads per wake-up"},
	{"reads_per_append", "store reads per append"},
	{"appends_per_s", "appends per second achieved"},
	{"delivered_pct", "deliveries received, % of expected"},
}

// target is one server under test in one round.
type target struct {
	name   string
	base   string
	client *apiClient
	path   func(runID uuid.UUID) string // the stream's path
	stop   func()
	// scrape reads the server's counters by their Prometheus names;
	// nil reads its /metrics.
	scrape func(context.Context) (map[string]float64, error)
	// publish, when set, makes the reference publish at rate for d itself
	// (its hub, or its appender) instead of the load test appending to
	// PostgreSQL; it returns how many it published, and how many to each
	// run (nil: every one to the first). markers then reads each
	// message's number and send time.
	publish func(ctx context.Context, rate float64, d time.Duration) (n int, perRun map[uuid.UUID]int, err error)
	markers func(data []byte, fn func(k int64, sent time.Time))
}

// counters reads the target's counters (target.scrape).
func (t *target) counters(ctx context.Context) (map[string]float64, error) {
	if t.scrape != nil {
		return t.scrape(ctx)
	}
	return scrape(ctx, t.base)
}

// watchRound is one target's measurement in one round.
type watchRound struct {
	o       *options
	t       *target
	st      *store.Store
	runs    []uuid.UUID
	log     *slog.Logger
	keepGot bool // tests: keep what each watcher received
	got     [][]int64
	sent    []int     // run index of each append number
	kBase   int64     // the first append number of this round: numbers are unique per invocation
	halfAt  time.Time // when half the streams were open
	pgRoot  int       // the postmaster (postmasterOf), 0 if not on this machine
}

// measure opens the streams, measures them idle, then appends for the
// duration and measures delivery. It returns the figures by key.
func (w *watchRound) measure(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	m0, err := w.t.counters(ctx)
	if err != nil {
		return nil, err
	}
	sctx, closeStreams := context.WithCancel(ctx)
	defer closeStreams()
	c := newCollector()
	c.minK = w.kBase
	var readers sync.WaitGroup
	defer readers.Wait()
	defer closeStreams()
	after, err := w.startCursors(ctx)
	if err != nil {
		return nil, err
	}
	profiled := w.profile(ctx, "open", max(2, w.o.watchers/1000))
	mOpen, err := w.t.counters(ctx)
	if err != nil {
		return nil, err
	}
	pgOpen := familyCPU(w.pgRoot)
	began := time.Now()
	states, err := w.open(sctx, c, &readers, after)
	if err != nil {
		return nil, err
	}
	out["open_s"] = time.Since(began).Seconds()
	out["open_first_half_s"] = w.halfAt.Sub(began).Seconds()
	out["open_second_half_s"] = time.Since(w.halfAt).Seconds()
	mOpened, err := w.t.counters(ctx)
	if err != nil {
		return nil, err
	}
	// The server's CPU per open: on 2 cores shared with the client, the
	// time to open follows it.
	out["open_cpu_us"] = 1e6 * (mOpened["process_cpu_seconds_total"] - mOpen["process_cpu_seconds_total"]) / float64(w.o.watchers)
	// PostgreSQL's, on the same 2 cores: the sessions and runs refundd
	// reads to open (the hub reads nothing).
	out["open_pg_cpu_us"] = 1e6 * (familyCPU(w.pgRoot) - pgOpen) / float64(w.o.watchers)
	out["open_alloc_kb"] = (mOpened["go_memstats_alloc_bytes_total"] - mOpen["go_memstats_alloc_bytes_total"]) / float64(w.o.watchers) / 1024
	if err := profiled(); err != nil {
		return nil, err
	}
	if !sleep(ctx, 2*time.Second) { // let replays and first reads settle
		return nil, ctx.Err()
	}
	m1, err := w.t.counters(ctx)
	if err != nil {
		return nil, err
	}
	n := float64(w.o.watchers)
	out["rss_kb_per_stream"] = (m1["process_resident_memory_bytes"] - m0["process_resident_memory_bytes"]) / n / 1024
	out["goroutines_per_stream"] = (m1["go_goroutines"] - m0["go_goroutines"]) / n
	if !sleep(ctx, w.o.idle) {
		return nil, ctx.Err()
	}
	m2, err := w.t.counters(ctx)
	if err != nil {
		return nil, err
	}
	out["idle_cpu_pct"] = 100 * (m2["process_cpu_seconds_total"] - m1["process_cpu_seconds_total"]) / w.o.idle.Seconds()
	if w.o.rate > 0 {
		if err := w.appendPhase(ctx, c, m2, out); err != nil {
			return nil, err
		}
	}
	closeStreams()
	readers.Wait()
	if w.keepGot {
		for _, s := range states {
			w.got = append(w.got, s.got)
		}
	}
	return out, nil
}

// profile starts, with -profile, a CPU profile of refundd over secs
// seconds of a phase (the opening: an estimate of its length, 1 s per
// 1,000 streams, at least 2 s; the appends: their duration) and returns
// what waits for it, writes it to the folder (PHASE-N.pprof), and then
// writes the process's allocations so far beside it (allocs-PHASE-N.pprof).
func (w *watchRound) profile(ctx context.Context, phase string, secs int) func() error {
	if w.o.profile == "" || w.t.name == "bare" {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() {
		url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", w.t.base, secs)
		done <- fetchTo(ctx, url, filepath.Join(w.o.profile, fmt.Sprintf("%s-%d.pprof", phase, w.kBase)))
	}()
	return func() error {
		if err := <-done; err != nil {
			return err
		}
		return fetchTo(ctx, w.t.base+"/debug/pprof/allocs", filepath.Join(w.o.profile, fmt.Sprintf("allocs-%s-%d.pprof", phase, w.kBase)))
	}
}

// open opens every watcher's stream, openConcurrency at a time, and starts
// its reader. Watcher i watches run i mod M.
func (w *watchRound) open(ctx context.Context, c *collector, readers *sync.WaitGroup, after map[uuid.UUID]string) ([]*watcherState, error) {
	states := make([]*watcherState, w.o.watchers)
	bodies := make([]io.ReadCloser, w.o.watchers)
	var next, opened atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var openers sync.WaitGroup
	for range min(openConcurrency, w.o.watchers) {
		openers.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= w.o.watchers || ctx.Err() != nil {
					return
				}
				run := w.runs[i%len(w.runs)]
				body, err := w.t.client.openStream(ctx, w.t.path(run)+after[run])
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s: stream %d of %d: %w", w.t.name, i+1, w.o.watchers, err)
					}
					mu.Unlock()
					return
				}
				bodies[i] = body
				if opened.Add(1) == int64(max(w.o.watchers/2, 1)) {
					w.halfAt = time.Now() // read after openers.Wait
				}
			}
		})
	}
	openers.Wait()
	for i, body := range bodies {
		if body == nil {
			continue
		}
		s := &watcherState{seen: map[int64]bool{}, keep: w.keepGot}
		states[i] = s
		readers.Go(func() {
			defer body.Close()
			stop := context.AfterFunc(ctx, func() { body.Close() })
			defer stop()
			readSSE(body, func(m sseMessage) bool {
				s.receive(c, m, time.Now(), w.markers())
				return true
			})
		})
	}
	return states, firstErr
}

const openConcurrency = 100

// startCursors is the query each run's streams open with: with -from end,
// after= the run's last seq, so a stream starts where a page that just
// loaded starts (and where the bare server's streams start); with -from
// start, nothing (the whole log is replayed). Read before the clock runs.
func (w *watchRound) startCursors(ctx context.Context) (map[uuid.UUID]string, error) {
	return startCursors(ctx, w.st, w.runs, w.o.from)
}

func startCursors(ctx context.Context, st *store.Store, runs []uuid.UUID, from string) (map[uuid.UUID]string, error) {
	after := map[uuid.UUID]string{}
	if from != "end" {
		return after, nil
	}
	for _, id := range runs {
		r, err := st.RunByID(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("read run %s: %w", id, err)
		}
		after[id] = "?after=" + strconv.FormatInt(r.LastSeq, 10)
	}
	return after, nil
}

// appendPhase appends at the target rate for the duration, waits for the
// deliveries, and adds the delivery figures to out.
func (w *watchRound) appendPhase(ctx context.Context, c *collector, before map[string]float64, out map[string]float64) error {
	profiled := w.profile(ctx, "append", max(1, int(w.o.duration.Seconds())))
	began := time.Now()
	appended, err := w.appendAtRate(ctx)
	if err != nil {
		return err
	}
	elapsed := time.Since(began).Seconds()
	if err := profiled(); err != nil {
		return err
	}
	perRun := make([]int, len(w.runs))
	for i := range w.o.watchers {
		perRun[i%len(w.runs)]++
	}
	expected := 0
	for _, r := range w.sent {
		expected += perRun[r]
	}
	// Wait for the stragglers, at most 5 s.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		got := len(c.lat)
		c.mu.Unlock()
		if got >= expected || !sleep(ctx, 100*time.Millisecond) {
			break
		}
	}
	after, err := w.t.counters(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var first, last []float64
	for _, e := range c.events {
		first, last = append(first, e.first), append(last, e.max)
	}
	out["append_p50_ms"] = quantile(c.lat, 0.5)
	out["append_p99_ms"] = quantile(c.lat, 0.99)
	out["first_p50_ms"] = quantile(first, 0.5)
	out["last_p50_ms"] = quantile(last, 0.5)
	out["last_p90_ms"] = quantile(last, 0.9)
	out["last_p99_ms"] = quantile(last, 0.99)
	reads := after["refundd_stream_store_reads_total"] - before["refundd_stream_store_reads_total"]
	wakeups := after["refundd_stream_wakeups_total"] - before["refundd_stream_wakeups_total"]
	if wakeups > 0 { // refundd may not count them (yet): then the figure is missing
		out["reads_per_wakeup"] = reads / wakeups
	}
	if reads > 0 || wakeups > 0 {
		out["reads_per_append"] = reads / float64(max(appended, 1))
	}
	out["appends_per_s"] = float64(appended) / elapsed
	out["delivered_pct"] = 100 * float64(len(c.lat)) / float64(max(expected, 1))
	out["duplicates"] = float64(c.dups)
	out["out_of_order"] = float64(c.order)
	return nil
}

// appendAtRate appends narration to the runs, round robin, at o.rate per
// second for o.duration, from appenders goroutines (PostgreSQL groups
// their commits). It returns how many committed; a schedule it cannot keep
// shows as a lower achieved rate, never as a longer phase.
func (w *watchRound) appendAtRate(ctx context.Context) (int, error) {
	if w.t.publish != nil {
		n, perRun, err := w.t.publish(ctx, w.o.rate, w.o.duration)
		w.sent = make([]int, n) // without perRun, all to the first run
		if perRun != nil {
			w.sent = w.sent[:0]
			for i, r := range w.runs {
				for range perRun[r] {
					w.sent = append(w.sent, i)
				}
			}
		}
		return n, err
	}
	// Appended by enough goroutines to reach the rate: each waits for its
	// commit (appendOne).
	const appenders = 64
	total := int(w.o.rate * w.o.duration.Seconds())
	w.sent = w.sent[:0]
	jobs := make(chan int64, appenders)
	var done atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range appenders {
		wg.Go(func() {
			for k := range jobs {
				run := w.runs[int(k)%len(w.runs)]
				text := marker(k, time.Now())
				if err := w.appendOne(ctx, run, text); err != nil {
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				done.Add(1)
			}
		})
	}
	start := time.Now()
	for i := range total {
		k := w.kBase + int64(i)
		at := start.Add(time.Duration(float64(i) / w.o.rate * float64(time.Second)))
		if time.Since(start) > w.o.duration {
			break
		}
		if d := time.Until(at); d > time.Millisecond {
			if !sleep(ctx, d) {
				break
			}
		}
		w.sent = append(w.sent, int(k)%len(w.runs))
		select {
		case jobs <- k:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return int(done.Load()), fmt.Errorf("append: %w", err)
	}
	return int(done.Load()), ctx.Err()
}

// markers reads the append numbers and send times a message carries: the
// load test's markers, or the target's own (target.markers), numbered from
// this round's first.
func (w *watchRound) markers() func([]byte, func(int64, time.Time)) {
	if w.t.markers == nil {
		return parseMarkers
	}
	return func(data []byte, fn func(int64, time.Time)) {
		w.t.markers(data, func(k int64, sent time.Time) { fn(w.kBase+k-1, sent) })
	}
}

// appendOne appends one narration delta carrying text, as -appender says:
// async as the agents append narration (store.AppendNarration: batched,
// asynchronous commits), durable as business events are (store.Append:
// its own commit, flushed).
func (w *watchRound) appendOne(ctx context.Context, run uuid.UUID, text string) error {
	if w.o.appender == "durable" {
		_, err := w.st.Append(ctx, run, store.EventOf(store.NarrationDelta{Text: text}))
		return err
	}
	return w.st.AppendNarration(ctx, run, text)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// watchersSummary is what watchers mode prints.
type watchersSummary struct {
	meta
	Watchers int     `json:"watchers"`
	Runs     int     `json:"runs"`
	Rate     float64 `json:"rate"`
	Duration string  `json:"duration"`
	Stream   string  `json:"stream"`
	From     string  `json:"from"`
	Appender string  `json:"appender"`
	Warm     int     `json:"warm_up_rounds"` // rounds before the measured ones, not counted
	// Bare names the reference: the load test's own bare server, or the
	// outside reference's hub server (-reference).
	BareIs  string               `json:"bare_is"`
	Figures []figure             `json:"figures"`
	Refundd []map[string]float64 `json:"refundd_rounds"`
	Bare    []map[string]float64 `json:"bare_rounds,omitempty"`
	// Incomplete says why fewer rounds than asked were measured.
	Incomplete string `json:"incomplete,omitempty"`
}

func (s *watchersSummary) String() string {
	note := ""
	if s.Incomplete != "" {
		note = "\nINCOMPLETE: " + s.Incomplete + "\n"
	}
	return fmt.Sprintf("\n%d watchers on %d runs (%s stream from the %s), %g %s appends/s for %s, %d rounds after %d warm-up, load %s → %s, %.0f s; bare: %s\n%s\n%s",
		s.Watchers, s.Runs, s.Stream, s.From, s.Rate, s.Appender, s.Duration, len(s.Refundd), s.Warm, s.LoadAvg[0], s.LoadAvg[1], s.Seconds, s.BareIs, note, table(s.Figures))
}

// runWatchers measures refundd and the bare reference in interleaved
// rounds: refundd first in odd rounds, the bare server first in even ones,
// each on a fresh process when the load test started it, on a quiet
// machine. The warm-up rounds before them are not counted.
func runWatchers(ctx context.Context, e *env) (*watchersSummary, error) {
	o := e.o
	sum := &watchersSummary{meta: newMeta(o), Watchers: o.watchers, Runs: o.runs, Rate: o.rate,
		Duration: o.duration.String(), Stream: o.stream, From: o.from, Appender: o.appender, Warm: o.warm, BareIs: "the load test's bare server"}
	if o.reference != "" {
		sum.BareIs = "the hub server of " + o.reference
	}
	runs, err := e.watchedRuns(ctx)
	if err != nil {
		return nil, err
	}
	pgRoot := 0
	if db, err := sql.Open("postgres", e.dbURL); err == nil {
		pgRoot = postmasterOf(ctx, db)
		db.Close()
	}
	var kBase int64
	for i := range o.warm + o.rounds {
		round, label := i-o.warm, fmt.Sprintf("round %d", i-o.warm+1)
		if round < 0 {
			label = "warm-up"
		}
		order := []string{"refundd", "bare"}
		if i%2 == 1 {
			order = []string{"bare", "refundd"}
		}
		for _, name := range order {
			if name == "bare" && !o.bare {
				continue
			}
			waitQuiet(ctx)
			t, err := e.target(ctx, name)
			if err != nil {
				return nil, err
			}
			w := &watchRound{o: o, t: t, st: e.st, runs: runs, log: e.log, kBase: kBase, pgRoot: pgRoot}
			res, err := w.measure(ctx)
			t.stop()
			if err != nil {
				return sum.partial(o, fmt.Errorf("%s, %s: %w", label, name, err))
			}
			kBase += int64(len(w.sent))
			fmt.Fprintf(e.progress, "loadtest: %s %-7s open %.2fs, %.0f KB and %.2f goroutines per stream, idle CPU %.1f%%",
				label, name, res["open_s"], res["rss_kb_per_stream"], res["goroutines_per_stream"], res["idle_cpu_pct"])
			if o.rate > 0 {
				fmt.Fprintf(e.progress, "; p99 %.1f ms, last-of-run p50 %.1f ms, %.0f appends/s, %.1f%% delivered",
					res["append_p99_ms"], res["last_p50_ms"], res["appends_per_s"], res["delivered_pct"])
			}
			fmt.Fprintln(e.progress)
			switch {
			case round < 0:
			case name == "bare":
				sum.Bare = append(sum.Bare, res)
			default:
				sum.Refundd = append(sum.Refundd, res)
			}
		}
	}
	return sum.partial(o, nil)
}

// partial completes the summary with the rounds measured so far. After an
// error it is returned only if a whole round was measured (both servers),
// so what took minutes is not lost to a late failure.
func (s *watchersSummary) partial(o *options, err error) (*watchersSummary, error) {
	n := len(s.Refundd)
	if o.bare {
		n = min(n, len(s.Bare))
		s.Bare = s.Bare[:n]
	}
	s.Refundd = s.Refundd[:n]
	if err != nil && n == 0 {
		return nil, err
	}
	if err != nil {
		s.Incomplete = fmt.Sprintf("%d of %d rounds: %v", n, o.rounds, err)
	}
	keys := watchersKeys
	if o.rate == 0 {
		keys = keys[:6] // opening and memory
	}
	s.Figures = compare(keys, s.Refundd, s.Bare)
	s.finish()
	return s, err
}

// target starts (or, with -url, reaches) the named server for one round.
func (e *env) target(ctx context.Context, name string) (*target, error) {
	if name == "bare" && e.o.reference != "" {
		return e.startReference(ctx)
	}
	if name == "bare" {
		p, err := e.startBare(ctx)
		if err != nil {
			return nil, err
		}
		return &target{name: name, base: p.url, client: newAPIClient(p.url, newTransport()), stop: p.stop,
			path: func(id uuid.UUID) string { return "/runs/" + id.String() + "/stream" }}, nil
	}
	base, stop := e.o.url, func() {}
	if base == "" {
		p, err := e.startRefundd(ctx, "serve", nil)
		if err != nil {
			return nil, err
		}
		base, stop = p.url, p.stop
	}
	c, err := e.client(ctx, base, 0)
	if err != nil {
		stop()
		return nil, err
	}
	path := func(id uuid.UUID) string { return "/api/runs/" + id.String() + "/stream" }
	if e.o.stream == "html" {
		path = func(id uuid.UUID) string { return "/runs/" + id.String() + "/events" }
	}
	return &target{name: name, base: base, client: c, path: path, stop: stop}, nil
}

// watchedRuns starts the runs the watchers watch, through the API. The own
// refundd runs no worker in this mode, so they stay open (created) and
// their streams live as long as the round.
func (e *env) watchedRuns(ctx context.Context) ([]uuid.UUID, error) {
	t, err := e.target(ctx, "refundd")
	if err != nil {
		return nil, err
	}
	defer t.stop()
	return startRuns(ctx, t.client, e.o.runs)
}

// startRuns starts n runs as c's customer, 8 at a time.
func startRuns(ctx context.Context, c *apiClient, n int) ([]uuid.UUID, error) {
	ss := &starter{c: c}
	if err := ss.loadOrders(ctx); err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, n)
	var wg sync.WaitGroup
	var next atomic.Int64
	var firstErr atomic.Value
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(ids); i = int(next.Add(1) - 1) {
				r, err := ss.start(ctx)
				if err == nil {
					ids[i], err = uuid.Parse(r.ID)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, fmt.Errorf("start the watched runs: %w", err)
	}
	return ids, nil
}
