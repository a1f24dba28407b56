// Command loadtest puts a bounded load on refundd over HTTP and measures
// it beside a bare reference on the same PostgreSQL (docs/PERFORMANCE.md).
//
//	go run ./loadtest -mode watchers -watchers 1000 -runs 1 -rate 10
//	go run ./loadtest -mode runs -inflight 200 -slots 32 -pace 0 -workers 2
//	go run ./loadtest -mode storm -watchers 10000 -runs 500 -signal kill -rounds 2
//	go run ./loadtest -mode family -children 20 -rounds 9
//	go run ./loadtest -mode webhooks -endpoints 3 -rpm 2000 -inflight 100 -slots 64 -pace 0
//
// Without -url it starts its own PostgreSQL under a fresh folder and its
// own refundd processes (built from this repository, or -bin), and removes
// them at the end. With -url it drives a running refundd, and needs
// -database-url to append events and read pg_stat_activity.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/refundd/refundd/store"
)

// options are the flags, each bounded.
type options struct {
	statements  bool
	mode        string
	url         string
	databaseURL string
	token       string
	emails      []string
	password    string
	bin         string
	dataDir     string
	orders      int
	jsonOut     bool
	timeout     time.Duration

	// watchers
	watchers  int
	runs      int
	rate      float64
	duration  time.Duration
	idle      time.Duration
	rounds    int
	warm      int // watchers: rounds before the measured ones, not counted
	stream    string
	from      string
	bare      bool
	reference string
	appender  string
	profile   string // a folder for CPU profiles of the opening and the appends

	// approvals
	approvals int
	settle    time.Duration

	// storm
	signal string
	// healthAddr: storm probes /healthz on a HEALTH_ADDR listener of its own.
	healthAddr bool

	// family
	children int

	// runs
	inflight int
	slots    int
	pace     string
	workers  int
	pool     int
	poll     time.Duration
	warmup   time.Duration
	rpm      int // runs, webhooks: starts a minute at most (0: as fast as the loops go)

	// webhooks
	endpoints int
	hang      bool
}

// bound is one flag's ceiling (and floor), checked in words.
type bound struct {
	name     string
	val      float64
	min, max float64
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.mode, "mode", "watchers", "watchers (SSE streams against the bare reference), runs (closed-loop starts), storm (streams across a serve killed and restarted) approvals (an approval reaching -watchers streams of its run in refundd dev) family (a request of -children refunds beside as many single runs: start, snapshot, watch; time and SQL statements) or webhooks (runs mode with -endpoints webhook receivers: each event's lag from its commit to its receipt)")
	fs.StringVar(&o.url, "url", "", "a running refundd's base URL; empty starts refundd processes of its own")
	fs.StringVar(&o.databaseURL, "database-url", "", "that refundd's DATABASE_URL (required with -url)")
	fs.StringVar(&o.token, "token", "", "an API token (Bearer) instead of logging in; one customer")
	emails := fs.String("emails", "customer@example.com,customer2@example.com", "customers to log in as, comma-separated (runs mode rotates over them; watchers use the first)")
	fs.StringVar(&o.password, "password", "demo", "their password")
	fs.StringVar(&o.bin, "bin", "", "a built refundd binary; empty builds one from this repository")
	fs.StringVar(&o.dataDir, "data-dir", "", "where the own PostgreSQL and logs go; empty makes a fresh folder and removes it")
	fs.IntVar(&o.orders, "orders", 0, "without -url: orders to add to each customer besides the demo ones (at most 1000); starts on one order serialize")
	fs.BoolVar(&o.jsonOut, "json", false, "print one JSON summary line on stdout, nothing else there")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "hard bound on the whole invocation (at most 30m)")

	fs.IntVar(&o.watchers, "watchers", 100, "watchers, storm: SSE streams to open (at most 20000; each is a file descriptor here and in the server: raise ulimit -n)")
	fs.IntVar(&o.runs, "runs", 1, "watchers, storm: runs they watch, watcher i on run i mod runs (at most 2000, at most -watchers)")
	fs.Float64Var(&o.rate, "rate", 20, "watchers, storm: appends per second, round robin over the runs (0 measures idle streams only; at most 5000)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "watchers: appending time per target per round; runs: measuring time (at most 10m)")
	fs.DurationVar(&o.idle, "idle", 5*time.Second, "watchers: idle time over which CPU is measured (at most 2m)")
	fs.IntVar(&o.rounds, "rounds", 3, "watchers: interleaved rounds; storm: cuts of the serve (at most 9)")
	fs.IntVar(&o.warm, "warm", 1, "watchers: rounds of both servers before the measured ones, not counted: an invocation's first opening costs whichever server goes first more (the client's and PostgreSQL's first touch) (at most 3)")
	fs.StringVar(&o.stream, "stream", "api", "watchers, storm: refundd's stream, api (/api/runs/{id}/stream) or html (/runs/{id}/events)")
	fs.StringVar(&o.from, "from", "end", "watchers, storm: where refundd's streams start, end (after= the run's last seq, as a page that just loaded; the bare server's start too) or start (the run's whole log replayed)")
	fs.StringVar(&o.profile, "profile", "", "watchers: a folder to write refundd's CPU profiles of each round's opening and appends into (open-N.pprof, append-N.pprof)")
	fs.BoolVar(&o.bare, "bare", true, "watchers: measure the bare reference too")
	fs.StringVar(&o.reference, "reference", "", "watchers: the folder of the outside reference (../shared/perf-reference): its hub server is the bare reference, opened by the same client; with -rate, one run, the hub publishing its own events; with -appender durable over several runs, its appender (-sync on) and its server's PostgreSQL path")
	fs.StringVar(&o.appender, "appender", "async", "watchers: how events are appended, async (store.AppendNarration: batched, asynchronous commits, as narration is) or durable (store.Append: one commit each, flushed, as business events are)")
	fs.DurationVar(&o.settle, "settle", time.Second, "approvals: how long the watchers watch the waiting run before the approver decides (0: at once, while the server still answers their opens)")
	fs.IntVar(&o.approvals, "approvals", 20, "approvals: runs approved one after another, each watched by -watchers streams (at most 200)")
	fs.BoolVar(&o.healthAddr, "health-addr", true, "storm: give serve a HEALTH_ADDR and probe /healthz there, as README's deployment does (false: on ADDR)")
	fs.StringVar(&o.signal, "signal", "kill", "storm: how the serve is cut, kill (SIGKILL) or term (SIGTERM); it is started again at once on the same address")

	fs.IntVar(&o.children, "children", 20, "family: children of the request, beside as many single runs (at most 100; without -url the customer gets as many orders)")

	fs.IntVar(&o.inflight, "inflight", 50, "runs: runs kept in flight (at most 2000)")
	fs.IntVar(&o.slots, "slots", 8, "runs: WORKER_SLOTS of the own processes (at most 512)")
	fs.StringVar(&o.pace, "pace", "", "runs, approvals: NARRATION_PACE of the own processes, such as 0 or 40ms; empty keeps refundd's default")
	fs.IntVar(&o.workers, "workers", 0, "runs: extra `refundd worker` processes to start (at most 16)")
	fs.IntVar(&o.pool, "pool", 8, "runs, approvals: DB_POOL_SIZE of each own process (at most 64; all processes must fit max_connections=100)")
	fs.BoolVar(&o.statements, "statements", false, "runs, webhooks: without -url, count the SQL statements a run costs (pg_stat_statements) and list the most called")
	fs.DurationVar(&o.poll, "poll", 20*time.Millisecond, "runs: how often the load test asks refundd's database, in one statement, which of its runs in flight ended (20ms to 5s)")
	fs.DurationVar(&o.warmup, "warmup", 5*time.Second, "runs: time before the measuring starts (at most 1m)")
	fs.IntVar(&o.rpm, "rpm", 0, "runs, webhooks: at most this many starts a minute, evenly paced (0: as fast as -inflight loops go; at most 100000)")
	fs.IntVar(&o.endpoints, "endpoints", 3, "webhooks: webhook receivers registered with refundd, each getting every business event (at most 10)")
	fs.BoolVar(&o.hang, "hang", false, "webhooks: one more endpoint that never answers (each delivery to it times out), to show it holds no run and no other endpoint")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags only; see -h)", fs.Arg(0))
	}
	for _, e := range strings.Split(*emails, ",") {
		if e = strings.TrimSpace(e); e != "" {
			o.emails = append(o.emails, e)
		}
	}
	return o, o.validate()
}

func (o *options) validate() error {
	if !slices.Contains([]string{"watchers", "runs", "storm", "approvals", "family", "webhooks"}, o.mode) {
		return fmt.Errorf("-mode must be watchers, runs, storm, approvals, family or webhooks, got %q", o.mode)
	}
	if o.mode == "webhooks" && o.url != "" {
		return errors.New("-mode webhooks registers receivers of its own with a refundd dev of its own: it takes no -url")
	}
	if o.statements && (o.url != "" || o.mode != "runs" && o.mode != "webhooks") {
		return errors.New("-statements counts in the load test's own cluster: runs or webhooks mode, without -url")
	}
	if o.appender != "async" && o.appender != "durable" {
		return fmt.Errorf("-appender must be async or durable, got %q", o.appender)
	}
	if o.signal != "kill" && o.signal != "term" {
		return fmt.Errorf("-signal must be kill or term, got %q", o.signal)
	}
	if o.reference != "" && (o.mode != "watchers" || o.rate > 0 && o.runs != 1 && o.appender != "durable") {
		return errReferenceRate
	}
	if o.mode == "storm" && o.url != "" {
		return errors.New("-mode storm kills and restarts a serve of its own: it takes no -url")
	}
	if o.from != "end" && o.from != "start" {
		return fmt.Errorf("-from must be end or start, got %q", o.from)
	}
	if o.stream != "api" && o.stream != "html" {
		return fmt.Errorf("-stream must be api or html, got %q", o.stream)
	}
	if o.url != "" && o.databaseURL == "" {
		return errors.New("-url needs -database-url: events are appended, and pg_stat_activity read, in refundd's own database")
	}
	if o.url == "" && o.databaseURL != "" {
		return errors.New("-database-url is only used with -url (without -url the load test starts its own PostgreSQL)")
	}
	if len(o.emails) == 0 && o.token == "" {
		return errors.New("give -emails to log in as, or -token")
	}
	if o.stream == "html" && o.token != "" {
		return errors.New("-stream html needs a session: log in with -emails, not -token")
	}
	for _, b := range []bound{
		{"-timeout (seconds)", o.timeout.Seconds(), 1, 1800},
		{"-watchers", float64(o.watchers), 1, 20000},
		{"-runs", float64(o.runs), 1, min(2000, float64(o.watchers))},
		{"-rate", o.rate, 0, 5000},
		{"-duration (seconds)", o.duration.Seconds(), 1, 600},
		{"-idle (seconds)", o.idle.Seconds(), 1, 120},
		{"-rounds", float64(o.rounds), 1, 9},
		{"-warm", float64(o.warm), 0, 3},
		{"-approvals", float64(o.approvals), 1, 200},
		{"-settle (seconds)", o.settle.Seconds(), 0, 30},
		{"-children", float64(o.children), 2, 100},
		{"-orders", float64(o.orders), 0, 1000},
		{"-inflight", float64(o.inflight), 1, 2000},
		{"-slots", float64(o.slots), 1, 512},
		{"-workers", float64(o.workers), 0, 16},
		{"-pool", float64(o.pool), 1, 64},
		{"-poll (seconds)", o.poll.Seconds(), 0.02, 5},
		{"-warmup (seconds)", o.warmup.Seconds(), 0, 60},
		{"-rpm", float64(o.rpm), 0, 100000},
		{"-endpoints", float64(o.endpoints), 1, 10},
	} {
		if b.val < b.min || b.val > b.max {
			return fmt.Errorf("%s must be between %g and %g, got %g", b.name, b.min, b.max, b.val)
		}
	}
	if o.url == "" && (o.mode == "runs" || o.mode == "webhooks") && (o.workers+1)*(o.pool+store.DefaultStreamPoolSize+1)+10 > 100 {
		return fmt.Errorf("%d processes × (-pool %d + %d stream pool + 1 listener) connections (+10 for the load test) exceed PostgreSQL's max_connections of 100: lower -pool or -workers",
			o.workers+1, o.pool, store.DefaultStreamPoolSize)
	}
	if o.warmup >= o.duration && o.mode == "runs" {
		return fmt.Errorf("-warmup (%s) must be shorter than -duration (%s)", o.warmup, o.duration)
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if len(args) > 0 && args[0] == "bare-serve" {
		fs := flag.NewFlagSet("bare-serve", flag.ContinueOnError)
		dbURL := fs.String("database-url", "", "")
		addr := fs.String("addr", "127.0.0.1:0", "")
		if err := fs.Parse(args[1:]); err != nil || *dbURL == "" {
			fmt.Fprintln(stderr, "loadtest bare-serve: needs -database-url")
			return 2
		}
		if err := serveBare(ctx, *dbURL, *addr, stdout, logger); err != nil {
			fmt.Fprintf(stderr, "loadtest bare-serve: %v\n", err)
			return 1
		}
		return 0
	}
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("the -timeout of %s passed", o.timeout))
	defer cancel()
	if err := measure(ctx, o, stdout, stderr, logger); err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return 1
	}
	return 0
}
