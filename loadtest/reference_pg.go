package main

// The outside reference's PostgreSQL path: with -reference, -appender
// durable and several runs, the bare rounds run the reference's appender
// (one commit per append with its NOTIFY, -sync on: flushed, as refundd's
// business events are) against a database of its own in the load test's
// cluster, and its server in -pg mode (one LISTEN, one read per woken
// topic, fanned out to that topic's watchers). Each of the load test's
// runs is one of its topics, so the watchers spread over them as over
// refundd's runs; refundd's rounds are unchanged.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// referenceDB is the reference's database in the load test's cluster.
const referenceDB = "perfref"

// referenceSchema is the tables the reference's appender and server use.
const referenceSchema = `
CREATE TABLE runs (id bigint PRIMARY KEY, last_seq bigint NOT NULL DEFAULT 0);
CREATE TABLE run_events (run_id bigint NOT NULL REFERENCES runs, seq bigint NOT NULL, type text NOT NULL,
    payload jsonb NOT NULL, created_at timestamptz NOT NULL, PRIMARY KEY (run_id, seq));`

// pgReference says whether the bare rounds run the reference's PostgreSQL
// path rather than its hub.
func (o *options) pgReference() bool {
	return o.reference != "" && o.appender == "durable" && o.rate > 0 && o.runs > 1
}

// referenceDatabase makes the reference's database afresh, with topics
// 1..runs, and returns its URL.
func (e *env) referenceDatabase(ctx context.Context, runs int) (string, error) {
	if e.o.url != "" {
		return "", fmt.Errorf("the reference's PostgreSQL path needs the load test's own cluster (no -url)")
	}
	admin, err := sqlx.Open("postgres", e.dbURL)
	if err != nil {
		return "", err
	}
	defer admin.Close()
	for _, q := range []string{`DROP DATABASE IF EXISTS ` + referenceDB + ` WITH (FORCE)`, `CREATE DATABASE ` + referenceDB} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			return "", fmt.Errorf("the reference's database: %s: %w", q, err)
		}
	}
	u, err := url.Parse(e.dbURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + referenceDB
	db, err := sqlx.Open("postgres", u.String())
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, referenceSchema); err != nil {
		return "", fmt.Errorf("the reference's schema: %w", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO runs (id) SELECT generate_series(1, $1::int)`, runs); err != nil {
		return "", fmt.Errorf("the reference's topics: %w", err)
	}
	return u.String(), nil
}

// topics numbers the load test's runs as the reference's topics, 1 up, in
// the order the watchers first ask.
type topics struct {
	mu  sync.Mutex
	of  map[uuid.UUID]int
	run []uuid.UUID // by topic - 1
}

func (t *topics) topic(id uuid.UUID) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.of[id]
	if !ok {
		t.run = append(t.run, id)
		n = len(t.run)
		t.of[id] = n
	}
	return n
}

// pgReferenceTarget points the reference's server, started on dsn, at the
// load test's runs and has its appender publish.
func (e *env) pgReferenceTarget(t *target, dsn string) {
	tp := &topics{of: map[uuid.UUID]int{}}
	t.path = func(id uuid.UUID) string { return "/events?topic=" + strconv.Itoa(tp.topic(id)) + "&" }
	t.publish = func(ctx context.Context, rate float64, d time.Duration) (int, map[uuid.UUID]int, error) {
		return e.referenceAppend(ctx, dsn, rate, d, tp)
	}
	t.markers = appenderMarkers
}

// appenderLine is the summary the reference's appender prints.
var appenderLine = regexp.MustCompile(`APPENDER .*`)

// referenceAppend runs the reference's appender at rate for d over the
// topics, prints its summary (its own commit latencies among it), and
// returns how many it appended to each run.
func (e *env) referenceAppend(ctx context.Context, dsn string, rate float64, d time.Duration, tp *topics) (int, map[uuid.UUID]int, error) {
	bin, err := e.referenceBinary(ctx, "appender")
	if err != nil {
		return 0, nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "-pg", dsn, "-rate", strconv.FormatFloat(rate, 'f', -1, 64),
		"-runs", strconv.Itoa(e.o.runs), "-workers", "8", "-dur", d.String(), "-sync", "on")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, nil, fmt.Errorf("the reference's appender: %w: %s", err, out)
	}
	m := appenderLine.Find(out)
	if m == nil {
		return 0, nil, fmt.Errorf("the reference's appender printed no summary: %s", out)
	}
	fmt.Fprintf(e.progress, "loadtest: reference %s\n", bytes.TrimSpace(m))
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		return 0, nil, err
	}
	defer db.Close()
	var rows []struct {
		Topic int `db:"run_id"`
		N     int `db:"n"`
	}
	if err := db.SelectContext(ctx, &rows, `SELECT run_id, count(*) AS n FROM run_events GROUP BY run_id`); err != nil {
		return 0, nil, fmt.Errorf("the reference's appends: %w", err)
	}
	perRun, total := map[uuid.UUID]int{}, 0
	tp.mu.Lock()
	for _, r := range rows {
		total += r.N
		if r.Topic >= 1 && r.Topic <= len(tp.run) {
			perRun[tp.run[r.Topic-1]] += r.N
		}
	}
	tp.mu.Unlock()
	return total, perRun, nil
}

// appenderMarkers reads the reference appender's payload, {"t":UNIX_NANO,…}:
// when the append was due, which also numbers it.
func appenderMarkers(data []byte, fn func(k int64, sent time.Time)) {
	var m struct {
		T int64 `json:"t"`
	}
	if json.Unmarshal(data, &m) == nil && m.T > 0 {
		fn(m.T, time.Unix(0, m.T))
	}
}

// referenceBinary builds the reference's command pkg (server, appender)
// into the load test's folder, once.
func (e *env) referenceBinary(ctx context.Context, pkg string) (string, error) {
	bin := filepath.Join(e.dir, "reference-"+pkg)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./"+pkg)
	cmd.Dir = e.o.reference
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build the reference's %s in %s: %v: %s", pkg, e.o.reference, err, out)
	}
	return bin, nil
}
