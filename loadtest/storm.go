package main

// Mode storm: N streams on M runs held by one `refundd serve` this program
// started; the serve is killed (or sent SIGTERM) and started again at once
// on the same address, while events keep being appended, and the reconnect
// wave is measured: how soon the new serve is ready, how soon each stream
// is back, what /healthz answers meanwhile, and whether any stream missed,
// doubled or reordered an event across the cut.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

const (
	probeEvery    = 50 * time.Millisecond // /healthz, during the whole storm
	readyEvery    = 10 * time.Millisecond // /readyz, until the new serve answers
	waveLimit     = 60 * time.Second      // after /readyz, for the streams to come back
	bindLimit     = 30 * time.Second      // retrying a busy address, as a supervisor would
	baselineTime  = 2 * time.Second       // /healthz before the first signal
	betweenRounds = 3 * time.Second
)

// storm is the state the streams share with the controller.
type storm struct {
	o   *options
	api *apiClient
	cur atomic.Pointer[wave] // the wave under way; nil before the first signal and at the end

	failedConnects atomic.Int64 // outside any wave
	mu             sync.Mutex
	hints          map[int64]int // retry hint (ms) → times received
	refusals       map[int]int   // status → answers other than a stream, outside any wave
}

// wave is one signal and the reconnects that follow it.
type wave struct {
	idx                         int
	sigAt                       time.Time
	resumed, dropped            atomic.Int64
	clean, worded               atomic.Int64
	failedConnects, nonStreamOK atomic.Int64
}

func (s *storm) sawHint(ms int64) {
	s.mu.Lock()
	s.hints[ms]++
	s.mu.Unlock()
}

func (s *storm) failedConnect() {
	if w := s.cur.Load(); w != nil {
		w.failedConnects.Add(1)
		return
	}
	s.failedConnects.Add(1)
}

func (s *storm) refusedBy(status int) {
	if w := s.cur.Load(); w != nil {
		w.nonStreamOK.Add(1)
		return
	}
	s.mu.Lock()
	s.refusals[status]++
	s.mu.Unlock()
}

// stormRound is what one kill and restart measured.
type stormRound struct {
	Round  int    `json:"round"`
	Signal string `json:"signal"`
	// From the signal: the new serve said it listens, answered /readyz,
	// and the old process was gone (nil: not within the wave).
	ListeningS  float64  `json:"listening_after_signal_s"`
	ReadyS      float64  `json:"ready_after_signal_s"`
	OldExitS    *float64 `json:"old_exited_after_signal_s"`
	BindRetries int      `json:"bind_retries"`
	// The streams: dropped by the cut, ended cleanly (the body's last
	// chunk), ended after a word (a retry hint or a named event after the
	// signal), and back (from /readyz).
	Dropped        int64       `json:"dropped"`
	CleanEnds      int64       `json:"clean_ends"`
	WordBeforeEnd  int64       `json:"word_before_end"`
	Resume         resumeStats `json:"resume_from_ready"`
	T99FromSignal  *float64    `json:"t99_from_signal_s"`
	FailedConnects int64       `json:"failed_connects"`
	NonStreamOK    int64       `json:"non_stream_answers"`
	Healthz        probeStats  `json:"healthz"`
	WaveS          float64     `json:"wave_s"` // signal to the last stream back (or the limit)
	// CPU over the wave, % of one core: the new serve's and this
	// program's (its clients share the machine's two cores with it).
	ServeCPU    float64 `json:"serve_cpu_pct"`
	LoadtestCPU float64 `json:"loadtest_cpu_pct"`
}

// probeStats sums up /healthz samples of a window.
type probeStats struct {
	Samples int     `json:"samples"`
	Failed  int     `json:"failed"` // no answer, or not 200 (the server down)
	P50MS   float64 `json:"p50_ms"`
	P99MS   float64 `json:"p99_ms"`
	MaxMS   float64 `json:"max_ms"`
}

// stormSummary is what storm mode prints.
type stormSummary struct {
	meta
	Watchers  int          `json:"watchers"`
	Runs      int          `json:"runs"`
	Rate      float64      `json:"rate"`
	Signal    string       `json:"signal"`
	Stream    string       `json:"stream"`
	FileLimit uint64       `json:"file_limit"`
	OpenS     float64      `json:"open_s"`
	Baseline  probeStats   `json:"healthz_baseline"`
	Rounds    []stormRound `json:"rounds"`
	// Over the whole invocation, every stream against every append
	// committed to its run.
	Appended     int        `json:"appended"`
	AppendErrors int        `json:"append_errors"`
	Gaps         int        `json:"gaps"`
	Duplicates   int        `json:"duplicates"`
	Backward     int        `json:"backward"`
	Unknown      int        `json:"unknown_markers,omitempty"`
	StreamsShort int        `json:"streams_with_gaps"`
	Hints        hintsStats `json:"retry_hints"`
	Refusals     int64      `json:"failed_connects_outside_waves"`
	Incomplete   string     `json:"incomplete,omitempty"`
}

type hintsStats struct {
	Distinct int            `json:"distinct"`
	MinMS    int64          `json:"min_ms"`
	MaxMS    int64          `json:"max_ms"`
	Counts   map[string]int `json:"counts,omitempty"` // the ten most frequent
}

// stormMaxStreams is the serve's MAX_STREAMS: the storm's streams and a
// margin for a stream the server has not yet seen end.
func stormMaxStreams(n int) int { return n + 100 }

// stormFiles is the open files each of this program and the serve needs:
// a descriptor per stream in each, the serve's pool, listener and files
// (config.go's reserve), and room for pages and probes beside the cap.
func stormFiles(n int) uint64 {
	return uint64(stormMaxStreams(n) + 16 + store.DefaultPoolSize + store.DefaultStreamPoolSize + 1 + 64 + 100)
}

// runStorm starts a serve, opens the streams and cuts the serve -rounds
// times.
func runStorm(ctx context.Context, e *env) (sum *stormSummary, err error) {
	o := e.o
	sum = &stormSummary{meta: newMeta(o), Watchers: o.watchers, Runs: o.runs, Rate: o.rate, Signal: o.signal,
		Stream: o.stream, FileLimit: fileLimit()}
	serveEnv, err := stormServeEnv(o)
	if err != nil {
		return nil, err
	}
	srv, err := e.startRefundd(ctx, "serve", serveEnv)
	if err != nil {
		return nil, err
	}
	// Every serve this storm started is stopped, the cut ones included
	// (a SIGTERMed one may still drain).
	procs := []*proc{srv}
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	u, err := url.Parse(srv.url)
	if err != nil {
		return nil, err
	}
	serveEnv["ADDR"] = u.Host // the restarts listen where the streams reconnect
	api, runs, after, err := stormRuns(ctx, e, srv)
	if err != nil {
		return nil, err
	}
	s := &storm{o: o, api: api, hints: map[int64]int{}, refusals: map[int]int{}}

	// The streams, opened as pages that just loaded.
	fmt.Fprintf(e.progress, "loadtest: storm: opening %d streams on %d runs…\n", o.watchers, o.runs)
	sctx, closeStreams := context.WithCancel(ctx)
	var clients sync.WaitGroup
	defer clients.Wait()
	defer closeStreams()
	began := time.Now()
	streams, err := s.open(ctx, sctx, &clients, runs, after)
	if err != nil {
		return nil, err
	}
	sum.OpenS = time.Since(began).Seconds()
	fmt.Fprintf(e.progress, "loadtest: storm: %d streams open in %.1f s\n", o.watchers, sum.OpenS)

	app := &appender{st: e.st, runs: runs, rate: o.rate, sent: make([][]int64, len(runs))}
	app.Start(ctx)
	defer app.Stop()
	pr := &prober{url: healthzURL(srv, serveEnv), every: probeEvery}
	pr.Start()
	defer pr.Stop()
	baseFrom := time.Now()
	if !sleep(ctx, baselineTime) {
		return nil, ctx.Err()
	}
	baseTo := time.Now()

	waves, _, err := s.cutRounds(ctx, e, srv, serveEnv, streams, sum, func(p *proc) { procs = append(procs, p) })
	s.cur.Store(nil)
	sum.probed(pr.Stop(), window{baseFrom, baseTo}, waves)
	app.Stop()

	waitDelivered(ctx, app, streams)
	closeStreams()
	clients.Wait()
	sum.account(app, streams)
	sum.Appended, sum.AppendErrors = app.counts()
	sum.Hints = hintsOf(s.hints)
	sum.Refusals = s.failedConnects.Load()
	if err != nil {
		if len(sum.Rounds) == 0 {
			return nil, err
		}
		sum.Incomplete = fmt.Sprintf("%d of %d rounds: %v", len(sum.Rounds), o.rounds, err)
	}
	sum.finish()
	return sum, err
}

// stormServeEnv is the first serve's settings: a stream cap for the
// storm, and a HEALTH_ADDR of its own unless -health-addr=false.
func stormServeEnv(o *options) (map[string]string, error) {
	env := map[string]string{"ADDR": "127.0.0.1:0", "MAX_STREAMS": strconv.Itoa(stormMaxStreams(o.watchers))}
	if o.healthAddr {
		addr, err := freeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		env["HEALTH_ADDR"] = addr
	}
	return env, nil
}

// stormRuns starts the storm's runs through srv's API, and says where
// each run's streams start.
func stormRuns(ctx context.Context, e *env, srv *proc) (*apiClient, []uuid.UUID, map[uuid.UUID]string, error) {
	api, err := e.client(ctx, srv.url, 0)
	if err != nil {
		return nil, nil, nil, err
	}
	runs, err := startRuns(ctx, api, e.o.runs)
	if err != nil {
		return nil, nil, nil, err
	}
	after, err := startCursors(ctx, e.st, runs, e.o.from)
	return api, runs, after, err
}

// open starts one EventSource-like client per stream (on sctx, counted in
// clients) and waits until each has opened.
func (s *storm) open(ctx, sctx context.Context, clients *sync.WaitGroup, runs []uuid.UUID, after map[uuid.UUID]string) ([]*esClient, error) {
	o := s.o
	streams := make([]*esClient, o.watchers)
	gate := make(chan struct{}, openConcurrency)
	opened := make(chan error, o.watchers)
	for i := range streams {
		run := i % len(runs)
		c := &esClient{s: s, run: run, path: streamPath(o.stream, runs[run]) + after[runs[run]], resumed: make([]time.Time, o.rounds)}
		streams[i] = c
		clients.Go(func() { c.loop(sctx, gate, func(err error) { opened <- err }) })
	}
	for range streams {
		select {
		case err := <-opened:
			if err != nil {
				return nil, fmt.Errorf("open the streams: %w", err)
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return streams, nil
}

// healthzURL is where the storm probes /healthz: serve's HEALTH_ADDR if
// it has one, as README's deployment does, else its ADDR.
func healthzURL(srv *proc, serveEnv map[string]string) string {
	if addr := serveEnv["HEALTH_ADDR"]; addr != "" {
		return "http://" + addr + "/healthz"
	}
	return srv.url + "/healthz"
}

// probed sums up the /healthz samples before the first signal (base) and
// over each wave.
func (sum *stormSummary) probed(samples []probeSample, base window, waves []window) {
	sum.Baseline = probeWindow(samples, base.from, base.to)
	for i := range sum.Rounds {
		sum.Rounds[i].Healthz = probeWindow(samples, waves[i].from, waves[i].to)
	}
}

// window is when a wave lasted: from the signal until the last stream
// was back.
type window struct{ from, to time.Time }

// cutRounds cuts the serve -rounds times, each time starting the next one
// (started is told of each), and returns each wave's window and the serve
// running last.
func (s *storm) cutRounds(ctx context.Context, e *env, srv *proc, serveEnv map[string]string, streams []*esClient,
	sum *stormSummary, started func(*proc)) (waves []window, last *proc, err error) {
	for round := range s.o.rounds {
		if round > 0 && !sleep(ctx, betweenRounds) {
			return waves, srv, ctx.Err()
		}
		r, next, err := s.cut(ctx, e, srv, serveEnv, round, streams)
		if next != nil {
			started(next)
			srv = next
		}
		if err != nil {
			return waves, srv, fmt.Errorf("round %d: %w", round+1, err)
		}
		sum.Rounds = append(sum.Rounds, r)
		sigAt := s.cur.Load().sigAt
		waves = append(waves, window{sigAt, sigAt.Add(time.Duration(r.WaveS * float64(time.Second)))})
		fmt.Fprintf(e.progress, "loadtest: storm round %d: %s; ready %.2f s after it; %d of %d back, 99%% %s after ready (p50 %.2f s, max %.2f s)\n",
			round+1, r.Signal, r.ReadyS, r.Resume.Resumed, r.Resume.Streams, secs(r.Resume.T99), r.Resume.P50, r.Resume.Max)
	}
	return waves, srv, nil
}

// waitDelivered waits, up to 15 s, until every stream has what was
// appended to its run.
func waitDelivered(ctx context.Context, app *appender, streams []*esClient) {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		short := 0
		for _, c := range streams {
			if !c.has(app.sent[c.run]) {
				short++
			}
		}
		if short == 0 || !sleep(ctx, 100*time.Millisecond) {
			return
		}
	}
}

// account sums up what each stream got against what was appended.
func (sum *stormSummary) account(app *appender, streams []*esClient) {
	for _, c := range streams {
		g, d, u := c.ledger.account(app.sent[c.run])
		sum.Gaps += g
		sum.Duplicates += d
		sum.Unknown += u
		sum.Backward += c.ledger.backward
		if g > 0 {
			sum.StreamsShort++
		}
	}
}

// streamPath is a run's stream, as watchers mode opens it.
func streamPath(kind string, id uuid.UUID) string {
	if kind == "html" {
		return "/runs/" + id.String() + "/events"
	}
	return "/api/runs/" + id.String() + "/stream"
}

// cut sends the signal to old, starts the next serve at once on the same
// address, and waits for the streams to come back. next is the new serve
// (nil if it did not start).
func (s *storm) cut(ctx context.Context, e *env, old *proc, serveEnv map[string]string, round int, streams []*esClient) (r stormRound, next *proc, err error) {
	sig, name := syscall.SIGKILL, "SIGKILL"
	if s.o.signal == "term" {
		sig, name = syscall.SIGTERM, "SIGTERM"
	}
	r = stormRound{Round: round + 1, Signal: name}
	selfCPU := cpuOf([]int{os.Getpid()})
	w := &wave{idx: round, sigAt: time.Now()}
	s.cur.Store(w)
	if err := old.cmd.Process.Signal(sig); err != nil {
		return r, nil, fmt.Errorf("signal the serve: %w", err)
	}
	var oldExit atomic.Int64 // ns after the signal, 0 while it runs
	go func() {
		<-old.done
		oldExit.Store(int64(time.Since(w.sigAt)))
	}()

	// Started at once, as a supervisor restarting it would; a busy address
	// is tried again.
	for {
		next, err = e.startRefundd(ctx, "serve", serveEnv)
		if err == nil || !strings.Contains(err.Error(), "address already in use") || time.Since(w.sigAt) > bindLimit {
			break
		}
		r.BindRetries++
		if !sleep(ctx, 20*time.Millisecond) {
			return r, nil, ctx.Err()
		}
	}
	if err != nil {
		return r, nil, fmt.Errorf("restart the serve: %w", err)
	}
	r.ListeningS = time.Since(w.sigAt).Seconds()
	ready, err := waitReady(ctx, next.url)
	if err != nil {
		return r, next, err
	}
	r.ReadyS = ready.Sub(w.sigAt).Seconds()

	// The wave: until every stream is back, or the limit.
	n := int64(len(streams))
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(waveLimit)
	defer limit.Stop()
	for waiting := true; waiting && w.resumed.Load() < n; {
		select {
		case <-ctx.Done():
			return r, next, ctx.Err()
		case <-limit.C:
			waiting = false
		case <-tick.C:
		}
	}
	end := time.Now()
	resumed := make([]time.Time, len(streams))
	for i, c := range streams {
		c.mu.Lock()
		resumed[i] = c.resumed[round]
		c.mu.Unlock()
	}
	r.Resume = resumeOf(ready, resumed, len(streams))
	if fromSig := resumeOf(w.sigAt, resumed, len(streams)); fromSig.T99 != nil {
		r.T99FromSignal = fromSig.T99
	}
	r.WaveS = end.Sub(w.sigAt).Seconds()
	r.ServeCPU = 100 * cpuOf([]int{next.pid()}) / r.WaveS
	r.LoadtestCPU = 100 * (cpuOf([]int{os.Getpid()}) - selfCPU) / r.WaveS
	if ns := oldExit.Load(); ns > 0 {
		v := time.Duration(ns).Seconds()
		r.OldExitS = &v
	}
	r.Dropped, r.CleanEnds, r.WordBeforeEnd = w.dropped.Load(), w.clean.Load(), w.worded.Load()
	r.FailedConnects, r.NonStreamOK = w.failedConnects.Load(), w.nonStreamOK.Load()
	return r, next, nil
}

// probeClient opens a connection per request, as a load balancer's check
// does: a keep-alive connection would skip the accept queue the streams
// crowd.
func probeClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

// waitReady asks base's /readyz until it answers 200, and returns when it
// did.
func waitReady(ctx context.Context, base string) (time.Time, error) {
	c := probeClient()
	deadline := time.Now().Add(waveLimit)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if err != nil {
			return time.Time{}, err
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Now(), nil
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("the restarted serve did not answer /readyz within %s (last: %v)", waveLimit, err)
		}
		if !sleep(ctx, readyEvery) {
			return time.Time{}, ctx.Err()
		}
	}
}

// prober asks url every interval, each request on its own goroutine, so a
// slow answer does not delay the next sample.
type prober struct {
	url   string
	every time.Duration

	stop     chan struct{}
	stopOnce sync.Once
	loop     sync.WaitGroup
	inflight sync.WaitGroup
	mu       sync.Mutex
	samples  []probeSample
}

type probeSample struct {
	at  time.Time
	lat time.Duration
	ok  bool
}

func (p *prober) Start() {
	p.stop = make(chan struct{})
	c := probeClient()
	p.loop.Go(func() {
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.inflight.Go(func() { p.sample(c) })
			}
		}
	})
}

func (p *prober) sample(c *http.Client) {
	at := time.Now()
	resp, err := c.Get(p.url)
	ok := err == nil && resp.StatusCode == http.StatusOK
	if err == nil {
		resp.Body.Close()
	}
	p.mu.Lock()
	p.samples = append(p.samples, probeSample{at: at, lat: time.Since(at), ok: ok})
	p.mu.Unlock()
}

// Stop ends the sampling, waits for the samples in flight, and returns
// them all. It is safe to call twice.
func (p *prober) Stop() []probeSample {
	p.stopOnce.Do(func() { close(p.stop) })
	p.loop.Wait()
	p.inflight.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.samples)
}

// probeWindow sums up the samples sent in [from, to].
func probeWindow(samples []probeSample, from, to time.Time) probeStats {
	var st probeStats
	var ms []float64
	for _, s := range samples {
		if s.at.Before(from) || s.at.After(to) {
			continue
		}
		st.Samples++
		if !s.ok {
			st.Failed++
			continue
		}
		ms = append(ms, float64(s.lat)/float64(time.Millisecond))
	}
	if len(ms) > 0 {
		st.P50MS, st.P99MS, st.MaxMS = quantile(ms, 0.5), quantile(ms, 0.99), slices.Max(ms)
	}
	return st
}

func hintsOf(m map[int64]int) hintsStats {
	h := hintsStats{Distinct: len(m)}
	byText := map[string]int{}
	first := true
	for ms, n := range m {
		if first || ms < h.MinMS {
			h.MinMS = ms
		}
		if first || ms > h.MaxMS {
			h.MaxMS = ms
		}
		first = false
		byText[strconv.FormatInt(ms, 10)] = n
	}
	if len(byText) > 0 {
		h.Counts = map[string]int{}
		for _, e := range topCounts(byText, 10) {
			h.Counts[e.K] = e.N
		}
	}
	return h
}

// appender appends narration to the runs, round robin, at rate per second
// from Start to Stop, each piece marked with its append number; sent holds
// the numbers committed to each run.
type appender struct {
	st   *store.Store
	runs []uuid.UUID
	rate float64

	stopOnce sync.Once
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	sent     [][]int64 // by run index
	n, errs  int
}

func (a *appender) Start(ctx context.Context) {
	ctx, a.cancel = context.WithCancel(ctx)
	if a.rate <= 0 {
		return
	}
	// Enough goroutines to keep the rate while each waits for its batch
	// to commit (store.AppendNarration).
	const workers = 16
	jobs := make(chan int64, workers)
	for range workers {
		a.wg.Go(func() {
			for k := range jobs {
				run := int(k) % len(a.runs)
				// Not ctx: an append under way at Stop completes, so what
				// committed is known.
				err := a.st.AppendNarration(context.WithoutCancel(ctx), a.runs[run], marker(k, time.Now()))
				a.mu.Lock()
				if err != nil {
					a.errs++
				} else {
					a.n++
					a.sent[run] = append(a.sent[run], k)
				}
				a.mu.Unlock()
			}
		})
	}
	a.wg.Go(func() {
		defer close(jobs)
		start := time.Now()
		for k := int64(0); ; k++ {
			if !sleep(ctx, time.Until(start.Add(time.Duration(float64(k)/a.rate*float64(time.Second))))) {
				return
			}
			select {
			case jobs <- k:
			case <-ctx.Done():
				return
			}
		}
	})
}

// Stop ends the appending and waits for the appends under way. It is safe
// to call twice.
func (a *appender) Stop() {
	a.stopOnce.Do(func() {
		if a.cancel != nil {
			a.cancel()
		}
	})
	a.wg.Wait()
}

func (a *appender) counts() (committed, failed int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n, a.errs
}

// secs prints an optional number of seconds.
func secs(v *float64) string {
	if v == nil {
		return "never"
	}
	return fmt.Sprintf("%.2f s", *v)
}

func (s *stormSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nstorm: %d streams on %d runs (%s stream), %s and restart on the same address, %d rounds, %g appends/s, open files %d, load %s → %s, %.0f s\n",
		s.Watchers, s.Runs, s.Stream, strings.ToUpper("sig"+s.Signal), len(s.Rounds), s.Rate, s.FileLimit, s.LoadAvg[0], s.LoadAvg[1], s.Seconds)
	if s.Incomplete != "" {
		fmt.Fprintf(&b, "\nINCOMPLETE: %s\n", s.Incomplete)
	}
	b.WriteString("\n| what |")
	for _, r := range s.Rounds {
		fmt.Fprintf(&b, " round %d |", r.Round)
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(s.Rounds)) + "\n")
	row := func(what string, f func(r stormRound) string) {
		b.WriteString("| " + what + " |")
		for _, r := range s.Rounds {
			b.WriteString(" " + f(r) + " |")
		}
		b.WriteString("\n")
	}
	row("new serve listening after the signal, s", func(r stormRound) string { return num(r.ListeningS) })
	row("new serve answers /readyz after the signal, s", func(r stormRound) string { return num(r.ReadyS) })
	row("old serve gone after the signal, s", func(r stormRound) string { return strings.TrimSuffix(secs(r.OldExitS), " s") })
	row("bind retries (address in use)", func(r stormRound) string { return strconv.Itoa(r.BindRetries) })
	row("streams dropped / ended cleanly / with a word first", func(r stormRound) string {
		return fmt.Sprintf("%d / %d / %d", r.Dropped, r.CleanEnds, r.WordBeforeEnd)
	})
	row("streams back", func(r stormRound) string { return fmt.Sprintf("%d of %d", r.Resume.Resumed, r.Resume.Streams) })
	row("first byte on reconnect after /readyz, p50 / p99 / max, s", func(r stormRound) string {
		return fmt.Sprintf("%s / %s / %s", num(r.Resume.P50), num(r.Resume.P99), num(r.Resume.Max))
	})
	row("99% of streams back, s after /readyz", func(r stormRound) string { return strings.TrimSuffix(secs(r.Resume.T99), " s") })
	row("99% of streams back, s after the signal", func(r stormRound) string { return strings.TrimSuffix(secs(r.T99FromSignal), " s") })
	row("connects refused or failed / answers not a stream", func(r stormRound) string {
		return fmt.Sprintf("%d / %d", r.FailedConnects, r.NonStreamOK)
	})
	row("CPU over the wave, % of one core: new serve / load test", func(r stormRound) string {
		return fmt.Sprintf("%.0f / %.0f", r.ServeCPU, r.LoadtestCPU)
	})
	row("/healthz every 50 ms: p99 / max, ms", func(r stormRound) string {
		return fmt.Sprintf("%s / %s", num(r.Healthz.P99MS), num(r.Healthz.MaxMS))
	})
	row("/healthz samples / unanswered (down)", func(r stormRound) string {
		return fmt.Sprintf("%d / %d", r.Healthz.Samples, r.Healthz.Failed)
	})
	fmt.Fprintf(&b, "\n/healthz before the first signal: p99 %s ms, max %s ms (%d samples)\n", num(s.Baseline.P99MS), num(s.Baseline.MaxMS), s.Baseline.Samples)
	fmt.Fprintf(&b, "streams opened in %.1f s; %d appends committed (%d failed)\n", s.OpenS, s.Appended, s.AppendErrors)
	fmt.Fprintf(&b, "gaps / duplicates / backward seqs: %d / %d / %d (streams with a gap: %d)\n", s.Gaps, s.Duplicates, s.Backward, s.StreamsShort)
	fmt.Fprintf(&b, "retry hints seen: %d distinct, %d–%d ms\n", s.Hints.Distinct, s.Hints.MinMS, s.Hints.MaxMS)
	return b.String()
}

// freeLoopbackAddr is a loopback address with a port free for now.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
