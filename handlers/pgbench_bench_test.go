package handlers_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
)

// BenchmarkRunPageVsPgbench500 sets the run page of a run of 500 events
// (GET /runs/{id}, HTML, signed in) beside pgbench running the page's own
// SQL (issue 37, item 4): every statement one page load sends, in its
// transactions, with the same arguments, recorded through the driver and
// replayed by pgbench over one connection, as the page's pool holds them.
// The two take turns in rounds of 50 (pgbench's per-transaction log gives
// its times), each round after one page or transaction not counted; the
// figures are p50 and p99 of each, their ratios, and the range of the
// per-round p99 ratios. Run with -benchtime 500x or more:
//
//	go test -run '^$' -bench RunPageVsPgbench500 -benchtime 500x ./handlers
func BenchmarkRunPageVsPgbench500(b *testing.B) {
	registerCountedDriver()
	a := newApp(b, handlers.Config{}, withStoreOptions(store.Driver(countedDriver)))
	run := a.startRun(b, "customer@example.com", 1)
	appendNarration(b, a, run.ID, 10, 50)
	c := a.signedIn(b, "customer@example.com")
	url := a.srv.URL + "/runs/" + run.ID.String()
	for range 3 { // warm: the pool's connections prepare their statements
		if err := getAndDiscard(c, url, ""); err != nil {
			b.Fatal(err)
		}
	}
	var sqls []string
	stop := recordInto(&sqls)
	err := getAndDiscard(c, url, "")
	stop()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	script := filepath.Join(dir, "page.sql")
	if err := os.WriteFile(script, []byte(pgbenchScript(sqls)), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("the page sends %d statements (BEGIN and COMMIT included): %s", len(sqls), script)
	const round = 50
	var page, bench []time.Duration
	var ratios []float64
	for r := 0; r*round < b.N; r++ {
		// The round's first page is not counted, as pgbench's first
		// transaction is not (pgbench): both sides come back from the
		// other's round, and that first one pays the wake-up (the
		// process idled through pgbench's round) and not the page.
		if err := getAndDiscard(c, url, ""); err != nil {
			b.Fatal(err)
		}
		var p []time.Duration
		for range round {
			began := time.Now()
			if err := getAndDiscard(c, url, ""); err != nil {
				b.Fatal(err)
			}
			p = append(p, time.Since(began))
		}
		q, err := pgbench(a.store.URL(), script, filepath.Join(dir, fmt.Sprint("r", r)), round)
		if err != nil {
			b.Fatal(err)
		}
		page, bench = append(page, p...), append(bench, q...)
		ratios = append(ratios, quantileMs(p, 0.99)/quantileMs(q, 0.99))
	}
	p50, p99, q50, q99 := quantileMs(page, 0.5), quantileMs(page, 0.99), quantileMs(bench, 0.5), quantileMs(bench, 0.99)
	b.ReportMetric(p50, "page_p50_ms")
	b.ReportMetric(p99, "page_p99_ms")
	b.ReportMetric(q50, "pgbench_p50_ms")
	b.ReportMetric(q99, "pgbench_p99_ms")
	b.ReportMetric(p50/q50, "page/pgbench_p50")
	b.ReportMetric(p99/q99, "page/pgbench_p99")
	b.ReportMetric(slices.Min(ratios), "round_p99_ratio_min")
	b.ReportMetric(slices.Max(ratios), "round_p99_ratio_max")
}

// pgbenchScript is the statements recorded as a pgbench script: one per
// line, each ended with a semicolon.
func pgbenchScript(sqls []string) string {
	var s strings.Builder
	for _, q := range sqls {
		s.WriteString(strings.Join(strings.Fields(q), " "))
		s.WriteString(";\n")
	}
	return s.String()
}

// pgbench runs script n times over one connection to the database at url
// and returns each run's time, from its per-transaction log. A first run
// before them warms the connection (the page's pool is warm), and is not
// counted.
func pgbench(url, script, prefix string, n int) ([]time.Duration, error) {
	cmd := exec.Command(filepath.Join(devdb.PGBinDir, "pgbench"), "-n", "-c", "1", "-t", strconv.Itoa(n+1),
		"-f", script, "-l", "--log-prefix", prefix, url)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgbench: %w: %s", err, out)
	}
	logs, err := filepath.Glob(prefix + ".*")
	if err != nil || len(logs) != 1 {
		return nil, fmt.Errorf("pgbench: logs %v: %v", logs, err)
	}
	f, err := os.Open(logs[0])
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Each line: client, transaction, time in µs, script, epoch, µs.
	var took []time.Duration
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		us, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("pgbench log %q: %w", sc.Text(), err)
		}
		took = append(took, time.Duration(us)*time.Microsecond)
	}
	if len(took) != n+1 {
		return nil, fmt.Errorf("pgbench logged %d transactions, want %d", len(took), n+1)
	}
	return took[1:], sc.Err()
}
