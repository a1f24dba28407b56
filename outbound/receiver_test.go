package outbound_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/store"
)

// receiver is a webhook receiver on 127.0.0.1 as a merchant would write
// one: it verifies every delivery with the reference library (with each of
// its secrets alone), dedupes by webhook-id, and checks that each run's
// events arrive in seq order. behave, when set, answers instead of 200
// (after the delivery was noted).
type receiver struct {
	t       testing.TB
	secrets []string
	behave  func(w http.ResponseWriter, r *http.Request, n int) bool
	// slow delays each answer after the delivery was noted: a receiver
	// that dies then has processed what its sender will send again.
	slow time.Duration

	mu    sync.Mutex
	addr  string
	srv   *http.Server
	seen  map[string]bool
	tries map[string]int        // attempts by webhook-id
	runs  map[uuid.UUID][]int64 // seqs in the order first received
	posts int
	bad   []string
}

func newReceiver(t testing.TB, secrets ...string) *receiver {
	t.Helper()
	r := &receiver{t: t, secrets: secrets, seen: map[string]bool{}, tries: map[string]int{}, runs: map[uuid.UUID][]int64{}}
	r.listen("127.0.0.1:0")
	t.Cleanup(r.kill)
	return r
}

func (r *receiver) listen(addr string) {
	r.t.Helper()
	var ln net.Listener
	var err error
	// The address just closed may take a moment to be free again.
	for deadline := time.Now().Add(5 * time.Second); ; {
		if ln, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatalf("receiver: listen %s: %v", addr, err)
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.addr, r.srv = ln.Addr().String(), srv
	r.mu.Unlock()
	go srv.Serve(ln)
}

func (r *receiver) URL() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return "http://" + r.addr + "/hook"
}

// kill closes the listener and every connection, requests in flight too.
func (r *receiver) kill() {
	r.mu.Lock()
	srv := r.srv
	r.mu.Unlock()
	srv.Close()
}

// restart serves again on the same address.
func (r *receiver) restart() {
	r.mu.Lock()
	addr := r.addr
	r.mu.Unlock()
	r.listen(addr)
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		return
	}
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	r.posts++
	r.tries[id]++
	n := r.tries[id]
	r.mu.Unlock()
	if problem := r.check(req, body); problem != "" {
		r.fail(problem)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if r.behave != nil && r.behave(w, req, n) {
		return
	}
	var p outbound.Payload
	_ = json.Unmarshal(body, &p)
	r.mu.Lock()
	if !r.seen[id] {
		r.seen[id] = true
		seqs := r.runs[p.Data.RunID]
		if len(seqs) > 0 && seqs[len(seqs)-1] >= p.Data.Seq {
			r.bad = append(r.bad, fmt.Sprintf("run %s: seq %d after %d", p.Data.RunID, p.Data.Seq, seqs[len(seqs)-1]))
		}
		r.runs[p.Data.RunID] = append(seqs, p.Data.Seq)
	}
	r.mu.Unlock()
	if r.slow > 0 {
		select {
		case <-time.After(r.slow):
		case <-req.Context().Done():
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// check verifies a delivery as a receiver must: each secret alone, with
// the reference library, and the envelope against its headers.
func (r *receiver) check(req *http.Request, body []byte) string {
	for _, s := range r.secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return err.Error()
		}
		if err := wh.Verify(body, req.Header); err != nil {
			return "signature: " + err.Error()
		}
	}
	var p outbound.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		return "body: " + err.Error()
	}
	ts, err := time.Parse(time.RFC3339Nano, p.Timestamp)
	switch {
	case req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json":
		return "not a JSON POST"
	case req.Header.Get("User-Agent") != "refundd-webhooks":
		return "user agent " + req.Header.Get("User-Agent")
	case req.Header.Get("webhook-id") != p.Data.EventID.String():
		return "webhook-id is not the event's ID"
	case p.Type != p.Data.Type || err != nil || !ts.Equal(p.Data.CreatedAt):
		return "envelope does not match its event"
	case p.Data.Class != store.ClassBusiness || len(p.Data.Payload) == 0:
		return "not a business event with its payload"
	}
	return ""
}

func (r *receiver) fail(problem string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bad = append(r.bad, problem)
}

// received returns what arrived: per run the seqs first received, how
// many POSTs came, and what was wrong.
func (r *receiver) received() (map[uuid.UUID][]int64, int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	runs := make(map[uuid.UUID][]int64, len(r.runs))
	for id, s := range r.runs {
		runs[id] = slices.Clone(s)
	}
	return runs, r.posts, slices.Clone(r.bad)
}

func (r *receiver) count() int {
	_, n, _ := r.received()
	return n
}

// wantAll fails unless the receiver got exactly the business events of
// runs, each run's in seq order, and nothing was wrong.
func (r *receiver) wantAll(t testing.TB, want map[uuid.UUID][]int64) {
	t.Helper()
	got, _, bad := r.received()
	for _, b := range bad {
		t.Errorf("receiver: %s", b)
	}
	for run, seqs := range want {
		if !slices.Equal(got[run], seqs) {
			t.Errorf("run %s: received seqs %v, want %v", run, got[run], seqs)
		}
	}
	if len(got) != len(want) {
		t.Errorf("received events of %d runs, want %d", len(got), len(want))
	}
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// loopback lets deliveries reach the test's receivers.
var loopback = outbound.Policy{AllowHTTP: true, AllowLoopback: true}

// startEngine runs an engine over st until the test ends, with a short
// schedule and poll unless cfg says otherwise.
func startEngine(t testing.TB, st *store.Store, cfg outbound.Config) *outbound.Engine {
	t.Helper()
	cfg.Policy = loopback
	cfg.Poll = cmp.Or(cfg.Poll, 20*time.Millisecond)
	if cfg.Schedule == nil {
		cfg.Schedule = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	}
	e := outbound.New(cfg, st, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
	e.Start(context.Background())
	t.Cleanup(e.Stop)
	return e
}

func mustEndpoint(t testing.TB, st *store.Store, url string, types ...string) (store.WebhookEndpoint, string) {
	t.Helper()
	secret, err := outbound.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	ep, err := st.AddWebhook(context.Background(), store.NewWebhook{URL: url, Secret: secret, EventTypes: types}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ep, secret
}

// newLogger logs everything, debug included, to w.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(&lockedWriter{w: w}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
