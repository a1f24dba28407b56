package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
	"github.com/refundd/refundd/views"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// The bare pipeline is the yardstick: if it lost, doubled or reordered
// events, every ratio would flatter refundd.
func TestBarePipeline_DeliversEveryEventOnceInOrderToEveryWatcher(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := storetest.URL(t)
	st, err := store.Open(ctx, url, store.WithAnswers(views.Answers{}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := storetest.MustSeedParties(t, st, 1000)
	var runs []uuid.UUID
	for i := range 3 {
		r, _, err := st.StartRun(ctx, store.StartRequest{OwnerID: p.Customer.ID, ClientRequestID: uuid.NewString(),
			OrderID: p.Order.ID, Amount: 1, Reason: "test"})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		runs = append(runs, r.ID)
	}

	bare, err := newBareServer(ctx, url, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if err := bare.listen(ctx, url); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(bare)
	defer srv.Close()

	o := &options{watchers: 7, runs: len(runs), rate: 60, duration: time.Second, idle: time.Second}
	w := &watchRound{o: o, st: st, runs: runs, keepGot: true, kBase: 5,
		t: &target{name: "bare", base: srv.URL, client: newAPIClient(srv.URL, newTransport()),
			path: func(id uuid.UUID) string { return "/runs/" + id.String() + "/stream" }}}
	res, err := w.measure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res["duplicates"] != 0 || res["out_of_order"] != 0 {
		t.Errorf("duplicates %v, out of order %v; want none", res["duplicates"], res["out_of_order"])
	}
	if got, want := res["reads_per_wakeup"], 1.0; got > want {
		t.Errorf("reads per wake-up = %v, want at most %v", got, want)
	}
	for i, got := range w.got {
		var want []int64
		for j, r := range w.sent {
			if r == i%len(runs) {
				want = append(want, w.kBase+int64(j))
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("watcher %d of run %d got appends %v, want %v", i, i%len(runs), got, want)
		}
	}
	// Paced at 60 a second for a second; a loaded machine may fall a few
	// behind, which is the appender's pace, not the pipeline under test.
	if len(w.sent) < 30 {
		t.Errorf("appended %d events, want about 60", len(w.sent))
	}
}

// Runs mode against a real refundd dev (the binary built from this
// repository) on a test database: the closed loop completes runs, and the
// JSON summary says so.
func TestRunsMode_CompletesRunsAgainstRefundd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin, err := buildRefundd(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{o: &options{}, dir: dir, bin: bin, dbURL: storetest.URL(t), sessionKey: strings.Repeat("k", 32)}
	dev, err := e.startRefundd(ctx, "dev", map[string]string{"NARRATION_PACE": "0", "DB_POOL_SIZE": "8"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.stop()

	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"-mode", "runs", "-url", dev.url, "-database-url", e.dbURL, "-inflight", "4",
		"-duration", "6s", "-warmup", "1s", "-poll", "50ms", "-json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("loadtest exited %d; stderr:\n%s\nrefundd's log:\n%s", code, stderr.String(), dev.lastLog())
	}
	var sum runsSummary
	line := strings.TrimSpace(stdout.String())
	if strings.Contains(line, "\n") {
		t.Fatalf("-json printed more than one line:\n%s", line)
	}
	if err := json.Unmarshal([]byte(line), &sum); err != nil {
		t.Fatalf("summary %q: %v", line, err)
	}
	if sum.Completed < 3 || sum.Errors != 0 {
		t.Errorf("completed %d runs with %d errors (%s), want at least 3 and none", sum.Completed, sum.Errors, sum.FirstError)
	}
	if sum.Completed != sum.Finished {
		t.Errorf("finished %d, completed %d: want every run completed", sum.Finished, sum.Completed)
	}
}

// TestApprovalsMode_EveryWatcherHearsTheApproval: against refundd dev
// asking for approval of every refund, each approval reaches every
// watcher of its run, and the summary says when the last one heard it.
func TestApprovalsMode_EveryWatcherHearsTheApproval(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin, err := buildRefundd(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{o: &options{}, dir: dir, bin: bin, dbURL: storetest.URL(t), sessionKey: strings.Repeat("k", 32)}
	dev, err := e.startRefundd(ctx, "dev", map[string]string{"NARRATION_PACE": "0", "APPROVAL_THRESHOLD": "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.stop()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"-mode", "approvals", "-url", dev.url, "-database-url", e.dbURL,
		"-watchers", "5", "-approvals", "2", "-json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("loadtest exited %d; stderr:\n%s\nrefundd's log:\n%s", code, stderr.String(), dev.lastLog())
	}
	var sum approvalsSummary
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &sum); err != nil {
		t.Fatalf("summary %q: %v", stdout.String(), err)
	}
	if sum.Missing != 0 || len(sum.Lasts) != 2 {
		t.Errorf("%d watchers missed an approval, %d approvals measured; want 0 and 2", sum.Missing, len(sum.Lasts))
	}
	for i, ms := range sum.Lasts {
		if ms <= 0 {
			t.Errorf("approval %d: the last watcher heard it %v ms after the POST, want a time after it", i+1, ms)
		}
	}
}

// TestFamilyMode_MeasuresEachPairAgainstRefundd: against refundd serve,
// each round starts a family and as many single runs, and every pair is
// measured on both sides; the runs it made are in the database.
func TestFamilyMode_MeasuresEachPairAgainstRefundd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin, err := buildRefundd(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{o: &options{}, dir: dir, bin: bin, dbURL: storetest.URL(t), sessionKey: strings.Repeat("k", 32)}
	st, err := store.Open(ctx, e.dbURL, store.WithAnswers(views.Answers{}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := devdb.SeedDemo(ctx, st); err != nil {
		t.Fatal(err)
	}
	serve, err := e.startRefundd(ctx, "serve", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer serve.stop()

	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"-mode", "family", "-url", serve.url, "-database-url", e.dbURL, "-children", "3", "-rounds", "2", "-json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("loadtest exited %d; stderr:\n%s\nrefundd's log:\n%s", code, stderr.String(), serve.lastLog())
	}
	var sum familySummary
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &sum); err != nil {
		t.Fatalf("summary %q: %v", stdout.String(), err)
	}
	var keys []string
	for _, f := range sum.Figures {
		keys = append(keys, f.Key)
		if f.FamilyMS.N != 2 || f.SinglesMS.N != 2 || f.FamilyMS.Min <= 0 || f.SinglesMS.Min <= 0 {
			t.Errorf("%s: family %+v, singles %+v; want two rounds of each, in time", f.Key, f.FamilyMS, f.SinglesMS)
		}
	}
	if got := strings.Join(keys, ","); !strings.HasPrefix(got, "start,snapshot,watch") {
		t.Errorf("figures %s, want start, snapshot and watch", got)
	}
	var parents, children, singles int
	db, err := sql.Open("postgres", e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE kind = 'request'), count(*) FILTER (WHERE parent_run_id IS NOT NULL),
        count(*) FILTER (WHERE kind = 'refund' AND parent_run_id IS NULL) FROM runs`).Scan(&parents, &children, &singles); err != nil {
		t.Fatal(err)
	}
	if parents != 2 || children != 6 || singles != 6 {
		t.Errorf("%d parents, %d children, %d single runs; want 2, 6 and 6", parents, children, singles)
	}
}

func TestFlags_OutOfBoundsRefusedInWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-watchers", "20001"}, "-watchers must be between 1 and 20000, got 20001"},
		{[]string{"-mode", "soak"}, `-mode must be watchers, runs, storm, approvals, family or webhooks, got "soak"`},
		{[]string{"-mode", "family", "-children", "500"}, "-children must be between 2 and 100, got 500"},
		{[]string{"-appender", "eventually"}, `-appender must be async or durable, got "eventually"`},
		{[]string{"-mode", "approvals", "-approvals", "500"}, "-approvals must be between 1 and 200, got 500"},
		{[]string{"-url", "http://127.0.0.1:8080"}, "-url needs -database-url"},
		{[]string{"-mode", "runs", "-workers", "16", "-pool", "16"}, "exceed PostgreSQL's max_connections"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// A figure one server does not report (refundd without a wake-up counter)
// is "n/a", and the JSON summary still encodes.
func TestCompare_MissingFigureIsNotAvailable(t *testing.T) {
	t.Parallel()
	keys := []metricKey{{"reads_per_wakeup", "reads"}, {"open_s", "open"}}
	refundd := []map[string]float64{{"open_s": 2}, {"open_s": 4}, {"open_s": 3}}
	bare := []map[string]float64{{"open_s": 1, "reads_per_wakeup": 1}, {"open_s": 1, "reads_per_wakeup": 1}, {"open_s": 2, "reads_per_wakeup": 1}}
	figs := compare(keys, refundd, bare)
	if _, err := json.Marshal(&watchersSummary{Figures: figs}); err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if got, want := figs[0].Refundd.String(), "n/a"; got != want {
		t.Errorf("missing figure prints %q, want %q", got, want)
	}
	if got, want := *figs[1].Ratio, (spread{N: 3, Median: 2, Min: 1.5, Max: 4}); got != want {
		t.Errorf("ratio = %+v, want %+v (per-round ratios 2, 4, 1.5)", got, want)
	}
}
