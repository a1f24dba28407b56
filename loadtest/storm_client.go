package main

// The storm's clients. Each behaves as a browser's EventSource does across
// a restart: after its stream drops it waits the last retry hint it got,
// then reconnects to the same URL with Last-Event-ID; a refused connect
// waits the hint again. Each keeps a ledger of what it received, so a gap,
// a duplicate or a step back across the reconnect shows.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// defaultRetry is the reconnection time before any "retry:" hint arrived.
const defaultRetry = 2 * time.Second

// headTimeout bounds one connect, up to the response's head: past it the
// attempt counts as failed and the client waits its hint again.
const headTimeout = 30 * time.Second

// esClient is one stream, as one browser tab's EventSource.
type esClient struct {
	s    *storm
	run  int    // index into the storm's runs
	path string // the URL as the page opened it, after= included

	// Only the client's goroutine touches these.
	lastID string
	hint   time.Duration

	mu        sync.Mutex // the ledger and the wave marks, read by the controller
	ledger    streamLedger
	droppedAt time.Time
	resumed   []time.Time // per round: the first connect after a drop in it
}

// loop runs the stream until ctx ends. gate bounds the first connects (a
// page load, not the storm); firstOpen reports the first answer.
func (c *esClient) loop(ctx context.Context, gate chan struct{}, firstOpen func(error)) {
	c.hint = defaultRetry
	first := true
	for ctx.Err() == nil {
		if first {
			select {
			case gate <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
		resp, cancel, err := c.connect(ctx)
		if first {
			<-gate
		}
		if err == nil && (resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")) {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
			resp.Body.Close()
			cancel()
			c.s.refusedBy(resp.StatusCode)
			if first {
				firstOpen(fmt.Errorf("GET %s: %s: %s", c.path, resp.Status, strings.TrimSpace(string(b))))
				return
			}
			// A browser's EventSource gives up on any answer but 200; a
			// page would make a new one. Counted, and tried again after
			// Retry-After (or the hint) so the measurement goes on.
			wait := c.hint
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
				wait = time.Duration(s) * time.Second
			}
			sleep(ctx, wait)
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.s.failedConnect()
			if first {
				firstOpen(err)
				return
			}
			sleep(ctx, c.hint)
			continue
		}
		c.opened(time.Now())
		if first {
			first = false
			firstOpen(nil)
		}
		var word time.Time // the last retry hint or named event, a server's word before it ends
		end := readSSE(resp.Body, func(m sseMessage) bool {
			c.message(m)
			if m.retry != "" || m.event != "" {
				word = time.Now()
			}
			return true
		})
		resp.Body.Close()
		cancel()
		if ctx.Err() != nil {
			return
		}
		c.dropped(time.Now(), errors.Is(end, io.EOF), word)
		sleep(ctx, c.hint)
	}
}

// connect sends the stream's request as an EventSource does; cancel ends
// the connection.
func (c *esClient) connect(ctx context.Context) (*http.Response, context.CancelFunc, error) {
	ctx, cancel := context.WithCancel(ctx)
	h := http.Header{"Accept": {"text/event-stream"}, "Cache-Control": {"no-cache"}}
	if c.lastID != "" {
		h.Set("Last-Event-ID", c.lastID)
	}
	req, err := c.s.api.request(ctx, http.MethodGet, c.path, nil, h)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	timer := time.AfterFunc(headTimeout, cancel)
	resp, err := c.s.api.http.Do(req)
	timer.Stop()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return resp, cancel, nil
}

// message takes what an EventSource takes from a message: the hint, the
// last id; and records the deliveries.
func (c *esClient) message(m sseMessage) {
	if m.retry != "" {
		// The spec ignores a value that is not all ASCII digits.
		if ms, err := strconv.ParseUint(m.retry, 10, 63); err == nil {
			c.hint = time.Duration(ms) * time.Millisecond
			c.s.sawHint(int64(ms))
		}
	}
	if m.id != "" {
		c.lastID = m.id
	}
	c.mu.Lock()
	c.ledger.message(m.id, m.data)
	c.mu.Unlock()
}

// opened marks the stream resumed in the current wave if it dropped in it.
func (c *esClient) opened(at time.Time) {
	w := c.s.cur.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if w != nil && !c.droppedAt.IsZero() && !c.droppedAt.Before(w.sigAt) && c.resumed[w.idx].IsZero() {
		c.resumed[w.idx] = at
		w.resumed.Add(1)
	}
}

// dropped records the end of a connection: clean is a stream ended by the
// server (the body's last chunk), word the last hint or named event got
// on it.
func (c *esClient) dropped(at time.Time, clean bool, word time.Time) {
	w := c.s.cur.Load()
	c.mu.Lock()
	first := w != nil && (c.droppedAt.IsZero() || c.droppedAt.Before(w.sigAt)) && !at.Before(w.sigAt)
	c.droppedAt = at
	c.mu.Unlock()
	if !first {
		return
	}
	w.dropped.Add(1)
	if clean {
		w.clean.Add(1)
	}
	if !word.Before(w.sigAt) {
		w.worded.Add(1)
	}
}

// has says whether the stream got every append number in sent.
func (c *esClient) has(sent []int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range sent {
		if c.ledger.got[k] == 0 {
			return false
		}
	}
	return true
}

// streamLedger is what one stream received, across its reconnects.
type streamLedger struct {
	last     int64 // the last id, when hasLast
	hasLast  bool
	backward int           // messages whose id was not above the one before
	got      map[int64]int // append number → times received
}

// message records one message: its id (a seq) and the append markers in
// its data.
func (l *streamLedger) message(id string, data []byte) {
	if seq, err := strconv.ParseInt(id, 10, 64); err == nil {
		if l.hasLast && seq <= l.last {
			l.backward++
		}
		l.last, l.hasLast = seq, true
	}
	parseMarkers(data, func(k int64, _ time.Time) {
		if l.got == nil {
			l.got = map[int64]int{}
		}
		l.got[k]++
	})
}

// account compares what the stream got with sent, the append numbers
// committed to its run: gaps are those it never got, duplicates the
// deliveries beyond the first, unknown the numbers it got that were not
// committed as far as the appender knows (an append that failed late).
func (l *streamLedger) account(sent []int64) (gaps, duplicates, unknown int) {
	want := make(map[int64]bool, len(sent))
	for _, k := range sent {
		want[k] = true
		if l.got[k] == 0 {
			gaps++
		}
	}
	for k, n := range l.got {
		duplicates += n - 1
		if !want[k] {
			unknown++
		}
	}
	return gaps, duplicates, unknown
}

// resumeStats is how the streams of one wave came back, in seconds from
// the new server's first answer to /readyz.
type resumeStats struct {
	Streams int     `json:"streams"`
	Resumed int     `json:"resumed"`
	P50     float64 `json:"p50_s"`
	P99     float64 `json:"p99_s"`
	Max     float64 `json:"max_s"`
	// T99 is when 99% of all the streams (not only those that came back)
	// had resumed; nil if they never did.
	T99 *float64 `json:"t99_s"`
	// Early is how many resumed before /readyz answered; they count 0.
	Early int `json:"early"`
}

// resumeOf computes the stats of the resume times of n streams (zero
// times: not resumed) from ready.
func resumeOf(ready time.Time, resumed []time.Time, n int) resumeStats {
	r := resumeStats{Streams: n}
	var ds []float64
	for _, at := range resumed {
		if at.IsZero() {
			continue
		}
		d := at.Sub(ready).Seconds()
		if d < 0 {
			d = 0
			r.Early++
		}
		ds = append(ds, d)
	}
	r.Resumed = len(ds)
	if len(ds) == 0 {
		return r
	}
	slices.Sort(ds)
	r.P50, r.P99, r.Max = quantile(ds, 0.5), quantile(ds, 0.99), ds[len(ds)-1]
	if need := int(math.Ceil(0.99 * float64(n))); need >= 1 && need <= len(ds) {
		t := ds[need-1]
		r.T99 = &t
	}
	return r
}
