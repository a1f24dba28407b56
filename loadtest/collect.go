package main

// What the watchers receive: each appended event carries its append number
// and the time it was sent ("lt=K.UNIXNANO;" in its narration text), so a
// watcher of either server can tell the latency of every delivery.

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// marker is the text an appended event carries.
func marker(k int64, sent time.Time) string { return fmt.Sprintf("lt=%d.%d;", k, sent.UnixNano()) }

// parseMarkers calls fn for each marker in data.
func parseMarkers(data []byte, fn func(k int64, sent time.Time)) {
	for {
		i := bytes.Index(data, []byte("lt="))
		if i < 0 {
			return
		}
		data = data[i+3:]
		end := bytes.IndexByte(data, ';')
		if end < 0 {
			return
		}
		ks, ns, ok := bytes.Cut(data[:end], []byte("."))
		data = data[end:]
		if !ok {
			continue
		}
		k, err1 := strconv.ParseInt(string(ks), 10, 64)
		n, err2 := strconv.ParseInt(string(ns), 10, 64)
		if err1 == nil && err2 == nil {
			fn(k, time.Unix(0, n))
		}
	}
}

// collector gathers deliveries of one measuring phase.
type collector struct {
	mu     sync.Mutex
	lat    []float64         // ms, every delivery
	events map[int64]*evStat // by append number
	minK   int64             // append numbers below it are history, not this phase's
	dups   int               // deliveries of an event a watcher already had
	order  int               // messages whose id was not above the previous one
}

type evStat struct {
	first float64 // ms, the first watcher's latency
	max   float64 // ms, the last watcher's latency
	n     int     // deliveries
}

func newCollector() *collector { return &collector{events: map[int64]*evStat{}} }

func (c *collector) add(k int64, ms float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lat = append(c.lat, ms)
	e := c.events[k]
	if e == nil {
		e = &evStat{first: ms}
		c.events[k] = e
	}
	e.n++
	e.first, e.max = min(e.first, ms), max(e.max, ms)
}

func (c *collector) problem(dup, order int) {
	c.mu.Lock()
	c.dups += dup
	c.order += order
	c.mu.Unlock()
}

// watcherState is what one watcher remembers to check order and
// duplicates; got lists the append numbers received, when kept (tests).
type watcherState struct {
	lastSeq int64
	seen    map[int64]bool
	got     []int64
	keep    bool
}

// receive records one SSE message.
func (w *watcherState) receive(c *collector, m sseMessage, now time.Time, markers func([]byte, func(int64, time.Time))) {
	if seq, err := strconv.ParseInt(m.id, 10, 64); err == nil && m.id != "" {
		if seq <= w.lastSeq {
			c.problem(0, 1)
		}
		w.lastSeq = seq
	}
	markers(m.data, func(k int64, sent time.Time) {
		if k < c.minK {
			return
		}
		if w.seen[k] {
			c.problem(1, 0)
			return
		}
		w.seen[k] = true
		if w.keep {
			w.got = append(w.got, k)
		}
		c.add(k, float64(now.Sub(sent))/float64(time.Millisecond))
	})
}
