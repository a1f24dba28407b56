package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A stream that replays an event it had, skips one and steps back must
// show each, or a storm that loses events would pass.
func TestStreamLedger_GapDuplicateAndBackwardSeqAcrossReconnect(t *testing.T) {
	t.Parallel()
	var l streamLedger
	l.message("", nil)                                   // a retry hint alone
	l.message("11", []byte(`{"text":"lt=0.1;"}`))        // append 0
	l.message("12", []byte(`{"text":"lt=1.1;lt=3.1;"}`)) // coalesced: 1 and 3
	// The reconnect resumes after 12 but the server replays 12 again.
	l.message("12", []byte(`{"text":"lt=1.1;lt=3.1;"}`))
	l.message("14", []byte(`{"text":"lt=5.1;"}`))
	l.message("13", []byte(`{"text":"lt=9.1;"}`)) // backward, and not committed as far as anyone knows
	gaps, dups, unknown := l.account([]int64{0, 1, 3, 4, 5})
	if gaps != 1 || dups != 2 || unknown != 1 {
		t.Errorf("gaps, duplicates, unknown = %d, %d, %d; want 1 (append 4), 2 (1 and 3 again), 1 (append 9)", gaps, dups, unknown)
	}
	if got, want := l.backward, 2; got != want {
		t.Errorf("backward = %d, want %d (12 after 12, 13 after 14)", got, want)
	}
}

func TestStreamLedger_CleanStreamHasNothingToReport(t *testing.T) {
	t.Parallel()
	var l streamLedger
	for k := range int64(5) {
		l.message(fmt.Sprint(100+k), []byte(marker(k, time.Unix(0, 1))))
	}
	gaps, dups, unknown := l.account([]int64{0, 1, 2, 3, 4})
	if gaps+dups+unknown+l.backward != 0 {
		t.Errorf("gaps %d, duplicates %d, unknown %d, backward %d; want none", gaps, dups, unknown, l.backward)
	}
}

func TestResumeOf_PercentilesAndTimeTo99PercentOfAllStreams(t *testing.T) {
	t.Parallel()
	ready := time.Unix(1000, 0)
	at := func(ms int) time.Time { return ready.Add(time.Duration(ms) * time.Millisecond) }
	resumed := make([]time.Time, 200)
	for i := range resumed {
		resumed[i] = at((i + 1) * 10) // 10 ms … 2000 ms
	}
	resumed[0] = at(-50) // before /readyz answered: counts 0
	r := resumeOf(ready, resumed, 200)
	if r.Resumed != 200 || r.Early != 1 {
		t.Errorf("resumed %d, early %d; want 200, 1", r.Resumed, r.Early)
	}
	if r.P50 != 1.0 || r.P99 != 1.98 || r.Max != 2.0 {
		t.Errorf("p50, p99, max = %v, %v, %v; want 1, 1.98, 2", r.P50, r.P99, r.Max)
	}
	if r.T99 == nil || *r.T99 != 1.98 {
		t.Errorf("t99 = %v, want 1.98 (the 198th of 200)", secs(r.T99))
	}

	t.Run("streams that never came back count against the 99%", func(t *testing.T) {
		resumed := make([]time.Time, 200)
		for i := range 197 {
			resumed[i] = at(100)
		}
		r := resumeOf(ready, resumed, 200)
		if r.T99 != nil {
			t.Errorf("t99 = %v with 3 of 200 streams missing, want never", secs(r.T99))
		}
		if r.P99 != 0.1 || r.Resumed != 197 {
			t.Errorf("p99 of those back %v, resumed %d; want 0.1, 197", r.P99, r.Resumed)
		}
	})
	t.Run("none back", func(t *testing.T) {
		r := resumeOf(ready, make([]time.Time, 3), 3)
		if r.T99 != nil || r.Resumed != 0 || r.Max != 0 {
			t.Errorf("got %+v, want nothing resumed", r)
		}
	})
}

// An EventSource takes the hint and the last id even from a message that
// dispatches nothing.
func TestReadSSE_PassesRetryAndIDOnlyMessages(t *testing.T) {
	t.Parallel()
	in := "retry: 2500\n\n: heartbeat\n\nid: 7\n\nid: 8\nevent: close\ndata: {}\n\n"
	var got []sseMessage
	readSSE(strings.NewReader(in), func(m sseMessage) bool { got = append(got, m); return true })
	want := []sseMessage{{retry: "2500"}, {id: "7"}, {id: "8", event: "close", data: []byte("{}")}}
	if len(got) != len(want) {
		t.Fatalf("got %d messages %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i].retry != want[i].retry || got[i].id != want[i].id || got[i].event != want[i].event || !bytes.Equal(got[i].data, want[i].data) {
			t.Errorf("message %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestProbeWindow_AnsweredLatenciesAndFailuresInTheWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	samples := []probeSample{
		{at: t0.Add(-time.Second), lat: 9 * time.Second, ok: true}, // before
		{at: t0, lat: 5 * time.Millisecond, ok: false},             // refused
		{at: t0.Add(100 * time.Millisecond), lat: 20 * time.Millisecond, ok: true},
		{at: t0.Add(200 * time.Millisecond), lat: 400 * time.Millisecond, ok: true},
		{at: t0.Add(3 * time.Second), lat: time.Second, ok: true}, // after
	}
	got := probeWindow(samples, t0, t0.Add(time.Second))
	want := probeStats{Samples: 3, Failed: 1, P50MS: 20, P99MS: 400, MaxMS: 400}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestHintsOf_DistinctMinMax(t *testing.T) {
	t.Parallel()
	h := hintsOf(map[int64]int{2000: 5, 1200: 1, 4800: 2})
	if h.Distinct != 3 || h.MinMS != 1200 || h.MaxMS != 4800 || h.Counts["2000"] != 5 {
		t.Errorf("got %+v, want 3 distinct, 1200–4800, 2000 five times", h)
	}
}

// The client behaves as a browser's EventSource across a cut: it waits the
// hint it was given, reconnects with Last-Event-ID, and waits the hint
// again after a refused attempt.
func TestEventSource_ReconnectsAfterTheHintWithLastEventID(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type req struct {
		at     time.Time
		lastID string
	}
	var mu sync.Mutex
	var reqs []req
	third := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, req{time.Now(), r.Header.Get("Last-Event-ID")})
		n := len(reqs)
		mu.Unlock()
		switch n {
		case 1: // a hint and two events, then the cut
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "retry: 150\n\nid: 4\ndata: lt=0.1;\n\nid: 5\ndata: lt=1.1;\n\n")
		case 2: // the server still down: no stream
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: 6\ndata: lt=2.1;\n\n")
			w.(http.Flusher).Flush()
			if n == 3 {
				close(third)
			}
			<-r.Context().Done()
		}
	}))
	defer srv.Close()

	s := &storm{o: &options{}, api: newAPIClient(srv.URL, newTransport()), hints: map[int64]int{}, refusals: map[int]int{}}
	w := &wave{sigAt: time.Now()}
	s.cur.Store(w)
	c := &esClient{s: s, path: "/s?after=3", resumed: make([]time.Time, 1)}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.loop(sctx, make(chan struct{}, 1), func(error) {})
	}()
	select {
	case <-third:
	case <-ctx.Done():
		t.Fatal("no third request within 30 s")
	}
	// The client has it once its ledger holds the third event.
	for !c.has([]int64{0, 1, 2}) {
		if !sleep(ctx, 5*time.Millisecond) {
			t.Fatal("the client did not get the event after the reconnect within 30 s")
		}
	}
	stop()
	<-done

	mu.Lock()
	defer mu.Unlock()
	if got, want := []string{reqs[0].lastID, reqs[1].lastID, reqs[2].lastID}, []string{"", "5", "5"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Last-Event-ID of the requests = %q, want %q", got, want)
	}
	for i := 1; i < 3; i++ {
		if gap := reqs[i].at.Sub(reqs[i-1].at); gap < 150*time.Millisecond {
			t.Errorf("request %d came %s after the one before, want at least the 150 ms hint", i+1, gap)
		}
	}
	if w.dropped.Load() != 1 || w.clean.Load() != 1 || w.resumed.Load() != 1 || w.nonStreamOK.Load() != 1 {
		t.Errorf("dropped %d, clean %d, resumed %d, refused %d; want 1 each", w.dropped.Load(), w.clean.Load(), w.resumed.Load(), w.nonStreamOK.Load())
	}
	if gaps, dups, _ := c.ledger.account([]int64{0, 1, 2}); gaps != 0 || dups != 0 || c.ledger.backward != 0 {
		t.Errorf("gaps %d, duplicates %d, backward %d; want none", gaps, dups, c.ledger.backward)
	}
	if s.hints[150] != 1 {
		t.Errorf("hints seen %v, want 150 ms once", s.hints)
	}
}

func TestFlags_StormRefusedInWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-mode", "storm", "-signal", "hup"}, `-signal must be kill or term, got "hup"`},
		{[]string{"-mode", "storm", "-url", "http://127.0.0.1:8080", "-database-url", "postgres://x"}, "-mode storm kills and restarts a serve of its own: it takes no -url"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
