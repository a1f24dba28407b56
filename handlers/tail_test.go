package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store"
)

// waitAll waits until every stream has got the message with seq want.
func waitAll(t *testing.T, conns []*sseConn, want int64) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range conns {
		wg.Go(func() {
			s.read(t, fmt.Sprintf("seq %d", want), 30*time.Second, func(ev testkit.SSEEvent, ok bool) bool {
				if !ok {
					t.Errorf("stream ended before seq %d", want)
					return true
				}
				return ev.Comment == "" && ev.ID == fmt.Sprint(want)
			})
		})
	}
	wg.Wait()
}

// TestStream_ReadsPerWakeupDoNotGrowWithWatchers: N watchers of one run in
// one process share its tail, so each append (one notification, one
// wake-up) costs one store read whether one person watches or a hundred.
// Not parallel: it counts the process's metrics.
func TestStream_ReadsPerWakeupDoNotGrowWithWatchers(t *testing.T) {
	const appends = 10
	reads := map[int]float64{}
	for _, n := range []int{1, 100} {
		a := newStreamApp(t, handlers.Config{Stream: stream.Config{MaxPerUser: n}}, withListener())
		c := a.customerClient(t)
		conns := make([]*sseConn, n)
		for i := range conns {
			conns[i] = a.open(t, c, jsonStreamPath(a.run.ID, "1"), "")
		}
		// Everyone has joined and caught up once seq 2 reached them all.
		a.narrate(t, 1, 1)
		waitAll(t, conns, 2)
		r0, w0 := testutil.ToFloat64(metrics.StreamReads), testutil.ToFloat64(metrics.StreamWakeups)
		for i := range appends {
			a.narrate(t, 2+i, 1)
			waitAll(t, conns, int64(3+i))
		}
		r, w := testutil.ToFloat64(metrics.StreamReads)-r0, testutil.ToFloat64(metrics.StreamWakeups)-w0
		t.Logf("N=%d watchers: %v store reads, %v wake-ups for %d appends (%.2f reads per wake-up)", n, r, w, appends, r/w)
		// One notification may trail the read that already caught up
		// (notices go out after commit): hence appends+1. And the read a
		// wake-up just before the window asked for (a new tail's first
		// read, still in flight as seq 2's notice came) may land inside
		// it: hence w+1.
		if r < 1 || r > appends+1 || r > w+1 {
			t.Errorf("N=%d: %v reads for %d appends and %v wake-ups, want at most one read per wake-up", n, r, appends, w)
		}
		reads[n] = r
	}
	if reads[100] > reads[1]+1 {
		t.Errorf("100 watchers cost %v reads, one watcher %v: want no more", reads[100], reads[1])
	}
}

// TestStream_EncodesOncePerEventAndFormat: the watchers of a run in one
// process get an event's bytes encoded once per stream format (the tail's
// shared stream.Frames), not once per watcher: N watchers of the API's JSON
// and N of the page's HTML cost two encodings per narration event whether N
// is 1 or 10. Not parallel: it counts the process's metrics.
func TestStream_EncodesOncePerEventAndFormat(t *testing.T) {
	const appends = 5
	for _, n := range []int{1, 10} {
		a := newStreamApp(t, handlers.Config{Stream: stream.Config{MaxPerUser: 2 * n}}, withListener())
		c := a.customerClient(t)
		conns := make([]*sseConn, 0, 2*n)
		for range n {
			conns = append(conns, a.open(t, c, jsonStreamPath(a.run.ID, "1"), ""),
				a.open(t, c, htmlStreamPath(a.run.ID, "1"), ""))
		}
		a.narrate(t, 1, 1)
		waitAll(t, conns, 2)
		e0 := testutil.ToFloat64(metrics.StreamEncodes)
		for i := range appends {
			a.narrate(t, 2+i, 1)
			waitAll(t, conns, int64(3+i))
		}
		got := testutil.ToFloat64(metrics.StreamEncodes) - e0
		t.Logf("%d JSON and %d HTML watchers: %v encodings for %d events", n, n, got, appends)
		if got != 2*appends {
			t.Errorf("%d watchers of each format: %v encodings for %d events, want %d (one per event and format)", n, got, appends, 2*appends)
		}
	}
}

// serverGoroutines counts the goroutines of the web server's side of the
// connections and of the handlers.
func serverGoroutines() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("net/http.(*conn).serve")) || bytes.Contains(g, []byte("backgroundRead")) ||
			bytes.Contains(g, []byte("refundd/refundd/handlers.")) {
			n++
		}
	}
	return n
}

// TestStream_IdleStreamGoroutines: an idle stream costs what a bare SSE
// server's does, two goroutines: once detached from the HTTP server
// (sse.go), its own loop and the read that sees the client go; the
// process adds one goroutine (the batched access re-check) for all of
// them. Not
// parallel: it counts the process's goroutines.
func TestStream_IdleStreamGoroutines(t *testing.T) {
	const n = 40
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{MaxPerUser: n}}, withListener())
	c := a.customerClient(t)
	c.CloseIdleConnections()
	// Other tests' servers may still be winding down: count from here.
	before := serverGoroutines()
	conns := make([]*sseConn, n)
	for i := range conns {
		conns[i] = a.open(t, c, jsonStreamPath(a.run.ID, "1"), "")
	}
	a.narrate(t, 1, 1)
	waitAll(t, conns, 2) // all open, caught up and idle again
	// The tail's read goroutine may still be on its way out.
	var got int
	testkit.WaitUntil(t, "the server's goroutines to settle", 10*time.Second, func() bool {
		got = serverGoroutines() - before
		return got <= 2*n+1
	})
	t.Logf("%d server goroutines for %d idle streams (%.2f per stream)", got, n, float64(got)/n)
}

// TestStream_CapsRefuseInWords: at the per-user and the process cap the
// next stream is refused with words and a time to come back (the page's
// stream in SSE form, the API's as 429 JSON), while health checks and
// pages still answer; a stream that closes makes room.
func TestStream_CapsRefuseInWords(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{MaxPerUser: 2, MaxStreams: 3}}, withListener())
	customer := a.customerClient(t)
	held := []*sseConn{
		a.open(t, customer, htmlStreamPath(a.run.ID, "1"), ""),
		a.open(t, customer, jsonStreamPath(a.run.ID, "1"), ""),
	}
	refusedBefore := testutil.ToFloat64(metrics.StreamsRefused.WithLabelValues("user_cap"))

	t.Run("the user's cap, run page", func(t *testing.T) {
		r := a.get(t, customer, htmlStreamPath(a.run.ID, "1"))
		wantBusy(t, r, "You have the most live views one person may have open (2)")
	})
	t.Run("the user's cap, API", func(t *testing.T) {
		r := a.get(t, customer, jsonStreamPath(a.run.ID, "1"))
		wantStatus(t, r, http.StatusTooManyRequests)
		var e apiErr
		if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Error.Code != "too_many_streams" || !strings.Contains(e.Error.Message, "live views") {
			t.Errorf("body = %s, want the too_many_streams error in words", r.body)
		}
		if r.header.Get("Retry-After") != "30" {
			t.Errorf("Retry-After = %q, want 30", r.header.Get("Retry-After"))
		}
	})
	if got := testutil.ToFloat64(metrics.StreamsRefused.WithLabelValues("user_cap")) - refusedBefore; got < 2 {
		t.Errorf("refused streams (user_cap) grew by %v, want 2", got)
	}

	support := a.signedIn(t, "support@example.com")
	held = append(held, a.open(t, support, htmlStreamPath(a.run.ID, "1"), ""))
	t.Run("the process's cap", func(t *testing.T) {
		r := a.get(t, support, htmlStreamPath(a.run.ID, "1"))
		wantBusy(t, r, "The server is following as many runs as it can")
	})
	t.Run("pages and health checks still answer", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz", "/login"} {
			wantStatus(t, a.get(t, a.client(t), path), http.StatusOK)
		}
		wantStatus(t, a.get(t, customer, "/runs/"+a.run.ID.String()), http.StatusOK)
		wantRedirect(t, a.post(t, a.client(t), "/login", url.Values{"email": {"customer2@example.com"}, "password": {devdb.DemoPassword}}), "/")
	})
	t.Run("a closed stream makes room", func(t *testing.T) {
		held[0].cancel()
		testkit.WaitUntil(t, "a stream slot to free", 10*time.Second, func() bool {
			// From 0, an accepted stream sends seq 1 at once.
			s := a.open(t, customer, htmlStreamPath(a.run.ID, "0"), "")
			defer s.cancel()
			return s.next(t).Event != "busy"
		})
	})
}

// TestStream_CapWaitsForAReplacedStream: a page that reconnects (a
// reload, the tabs' shared stream naming one more run) opens its new
// stream while the old one's close is still on its way. At the user's cap
// the new stream waits a moment for one of theirs to leave, and is served
// when one does, instead of being told to come back in 30 seconds.
func TestStream_CapWaitsForAReplacedStream(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{MaxPerUser: 1}}, withListener())
	customer := a.customerClient(t)
	old := a.open(t, customer, htmlStreamPath(a.run.ID, "1"), "")
	type result struct {
		ev  testkit.SSEEvent
		err error
	}
	got := make(chan result, 1)
	go func() {
		// The replacement: from 0, an accepted stream sends seq 1 at once.
		req, _ := http.NewRequest(http.MethodGet, a.srv.URL+htmlStreamPath(a.run.ID, "0"), nil)
		res, err := customer.Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer res.Body.Close()
		for ev, err := range testkit.SSE(res.Body) {
			got <- result{ev, err}
			return
		}
		got <- result{err: fmt.Errorf("the stream ended with no event")}
	}()
	time.Sleep(100 * time.Millisecond) // the replacement is waiting at the cap
	old.cancel()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.ev.Event == "busy" {
			t.Errorf("the replacement was refused: %s", r.ev.Data)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the replacement stream sent nothing")
	}

	// With nothing leaving, the stream over the cap is refused in words.
	held := a.open(t, customer, htmlStreamPath(a.run.ID, "1"), "")
	defer held.cancel()
	wantBusy(t, a.get(t, customer, htmlStreamPath(a.run.ID, "1")), "You have the most live views one person may have open (1)")
}

// wantBusy checks a refused run-page stream: an event stream (so the
// browser's EventSource does not treat it as a failure and hammer) with a
// 30 s retry hint and the busy event carrying the words for the page.
func wantBusy(t *testing.T, r response, words string) {
	t.Helper()
	wantStatus(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type = %q, want an event stream", ct)
	}
	if !strings.Contains(r.body, "retry: 30000\n") {
		t.Errorf("body:\n%s\nwant the retry hint of 30 s", r.body)
	}
	var busy *testkit.SSEEvent
	for ev, err := range testkit.SSE(strings.NewReader(r.body)) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Event == "busy" {
			busy = &ev
		}
	}
	if busy == nil || busy.ID != "" || !strings.Contains(busy.Data, words) || !strings.Contains(busy.Data, `id="stream-indicator"`) {
		t.Errorf("body:\n%s\nwant a busy event without id saying %q in #stream-indicator", r.body, words)
	}
}

// TestStream_BatchedRecheckWakesOnlyTheChanged: the periodic re-check
// (one query for every stream) wakes the streams whose access changed
// without a notification, and leaves the others alone.
func TestStream_BatchedRecheckWakesOnlyTheChanged(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{Recheck: 50 * time.Millisecond}})
	customer, support := a.customerClient(t), a.signedIn(t, "support@example.com")
	mine := []*sseConn{a.open(t, customer, htmlStreamPath(a.run.ID, "1"), ""), a.open(t, customer, jsonStreamPath(a.run.ID, "1"), "")}
	theirs := a.open(t, support, htmlStreamPath(a.run.ID, "1"), "")
	// Taken away without a NOTIFY: only the periodic re-check can see it.
	if _, err := a.db.Exec(`DELETE FROM grants WHERE user_id = $1`, a.customer.ID); err != nil {
		t.Fatal(err)
	}
	for _, s := range mine {
		if ev := s.next(t); ev.Event != "reset" || strings.Contains(ev.Data, "narration") {
			t.Fatalf("got %+v, want the status-only reset", ev)
		}
	}
	if _, err := a.store.RequestCancel(context.Background(), a.run.ID, a.customer.ID); err != nil {
		t.Fatal(err)
	}
	if ev := theirs.next(t); ev.Event != "" || ev.ID != "2" {
		t.Errorf("support's stream got %+v, want seq 2 and no reset", ev)
	}
}

// TestStreams_SeveralRunsOneConnection: GET /streams carries the page
// streams of several runs over one connection, each message's id naming
// its run and seq; a run the user may not see is closed at once, a run
// that finishes is closed while the others go on.
func TestStreams_SeveralRunsOneConnection(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	first, second := a.run, a.startRun(t)
	theirs := a.app.startRun(t, "customer2@example.com", 100)
	c := a.customerClient(t)
	s := a.open(t, c, "/streams?run="+first.ID.String()+":1&run="+second.ID.String()+":1&run="+theirs.ID.String()+":0", "")
	if ev := s.next(t); ev.Event != "close" || ev.ID != theirs.ID.String()+":" || !strings.Contains(ev.Data, "not available to you") {
		t.Fatalf("got %+v, want the other customer's run closed as not available", ev)
	}
	a.narrate(t, 1, 1) // first's seq 2
	if ev := s.next(t); ev.ID != first.ID.String()+":2" || !strings.Contains(ev.Data, "w1") {
		t.Fatalf("got %+v, want the first run's seq 2", ev)
	}
	if _, err := a.store.FinishRun(context.Background(), second.ID, store.StateCanceled, store.Say("Canceled as requested.")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{second.ID.String() + ":2", second.ID.String() + ":3"} {
		if ev := s.next(t); ev.ID != want {
			t.Fatalf("got %+v, want id %s", ev, want)
		}
	}
	if ev := s.next(t); ev.Event != "close" || ev.ID != second.ID.String()+":" || !strings.Contains(ev.Data, "finished") {
		t.Fatalf("got %+v, want the second run closed as finished", ev)
	}
	a.narrate(t, 2, 1) // first's seq 3: the connection goes on
	if ev := s.next(t); ev.ID != first.ID.String()+":3" {
		t.Fatalf("got %+v, want the first run's seq 3", ev)
	}
}

// TestStreams_RequestRefusedInWords: GET /streams follows lone runs; a
// request (a family's parent) named there is closed at once, in words
// that send the page to its own family stream, while the other runs go
// on. It was followed as a lone run: without its refunds, and with a
// family cursor it could not read.
func TestStreams_RequestRefusedInWords(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	fam := a.app.startFamily(t, 100, 200)
	c := a.customerClient(t)
	s := a.open(t, c, "/streams?run="+fam.Parent.ID.String()+":3.1.1&run="+a.run.ID.String()+":1", "")
	if ev := s.next(t); ev.Event != "close" || ev.ID != fam.Parent.ID.String()+":" || !strings.Contains(ev.Data, "its own page") {
		t.Fatalf("got %+v, want the request closed in words", ev)
	}
	a.narrate(t, 1, 1)
	if ev := s.next(t); ev.ID != a.run.ID.String()+":2" {
		t.Fatalf("got %+v, want the lone run's seq 2", ev)
	}
}
