package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// streamApp is a test's server and a run of customer@example.com's.
type streamApp struct {
	*app
	customer *store.User
	run      *store.Run
}

func newStreamApp(t *testing.T, cfg handlers.Config, opts ...appOption) *streamApp {
	t.Helper()
	a := newApp(t, cfg, opts...)
	sa := &streamApp{app: a, customer: a.user(t, "customer@example.com")}
	sa.run = sa.startRun(t)
	return sa
}

func (a *streamApp) startRun(t testing.TB) *store.Run {
	t.Helper()
	ctx := context.Background()
	orders, err := a.store.OrdersByCustomer(ctx, a.customer.ID)
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := a.store.StartRun(ctx, store.StartRequest{OwnerID: a.customer.ID, ClientRequestID: uuid.NewString(),
		OrderID: orders[0].ID, Amount: 500, Reason: "arrived broken"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// narrate appends n narration deltas, "w1 " … "wn ", numbered from first.
func (a *streamApp) narrate(t testing.TB, first, n int) {
	t.Helper()
	evs := make([]store.NewEvent, 0, n)
	for i := first; i < first+n; i++ {
		evs = append(evs, store.EventOf(store.NarrationDelta{Text: fmt.Sprintf("w%d ", i)}))
	}
	if _, err := a.store.Append(context.Background(), a.run.ID, evs...); err != nil {
		t.Fatal(err)
	}
}

func (a *streamApp) lastSeq(t testing.TB) int64 {
	t.Helper()
	r, err := a.store.RunByID(context.Background(), a.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r.LastSeq
}

// expire ages every narration row past the replay window and prunes.
func (a *streamApp) expire(t testing.TB) {
	t.Helper()
	if _, err := a.db.Exec(`UPDATE run_events SET created_at = now() - interval '2 hours' WHERE run_id = $1`, a.run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.Prune(context.Background(), store.Retention{Presentation: time.Hour}); err != nil {
		t.Fatal(err)
	}
}

// sseConn is an open stream read in the background.
type sseConn struct {
	res    *http.Response
	events chan testkit.SSEEvent
	cancel context.CancelFunc
}

// open connects to a stream as c; lastEventID "" sends none.
func (a *streamApp) open(t testing.TB, c *http.Client, path, lastEventID string) *sseConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	res, err := c.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &sseConn{res: res, events: make(chan testkit.SSEEvent, 100000), cancel: cancel}
	t.Cleanup(func() { cancel(); res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		return s
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type = %q, want text/event-stream", ct)
	}
	go testkit.ReadSSE(res.Body, s.events)
	return s
}

// read hands what arrives on the stream to take, ok false once it has
// ended, until take says it has what it waited for; after timeout the test
// fails naming what.
func (s *sseConn) read(t testing.TB, what string, timeout time.Duration, take func(ev testkit.SSEEvent, ok bool) (done bool)) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-s.events:
			if take(ev, ok) {
				return
			}
		case <-deadline:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// next returns the next message (skipping comments), failing after 20 s:
// the machine the suite runs on is shared, and a wake-up can wait there.
func (s *sseConn) next(t testing.TB) testkit.SSEEvent {
	t.Helper()
	var msg testkit.SSEEvent
	s.read(t, "a stream message", 20*time.Second, func(ev testkit.SSEEvent, ok bool) bool {
		if !ok {
			t.Fatal("the stream ended; want another message")
		}
		msg = ev
		return ev.Comment == ""
	})
	return msg
}

// wantEnd waits for the server to end the stream.
func (s *sseConn) wantEnd(t testing.TB) {
	t.Helper()
	s.read(t, "the stream to end", 10*time.Second, func(ev testkit.SSEEvent, ok bool) bool {
		if ok && ev.Comment == "" {
			t.Fatalf("got %+v, want the stream to end", ev)
		}
		return !ok
	})
}

// wantHeartbeat waits for a heartbeat comment.
func (s *sseConn) wantHeartbeat(t testing.TB) {
	t.Helper()
	s.read(t, "a heartbeat comment", 5*time.Second, func(ev testkit.SSEEvent, ok bool) bool {
		if !ok {
			t.Fatal("the stream ended; want a heartbeat comment")
		}
		return ev.Comment == "ping"
	})
}

// seqsUntil reads messages until one has seq last, checking each is the
// next seq after from: exactly once, in order.
func (s *sseConn) seqsUntil(t testing.TB, from, last int64) {
	t.Helper()
	want := from + 1
	for want <= last {
		ev := s.next(t)
		if ev.Event != "" {
			t.Fatalf("got event %q (id %s), want the message with seq %d", ev.Event, ev.ID, want)
		}
		if got := ev.Seq(t); got != want {
			t.Fatalf("seq = %d, want %d (each seq once, in order)", got, want)
		}
		want++
	}
}

func (a *streamApp) customerClient(t *testing.T) *http.Client {
	t.Helper()
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	return c
}

func jsonStreamPath(runID uuid.UUID, after string) string {
	p := "/api/runs/" + runID.String() + "/stream"
	if after != "" {
		p += "?after=" + after
	}
	return p
}

func htmlStreamPath(runID uuid.UUID, after string) string {
	return "/runs/" + runID.String() + "/events?after=" + after
}

func TestStream_ReplayThenLive(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{PageSize: 7}}, withListener())
	c := a.customerClient(t)
	a.narrate(t, 1, 20) // seq 2..21: replay crosses pages of 7

	s := a.open(t, c, jsonStreamPath(a.run.ID, "0"), "")
	first := s.next(t)
	var ev store.Event
	if err := json.Unmarshal([]byte(first.Data), &ev); err != nil {
		t.Fatalf("data is not the event JSON: %v\n%s", err, first.Data)
	}
	if ev.Seq != 1 || ev.Type != store.EventRunCreated || ev.RunID != a.run.ID || ev.Class != store.ClassBusiness || first.ID != "1" {
		t.Errorf("first message = id %s %+v, want seq 1 run.created of the run", first.ID, ev)
	}
	s.seqsUntil(t, 1, 21)

	t.Run("live after the replay", func(t *testing.T) {
		a.narrate(t, 21, 3)
		s.seqsUntil(t, 21, 24)
	})
	t.Run("HTML stream sends the page's fragments", func(t *testing.T) {
		h := a.open(t, c, htmlStreamPath(a.run.ID, "23"), "")
		msg := h.next(t)
		if msg.ID != "24" || !strings.Contains(msg.Data, `hx-swap-oob="beforeend:#narration"`) ||
			!strings.Contains(msg.Data, `id="n-24"`) || !strings.Contains(msg.Data, "w23 ") {
			t.Errorf("message = %+v, want narration seq 24 appended to #narration", msg)
		}
		if _, err := a.store.RequestCancel(context.Background(), a.run.ID, a.customer.ID); err != nil {
			t.Fatal(err)
		}
		msg = h.next(t)
		for _, want := range []string{`id="ev-25"`, `id="run-status" class="card status" data-state="created" hx-swap-oob="true"`, `id="cancel-note"`, "Cancel requested"} {
			if !strings.Contains(msg.Data, want) {
				t.Errorf("cancel message lacks %q:\n%s", want, msg.Data)
			}
		}
	})
}

func TestStream_LastEventIDWinsOverAfter(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	c := a.customerClient(t)
	a.narrate(t, 1, 9) // seq 2..10
	for _, path := range []string{jsonStreamPath(a.run.ID, "2"), htmlStreamPath(a.run.ID, "2")} {
		t.Run(path, func(t *testing.T) {
			s := a.open(t, c, path, "6")
			s.seqsUntil(t, 6, 10)
		})
	}
	t.Run("after= without Last-Event-ID", func(t *testing.T) {
		s := a.open(t, c, jsonStreamPath(a.run.ID, "8"), "")
		s.seqsUntil(t, 8, 10)
	})
}

// TestStream_AppendsRaceTheHandOver connects while thousands of events are
// appended: every subscriber gets 1..N exactly once, in order, whether it
// joined before, during or after the appends.
func TestStream_AppendsRaceTheHandOver(t *testing.T) {
	t.Parallel()
	// A buffer that never fills, so no narration is coalesced and every
	// seq must arrive as its own message.
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{PageSize: 50, Buffer: 10000, BufferBytes: 64 << 20}}, withListener())
	c := a.customerClient(t)
	const batches, perBatch = 300, 10
	total := int64(1 + batches*perBatch)

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range batches {
			evs := make([]store.NewEvent, perBatch)
			for j := range evs {
				evs[j] = store.EventOf(store.NarrationDelta{Text: fmt.Sprint(i, j)})
			}
			if _, err := a.store.Append(context.Background(), a.run.ID, evs...); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// Join at spread points of the appends: before, during, near the end.
	var conns []*sseConn
	for i := range 6 {
		join := int64(i) * total / 7
		testkit.WaitUntil(t, fmt.Sprintf("the appends to reach seq %d", join), 30*time.Second, func() bool { return a.lastSeq(t) >= join })
		path := jsonStreamPath(a.run.ID, "0")
		if i%2 == 1 {
			path = htmlStreamPath(a.run.ID, "0")
		}
		conns = append(conns, a.open(t, c, path, ""))
	}
	<-done
	conns = append(conns, a.open(t, c, jsonStreamPath(a.run.ID, "0"), ""))
	var wg sync.WaitGroup
	for i, s := range conns {
		wg.Go(func() {
			t.Run(fmt.Sprintf("subscriber %d", i), func(t *testing.T) { s.seqsUntil(t, 0, total) })
		})
	}
	wg.Wait()
}

func TestStream_CursorExpired(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	c := a.customerClient(t)
	a.narrate(t, 1, 5) // seq 2..6
	a.expire(t)
	covering := a.lastSeq(t)

	t.Run("JSON", func(t *testing.T) {
		s := a.open(t, c, jsonStreamPath(a.run.ID, "1"), "")
		ev := s.next(t)
		if ev.Event != "reset" || ev.Seq(t) != covering {
			t.Fatalf("got %q id %s, want reset with id %d", ev.Event, ev.ID, covering)
		}
		var snap struct {
			Run struct {
				ID    uuid.UUID `json:"id"`
				State string    `json:"state"`
			} `json:"run"`
			CoveringSeq int64 `json:"covering_seq"`
			ReplayFloor int64 `json:"replay_floor"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &snap); err != nil {
			t.Fatal(err)
		}
		if snap.Run.ID != a.run.ID || snap.CoveringSeq != covering || snap.ReplayFloor != covering {
			t.Errorf("snapshot = %+v, want run %s covering %d", snap, a.run.ID, covering)
		}
		a.narrate(t, 6, 1)
		s.seqsUntil(t, covering, covering+1)
	})
	t.Run("HTML", func(t *testing.T) {
		s := a.open(t, c, htmlStreamPath(a.run.ID, "0"), "")
		ev := s.next(t)
		if ev.Event != "reset" {
			t.Fatalf("got %q, want reset", ev.Event)
		}
		for _, want := range []string{`id="run-body"`, `hx-swap-oob="true"`, "The run continued while you were offline", `id="narration-trimmed"`} {
			if !strings.Contains(ev.Data, want) {
				t.Errorf("reset lacks %q:\n%s", want, ev.Data)
			}
		}
		if strings.Contains(ev.Data, "w1 ") {
			t.Errorf("reset shows pruned narration:\n%s", ev.Data)
		}
	})
}

func TestStream_CursorInvalid(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	c := a.customerClient(t)
	a.narrate(t, 1, 2) // seq 2..3
	for _, tc := range []struct{ name, after, lastEventID string }{
		{"future after", "99", ""},
		{"future Last-Event-ID", "1", "42"},
		{"malformed after", "abc", ""},
		{"negative", "-3", ""},
		{"malformed Last-Event-ID", "1", "x9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{jsonStreamPath(a.run.ID, tc.after), htmlStreamPath(a.run.ID, tc.after)} {
				s := a.open(t, c, path, tc.lastEventID)
				ev := s.next(t)
				if ev.Event != "reset" || ev.ID != "3" {
					t.Errorf("%s: got %q id %s, want reset with id 3", path, ev.Event, ev.ID)
				}
			}
		})
	}
}

func TestStream_TerminalRunCloses(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	c := a.customerClient(t)
	a.narrate(t, 1, 2) // seq 2..3
	if _, err := a.store.FinishRun(context.Background(), a.run.ID, store.StateCanceled, store.Say("Canceled as requested.")); err != nil {
		t.Fatal(err)
	}
	last := a.lastSeq(t)
	for _, path := range []string{jsonStreamPath(a.run.ID, "1"), htmlStreamPath(a.run.ID, "1")} {
		t.Run(path, func(t *testing.T) {
			s := a.open(t, c, path, "")
			s.seqsUntil(t, 1, last)
			if ev := s.next(t); ev.Event != "close" || !strings.Contains(ev.Data, "finished") {
				t.Errorf("got %+v, want the close event saying the run finished", ev)
			}
			s.wantEnd(t)
		})
	}
	t.Run("closes live when the run ends", func(t *testing.T) {
		b := a.startRun(t)
		s := a.open(t, c, htmlStreamPath(b.ID, "1"), "")
		if _, err := a.store.FinishRun(context.Background(), b.ID, store.StateFailed, store.Say("No.")); err != nil {
			t.Fatal(err)
		}
		msg := s.next(t) // message.final
		if !strings.Contains(msg.Data, `id="run-outcome"`) || strings.Contains(msg.Data, `data-outcome=`) {
			t.Errorf("message.final sent an outcome before the run ended:\n%s", msg.Data)
		}
		if msg = s.next(t); !strings.Contains(msg.Data, `data-state="failed"`) || !strings.Contains(msg.Data, `data-outcome="failed"`) {
			t.Errorf("run.failed did not send the status and the outcome:\n%s", msg.Data)
		}
		if ev := s.next(t); ev.Event != "close" {
			t.Errorf("got %+v, want close", ev)
		}
		s.wantEnd(t)
	})
}

func TestStream_Denied(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	other := a.client(t)
	a.login(t, other, "customer2@example.com")

	t.Run("HTML: someone else's run gets the close event", func(t *testing.T) {
		s := a.open(t, other, htmlStreamPath(a.run.ID, "0"), "")
		ev := s.next(t)
		if ev.Event != "close" || !strings.Contains(ev.Data, "not available to you") || strings.Contains(ev.Data, "arrived broken") {
			t.Errorf("got %+v, want close saying it is not available, and nothing of the run", ev)
		}
		s.wantEnd(t)
	})
	t.Run("HTML: a missing run looks the same", func(t *testing.T) {
		s := a.open(t, other, htmlStreamPath(uuid.New(), "0"), "")
		if ev := s.next(t); ev.Event != "close" || !strings.Contains(ev.Data, "not available to you") {
			t.Errorf("got %+v, want the same close", ev)
		}
	})
	t.Run("HTML: signed out", func(t *testing.T) {
		s := a.open(t, a.client(t), htmlStreamPath(a.run.ID, "0"), "")
		if ev := s.next(t); ev.Event != "close" || !strings.Contains(ev.Data, "Log in again") {
			t.Errorf("got %+v, want close asking to log in", ev)
		}
	})
	t.Run("JSON: 404", func(t *testing.T) {
		s := a.open(t, other, jsonStreamPath(a.run.ID, "0"), "")
		if s.res.StatusCode != http.StatusNotFound {
			t.Errorf("status = %d, want 404", s.res.StatusCode)
		}
	})
}

// TestStream_AccessRevoked: a customer whose refund_access is taken away
// while watching gets the status-only body at once, and no more narration.
func TestStream_AccessRevoked(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	c := a.customerClient(t)
	s := a.open(t, c, htmlStreamPath(a.run.ID, "1"), "")
	a.narrate(t, 1, 1) // seq 2
	if msg := s.next(t); msg.ID != "2" {
		t.Fatalf("got %+v, want narration seq 2", msg)
	}
	if err := a.store.SetGrant(context.Background(), a.customer.ID, store.GrantRefundAccess, false); err != nil {
		t.Fatal(err)
	}
	ev := s.next(t)
	if ev.Event != "reset" || !strings.Contains(ev.Data, `id="status-only"`) || strings.Contains(ev.Data, `id="narration"`) ||
		strings.Contains(ev.Data, "The run continued while you were offline") {
		t.Fatalf("got %+v, want a status-only reset without the offline banner", ev)
	}
	a.narrate(t, 2, 1) // seq 3: not for this viewer any more
	if _, err := a.store.RequestCancel(context.Background(), a.run.ID, a.customer.ID); err != nil {
		t.Fatal(err)
	}
	msg := s.next(t)
	if msg.ID != "4" || strings.Contains(msg.Data, "w2") || strings.Contains(msg.Data, "#timeline") || !strings.Contains(msg.Data, `id="run-status"`) {
		t.Errorf("got %+v, want only the status of seq 4", msg)
	}
}

func TestStream_AccessRevokedSeesNothingBySetting(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{RevokedSeeNothing: true}, withListener())
	c := a.customerClient(t)
	s := a.open(t, c, htmlStreamPath(a.run.ID, "1"), "")
	a.narrate(t, 1, 1) // seq 2
	if msg := s.next(t); msg.ID != "2" {
		t.Fatalf("got %+v, want narration seq 2", msg)
	}
	if err := a.store.SetGrant(context.Background(), a.customer.ID, store.GrantRefundAccess, false); err != nil {
		t.Fatal(err)
	}
	// The stream acts on the grant's notification, which trails its commit
	// by milliseconds: narration committed in that gap could still go out,
	// so the next narration is appended once the stream has closed.
	ev := s.next(t)
	if ev.Event != "close" || ev.ID != "" {
		t.Fatalf("got %+v, want the close event and nothing of the run", ev)
	}
	s.wantEnd(t)
	a.narrate(t, 2, 1) // seq 3: for nobody now
	// A reconnect with the cursor it holds gets nothing either.
	again := a.open(t, c, htmlStreamPath(a.run.ID, "2"), "2")
	if ev := again.next(t); ev.Event != "close" || strings.Contains(ev.Data, "w2") {
		t.Errorf("reconnect got %+v, want close", ev)
	}
	wantStatus(t, a.get(t, c, "/runs/"+a.run.ID.String()), http.StatusNotFound)
	wantStatus(t, a.get(t, c, "/api/runs/"+a.run.ID.String()), http.StatusNotFound)
}

func TestStream_Heartbeat(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{Heartbeat: 30 * time.Millisecond}}, withListener())
	s := a.open(t, a.customerClient(t), jsonStreamPath(a.run.ID, "1"), "")
	s.wantHeartbeat(t)
}

func TestStream_WithoutListenerPolls(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{Poll: 20 * time.Millisecond}})
	s := a.open(t, a.customerClient(t), jsonStreamPath(a.run.ID, "1"), "")
	a.narrate(t, 1, 3)
	s.seqsUntil(t, 1, 4)
}

func TestStream_ShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	drain := 500 * time.Millisecond
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{Heartbeat: 20 * time.Millisecond, Drain: drain}}, withListener())
	c := a.customerClient(t)
	s1 := a.open(t, c, jsonStreamPath(a.run.ID, "1"), "")
	s2 := a.open(t, c, htmlStreamPath(a.run.ID, "1"), "")
	// A heartbeat on each: both are live and waiting.
	s1.wantHeartbeat(t)
	s2.wantHeartbeat(t)
	start := time.Now()
	shutdown(t, a.e)
	// Each is told to reconnect, in its own words, before it ends.
	for _, tc := range []struct {
		s    *sseConn
		says string
	}{{s1, `"reason":"restarting"`}, {s2, `data-state="reconnecting"`}} {
		if ev := tc.s.next(t); ev.Event != "restart" || !strings.Contains(ev.Data, tc.says) {
			t.Errorf("got %+v, want event: restart saying %s", ev, tc.says)
		}
		tc.s.wantEnd(t)
	}
	if d := time.Since(start); d > drain+2*time.Second {
		t.Errorf("shutdown took %v, want the streams ended within the drain window (%v)", d, drain)
	}
}

// firstLine opens url as c and returns the first line of the answer.
func firstLine(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return strings.TrimSuffix(line, "\n")
}

// TestStream_RetryHintsSpread: the streams' retry hints are spread over
// Retry..Retry+RetrySpread, so the clients of a server that went away do
// not come back in one wave.
func TestStream_RetryHintsSpread(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{Retry: time.Second, RetrySpread: 4 * time.Second}}, withListener())
	c := a.customerClient(t)
	hints := map[int]bool{}
	for range 12 {
		line := firstLine(t, c, a.srv.URL+jsonStreamPath(a.run.ID, "x"))
		ms, err := strconv.Atoi(strings.TrimPrefix(line, "retry: "))
		if err != nil || ms < 1000 || ms > 5000 {
			t.Fatalf("stream began %q, want a retry hint within 1–5 s", line)
		}
		hints[ms] = true
	}
	if len(hints) < 2 {
		t.Errorf("12 streams got %d distinct retry hints (%v), want them spread", len(hints), hints)
	}
}

// TestStream_SlowReader: a client that never reads. The appends (the
// executor's side) never wait for it, its buffer stays bounded, and the
// server closes its connection so it would replay on reconnect.
func TestStream_SlowReader(t *testing.T) {
	// Not parallel: it measures the heap.
	ctx := context.Background()
	// The executor works on the run the stalled client watches.
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{Buffer: 64, BufferBytes: 256 << 10, SlowAfter: 300 * time.Millisecond}},
		withExecutor(newGatedNarrator(200, -1), payments.Faults{}),
		configureServer(func(srv *httptest.Server) {
			// Small socket buffers, so a client that does not read stalls
			// the server's writes after kilobytes, not megabytes.
			srv.Listener = smallBufferListener{srv.Listener}
		}))
	st, srv := a.store, a.srv
	closed := a.conns.closedAddrs()
	approver := a.user(t, "approver@example.com")
	cookie := a.loginCookie(t)

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: localhost\r\nCookie: %s\r\nAccept: text/event-stream\r\n\r\n", jsonStreamPath(a.run.ID, "1"), cookie)

	var before, after runtimeMem
	before.read()
	cuts := testutil.ToFloat64(metrics.StreamSlowCuts)
	big := strings.Repeat("narration ", 200) // 2 KB per delta
	appended := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		for range 100 {
			evs := make([]store.NewEvent, 50)
			for i := range evs {
				evs[i] = store.EventOf(store.NarrationDelta{Text: big})
			}
			if _, err := st.Append(ctx, a.run.ID, evs...); err != nil {
				t.Error(err)
				break
			}
		}
		appended <- time.Since(start)
	}()
	select {
	case d := <-appended:
		if d > 20*time.Second {
			t.Errorf("10 MB of appends took %v: the runtime waited for a slow reader", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the appends never finished")
	}
	waitConnClosed(t, closed, conn.LocalAddr().String(), "a client that never reads", 10*time.Second)
	testkit.WaitUntil(t, "the cut to be counted", 30*time.Second, func() bool {
		return testutil.ToFloat64(metrics.StreamSlowCuts) > cuts
	})
	// What it had been sent was the stream's start, then the server hung up.
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	head := make([]byte, 512)
	n, _ := io.ReadAtLeast(conn, head, 100)
	if got := string(head[:n]); !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.Contains(got, "text/event-stream") {
		t.Errorf("the stalled client was sent %q, want the start of a 200 event stream", got)
	}
	// Meanwhile the run went on: it finishes as if nobody watched.
	testkit.WaitUntil(t, "the executor to finish the run while a client stalled", 20*time.Second, func() bool {
		r, err := st.RunByID(ctx, a.run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.State == store.StateAwaitingApproval {
			if _, err := st.Approve(ctx, a.run.ID, approver.ID, ""); err != nil {
				t.Fatal(err)
			}
		}
		return r.State == store.StateCompleted
	})
	after.read()
	if grew := int64(after.heap) - int64(before.heap); grew > 8<<20 {
		t.Errorf("heap grew by %d MB for one stalled subscriber of 10 MB, want it bounded", grew>>20)
	}
}

type smallBufferListener struct{ net.Listener }

func (l smallBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// loginCookie logs the customer in and returns the Cookie header value.
func (a *streamApp) loginCookie(t *testing.T) string {
	t.Helper()
	c := a.customerClient(t)
	u, _ := url.Parse(a.srv.URL)
	var parts []string
	for _, ck := range c.Jar.Cookies(u) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	return strings.Join(parts, "; ")
}

type runtimeMem struct{ heap uint64 }

func (m *runtimeMem) read() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heap = ms.HeapAlloc
}

// TestStream_AccessRecheckedWithoutNotification: with no wake-up at all,
// access is still re-checked every Recheck; a user who may no longer see
// the run gets the close event.
func TestStream_AccessRecheckedWithoutNotification(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{Recheck: 50 * time.Millisecond}})
	c := a.customerClient(t)
	s := a.open(t, c, htmlStreamPath(a.run.ID, "1"), "")
	// Taken away without a NOTIFY: only the periodic re-check can see it.
	if _, err := a.db.Exec(`DELETE FROM grants WHERE user_id = $1`, a.customer.ID); err != nil {
		t.Fatal(err)
	}
	if ev := s.next(t); ev.Event != "reset" || !strings.Contains(ev.Data, `id="status-only"`) {
		t.Fatalf("got %+v, want the status-only reset", ev)
	}
	if _, err := a.db.Exec(`UPDATE users SET disabled_at = now() WHERE id = $1`, a.customer.ID); err != nil {
		t.Fatal(err)
	}
	if ev := s.next(t); ev.Event != "close" || !strings.Contains(ev.Data, `id="no-access"`) {
		t.Fatalf("got %+v, want close taking the run off the page", ev)
	}
	s.wantEnd(t)
}

// TestStream_SlowClientGetsCoalescedNarration: a client that reads late
// but does read gets all the narration, in fewer, merged messages, in order.
func TestStream_SlowClientGetsCoalescedNarration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{Buffer: 8, SlowAfter: 20 * time.Second}}, withListener(),
		configureServer(func(srv *httptest.Server) { srv.Listener = smallBufferListener{srv.Listener} }))
	st, srv := a.store, a.srv
	c := a.customerClient(t)
	// A small receive window while the client does not read, so the
	// server's writes stall after kilobytes.
	dialed := make(chan *net.TCPConn, 1)
	c.Transport = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetReadBuffer(4096)
			dialed <- tc
		}
		return conn, err
	}}

	// Open the stream but do not read it yet.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+jsonStreamPath(a.run.ID, "1"), nil)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	conn := <-dialed
	const n = 400
	big := strings.Repeat("x", 200)
	var want strings.Builder
	// One commit: the shared tail reads them in one go and offers them
	// all at once, however the wake-ups after single commits would fall.
	evs := make([]store.NewEvent, n)
	for i := range n {
		text := fmt.Sprintf("%d:%s ", i, big)
		want.WriteString(text)
		evs[i] = store.EventOf(store.NarrationDelta{Text: text})
	}
	if _, err := st.Append(ctx, a.run.ID, evs...); err != nil {
		t.Fatal(err)
	}
	// Now read, with room to do it quickly.
	conn.SetReadBuffer(1 << 20)
	events := make(chan testkit.SSEEvent, 100000)
	go testkit.ReadSSE(res.Body, events)
	var got strings.Builder
	var last int64 = 1
	messages := 0
	timeout := time.After(15 * time.Second)
	for last < n+1 {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("stream ended at seq %d", last)
			}
			if ev.Comment != "" {
				continue
			}
			var e store.Event
			if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
				t.Fatal(err)
			}
			if e.Seq <= last || ev.Seq(t) != e.Seq {
				t.Fatalf("seq %d (id %s) after %d", e.Seq, ev.ID, last)
			}
			last = e.Seq
			p, _ := store.PayloadOf[store.NarrationDelta](e)
			got.WriteString(p.Text)
			messages++
		case <-timeout:
			t.Fatalf("timed out at seq %d", last)
		}
	}
	if got.String() != want.String() {
		t.Errorf("narration differs: got %d bytes, want %d", got.Len(), want.Len())
	}
	if messages >= n {
		t.Errorf("%d messages for %d deltas, want the late reader's narration coalesced", messages, n)
	}
}

// TestStream_LogoutEndsStream: logging out (in any tab) ends what the
// session opened at the next re-check.
func TestStream_LogoutEndsStream(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{Recheck: 50 * time.Millisecond}}, withListener())
	c := a.customerClient(t)
	s := a.open(t, c, htmlStreamPath(a.run.ID, "1"), "")
	wantRedirect(t, a.post(t, c, "/logout", nil), "/login")
	if ev := s.next(t); ev.Event != "close" || !strings.Contains(ev.Data, "Log in again") {
		t.Fatalf("got %+v, want close asking to log in again", ev)
	}
	s.wantEnd(t)
}

// TestStream_JSONStatusOnly: a program whose user may see the state only
// gets event: status, never narration or the events themselves.
func TestStream_JSONStatusOnly(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	c := a.customerClient(t)
	if err := a.store.SetGrant(context.Background(), a.customer.ID, store.GrantRefundAccess, false); err != nil {
		t.Fatal(err)
	}
	s := a.open(t, c, jsonStreamPath(a.run.ID, "0"), "")
	if ev := s.next(t); ev.Event != "status" || ev.ID != "1" || !strings.Contains(ev.Data, `"state":"created"`) {
		t.Errorf("got %+v, want the status after seq 1", ev)
	}
	a.narrate(t, 1, 2) // seq 2..3: not for this viewer
	if _, err := a.store.FinishRun(context.Background(), a.run.ID, store.StateCanceled, store.Say("Canceled as requested.")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ id, has string }{{"4", `"final_message":"Canceled as requested."`}, {"5", `"state":"canceled"`}} {
		ev := s.next(t)
		if ev.Event != "status" || ev.ID != want.id || !strings.Contains(ev.Data, want.has) || strings.Contains(ev.Data, "w1") {
			t.Errorf("got %+v, want status %s with %s", ev, want.id, want.has)
		}
	}
	if ev := s.next(t); ev.Event != "close" {
		t.Errorf("got %+v, want close", ev)
	}
}

// TestStream_IdleClientThatNeverReadsIsCut: a client that stops reading an
// idle stream fills its socket with heartbeats; the heartbeat that no
// longer fits ends the stream (a slow cut, counted) and closes the
// connection, without holding up anyone else's heartbeat.
func TestStream_IdleClientThatNeverReadsIsCut(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{Stream: stream.Config{Heartbeat: 2 * time.Millisecond, SlowAfter: 2 * time.Second}}, withListener(),
		configureServer(func(srv *httptest.Server) { srv.Listener = smallBufferListener{srv.Listener} }))
	closed := a.conns.closedAddrs()
	cookie := a.loginCookie(t)
	cuts := testutil.ToFloat64(metrics.StreamSlowCuts)

	conn, err := net.Dial("tcp", a.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: localhost\r\nCookie: %s\r\nAccept: text/event-stream\r\n\r\n", jsonStreamPath(a.run.ID, "1"), cookie)
	// Another client, reading, keeps its heartbeats meanwhile.
	reader := a.open(t, a.customerClient(t), jsonStreamPath(a.run.ID, "1"), "")

	waitConnClosed(t, closed, conn.LocalAddr().String(), "an idle client that never reads", 60*time.Second)
	testkit.WaitUntil(t, "the cut to be counted", 10*time.Second, func() bool {
		return testutil.ToFloat64(metrics.StreamSlowCuts) > cuts
	})
	reader.wantHeartbeat(t)
}

// waitConnClosed waits until the server has closed the connection from
// addr (closed carries the remote address of each connection it closes),
// failing after within.
func waitConnClosed(t *testing.T, closed <-chan string, addr, whose string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case a := <-closed:
			if a == addr {
				return
			}
		case <-deadline:
			t.Fatalf("the server did not close the connection of %s within %v", whose, within)
		}
	}
}
