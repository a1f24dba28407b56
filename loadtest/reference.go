package main

// The outside reference (../shared/perf-reference, written outside the
// project): with -reference DIR the watchers mode's bare rounds run that
// reference's hub server instead of the load test's own bare server, opened
// by the same client as refundd, so "N× the reference" means what it means
// in every other measurement of the project. In hub mode its server reads
// nothing from PostgreSQL: with -rate above 0 it publishes its own events
// to all its watchers (one run, -runs 1), refundd's come from the load
// test's appends as always. With -appender durable over several runs its
// appender and its server's PostgreSQL path stand in (reference_pg.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
)

// startReference builds the reference's server into the load test's folder
// (once) and starts it on a free loopback port: in hub mode, or on its
// PostgreSQL path (reference_pg.go) when options.pgReference says.
func (e *env) startReference(ctx context.Context) (*target, error) {
	bin, err := e.referenceBinary(ctx, "server")
	if err != nil {
		return nil, err
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	args, dsn := []string{bin, "-addr", addr}, ""
	if e.o.pgReference() {
		if dsn, err = e.referenceDatabase(ctx, e.o.runs); err != nil {
			return nil, err
		}
		args = append(args, "-pg", dsn, "-workers", "4")
	}
	e.seq++
	log := filepath.Join(e.dir, fmt.Sprintf("%02d-reference.log", e.seq))
	p, err := startProc(ctx, "reference server", args, os.Environ(), "", log)
	if err != nil {
		return nil, err
	}
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := referenceStats(ctx, base); err == nil {
			break
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("the reference server did not answer /stats within 30 s: %v: %s", err, p.lastLog())
		}
	}
	t := &target{name: "bare", base: base, client: newAPIClient(base, newTransport()), stop: p.stop,
		path:   func(id uuid.UUID) string { return "/events?topic=" + id.String() + "&" },
		scrape: func(ctx context.Context) (map[string]float64, error) { return referenceStats(ctx, base) }}
	switch {
	case dsn != "":
		e.pgReferenceTarget(t, dsn)
	case e.o.rate > 0:
		// Every watcher on the hub's one broadcast topic, which its own
		// publisher feeds: the cheapest fan-out there is.
		t.path = func(uuid.UUID) string { return "/events?topic=all&" }
		t.publish = func(ctx context.Context, rate float64, d time.Duration) (int, map[uuid.UUID]int, error) {
			return referencePublish(ctx, base, rate, d)
		}
		t.markers = referenceMarkers
	}
	return t, nil
}

// referencePublish has the hub publish rate events a second to its
// broadcast topic for d, and returns how many it published.
func referencePublish(ctx context.Context, base string, rate float64, d time.Duration) (int, map[uuid.UUID]int, error) {
	n, err := hubPublish(ctx, base, rate, d)
	return n, nil, err
}

func hubPublish(ctx context.Context, base string, rate float64, d time.Duration) (int, error) {
	published := func() (float64, error) {
		m, err := referenceStats(ctx, base)
		return m["published"], err
	}
	setRate := func(r float64) error {
		resp, err := getOK(ctx, fmt.Sprintf("%s/rate?eps=%g&topics=0", base, r))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	p0, err := published()
	if err != nil {
		return 0, err
	}
	if err := setRate(rate); err != nil {
		return 0, err
	}
	sleep(ctx, d)
	if err := setRate(0); err != nil {
		return 0, err
	}
	p1, err := published()
	return int(p1 - p0), err
}

// referenceMarkers reads the hub's message, {"seq":N,"t":UNIX_NANO,…}: its
// number and when it was published.
func referenceMarkers(data []byte, fn func(k int64, sent time.Time)) {
	var m struct {
		Seq int64 `json:"seq"`
		T   int64 `json:"t"`
	}
	if json.Unmarshal(data, &m) == nil && m.Seq > 0 && m.T > 0 {
		fn(m.Seq, time.Unix(0, m.T))
	}
}

// referenceStats reads the reference server's /stats as the names the
// load test reads from refundd's /metrics. It counts no allocations: the
// allocation row stays refundd's alone.
func referenceStats(ctx context.Context, base string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := getOK(ctx, base+"/stats")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var s struct {
		RSSKB      float64 `json:"rss_kb"`
		CPUms      float64 `json:"cpu_ms"`
		Goroutines float64 `json:"goroutines"`
		Published  float64 `json:"published"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, fmt.Errorf("GET %s/stats: %w", base, err)
	}
	return map[string]float64{
		"process_resident_memory_bytes": s.RSSKB * 1024,
		"process_cpu_seconds_total":     s.CPUms / 1000,
		"go_goroutines":                 s.Goroutines,
		"published":                     s.Published,
	}, nil
}

var errReferenceRate = errors.New("-reference is for the watchers mode, and with -rate above 0 for one run (-runs 1: its hub broadcasts its own events to every watcher) or for -appender durable (its appender and its server's PostgreSQL path)")
