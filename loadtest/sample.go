package main

// Where the time goes while runs mode measures: PostgreSQL's wait events
// sampled from pg_stat_activity, its commit and WAL counters, and the CPU
// of refundd's processes, PostgreSQL's, this program's and the machine's.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

type pgCounters struct{ commits, walRecords, walWrites, walSyncs float64 }

func readPGCounters(ctx context.Context, db *sql.DB) (pgCounters, error) {
	var c pgCounters
	err := db.QueryRowContext(ctx, `SELECT
            (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
            wal_records, wal_write, wal_sync FROM pg_stat_wal`).Scan(&c.commits, &c.walRecords, &c.walWrites, &c.walSyncs)
	if err != nil {
		return c, fmt.Errorf("read pg_stat_wal: %w", err)
	}
	return c, nil
}

// cpuPoint is the CPU seconds used so far by each party.
type cpuPoint struct {
	at                      time.Time
	refundd, postgres, self float64
	machineBusy, machineAll float64
}

type sampler struct {
	db       *sql.DB
	base     string
	pids     []int // refundd's own processes; nil: read /metrics
	pgRoot   int   // the postmaster, 0 if not on this machine
	samples  int
	waits    map[string]int
	from, to time.Time
	cpu      [2]cpuPoint
	pg       [2]pgCounters
}

func (s *sampler) point(ctx context.Context) cpuPoint {
	p := cpuPoint{at: time.Now(), self: cpuOf([]int{os.Getpid()})}
	if s.pids != nil {
		p.refundd = cpuOf(s.pids)
	} else if m, err := scrape(ctx, s.base); err == nil {
		p.refundd = m["process_cpu_seconds_total"]
	}
	if s.pgRoot > 0 {
		p.postgres = familyCPU(s.pgRoot)
	}
	p.machineBusy, p.machineAll = machineCPU()
	return p
}

// machineCPU is the busy and total CPU seconds of the whole machine.
func machineCPU() (busy, all float64) {
	b, _ := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		x, _ := strconv.ParseFloat(v, 64)
		all += x
		if i != 3 && i != 4 { // idle, iowait
			busy += x
		}
	}
	return busy / clockTicks, all / clockTicks
}

// waitQuiet waits, at most 10 s, until the machine has been quiet (under
// 15% of its CPU busy) for 250 ms: the server a round stopped, its
// connections and their PostgreSQL backends take a moment to go, and that
// moment is not the next server's to pay.
func waitQuiet(ctx context.Context) {
	busy0, all0 := machineCPU()
	for range 40 {
		if !sleep(ctx, 250*time.Millisecond) {
			return
		}
		busy, all := machineCPU()
		if all > all0 && (busy-busy0)/(all-all0) < 0.15 {
			return
		}
		busy0, all0 = busy, all
	}
}

// postmasterOf is the PID of db's PostgreSQL postmaster, whose CPU is read
// from /proc (familyCPU); 0 if it does not run on this machine.
func postmasterOf(ctx context.Context, db *sql.DB) int {
	var backend int
	if err := db.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return 0
	}
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", backend))
	if st, err := readProcStat(backend); err == nil && strings.TrimSpace(string(comm)) == "postgres" {
		return st.ppid
	}
	return 0
}

// sampleWindow samples for d: wait events every 100 ms, counters and CPU at
// both ends.
func sampleWindow(ctx context.Context, db *sql.DB, base string, pids []int, d time.Duration) (*sampler, error) {
	s := &sampler{db: db, base: base, pids: pids, waits: map[string]int{}, pgRoot: postmasterOf(ctx, db)}
	var err error
	if s.pg[0], err = readPGCounters(ctx, db); err != nil {
		return nil, err
	}
	s.from = time.Now()
	s.cpu[0] = s.point(ctx)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	end := time.NewTimer(d)
	defer end.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-end.C:
			done = true
		case <-tick.C:
			if err := s.sampleWaits(ctx); err != nil {
				return nil, err
			}
		}
	}
	s.to = time.Now()
	s.cpu[1] = s.point(ctx)
	if s.pg[1], err = readPGCounters(ctx, db); err != nil {
		return nil, err
	}
	return s, nil
}

// sampleWaits counts the active client backends by what they wait on
// ("CPU" when they wait on nothing).
func (s *sampler) sampleWaits(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `
        SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*)
        FROM pg_stat_activity
        WHERE state = 'active' AND backend_type = 'client backend'
          AND datname = current_database() AND pid <> pg_backend_pid()
        GROUP BY 1`)
	if err != nil {
		return fmt.Errorf("sample pg_stat_activity: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ev string
		var n int
		if err := rows.Scan(&ev, &n); err != nil {
			return err
		}
		s.waits[ev] += n
	}
	s.samples++
	return rows.Err()
}

// fill puts the sampled figures into the summary.
func (s *sampler) fill(sum *runsSummary) {
	secs := s.cpu[1].at.Sub(s.cpu[0].at).Seconds()
	pct := func(a, b float64) float64 { return 100 * (b - a) / secs }
	sum.CPU = map[string]float64{
		"refundd":  pct(s.cpu[0].refundd, s.cpu[1].refundd),
		"postgres": pct(s.cpu[0].postgres, s.cpu[1].postgres),
		"loadtest": pct(s.cpu[0].self, s.cpu[1].self),
		// of 200 on two cores, as the others are % of one core
		"machine": 100 * float64(2) * (s.cpu[1].machineBusy - s.cpu[0].machineBusy) / max(s.cpu[1].machineAll-s.cpu[0].machineAll, 1e-9),
	}
	win := s.to.Sub(s.from).Seconds()
	sum.CommitsPerS = (s.pg[1].commits - s.pg[0].commits) / win
	sum.WALSyncsPerS = (s.pg[1].walSyncs - s.pg[0].walSyncs) / win
	sum.WALWritesPerS = (s.pg[1].walWrites - s.pg[0].walWrites) / win
	sum.WALRecordsPerS = (s.pg[1].walRecords - s.pg[0].walRecords) / win
	total := 0
	for _, n := range s.waits {
		total += n
	}
	sum.ActiveBackends = float64(total) / float64(max(s.samples, 1))
	for _, w := range topCounts(s.waits, 8) {
		sum.Waits = append(sum.Waits, waitShare{Event: w.K, Backends: float64(w.N) / float64(max(s.samples, 1))})
	}
	if total > 0 {
		sum.NotifyLockShare = float64(s.waits["Lock:object"]) / float64(total)
	}
}
