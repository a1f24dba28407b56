package main

// The chaos soak's parts that know nothing of chaos: its private
// PostgreSQL, the tallies it keeps, a JSON API client that rides out
// failures the way a careful client would, and the stream watcher that
// applies events once by seq as the browser does.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store"
)

// soakCluster starts a PostgreSQL of the soak's own under /dev/shm: the
// soak stops and restarts it, which the shared storetest cluster must never
// see. It follows storetest's discipline: the folder is named like its
// clusters and holds owner.pid, so a later test process reaps it if this
// one dies before its cleanup (a test timeout's panic skips cleanups).
func soakCluster(t *testing.T) *devdb.Cluster {
	t.Helper()
	base := "/dev/shm"
	if st, err := os.Stat(base); err != nil || !st.IsDir() {
		base = os.TempDir()
	}
	dir, err := os.MkdirTemp(base, "refundd-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	// The postgres user must be able to reach the cluster below it.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := devdb.NewCluster(dir, 5432)
	if err != nil {
		t.Fatal(err)
	}
	// Not Fast: Fast turns synchronous_commit off, and an immediate
	// shutdown would then lose commits that were acknowledged, which the
	// design never allows for business events. On tmpfs fsync costs
	// nothing anyway.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Kill(ctx); err != nil {
			t.Errorf("soak: stop PostgreSQL: %v", err)
		}
		os.RemoveAll(dir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// tally counts things by kind and keeps the first details, safe for any
// goroutine: faults injected, what clients saw, violations found.
type tally struct {
	mu      sync.Mutex
	n       map[string]int
	details []string
}

const (
	maxDetails        = 40
	maxDetailsPerKind = 5
)

func (t *tally) inc(kind string) { t.add(kind, 1) }

func (t *tally) add(kind string, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = map[string]int{}
	}
	t.n[kind] += n
}

// note counts kind and keeps what happened, for the report: the first
// few of each kind, so one noisy kind cannot hide the others.
func (t *tally) note(kind, format string, args ...any) {
	t.inc(kind)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n[kind] <= maxDetailsPerKind && len(t.details) < maxDetails {
		t.details = append(t.details, kind+": "+fmt.Sprintf(format, args...))
	}
}

func (t *tally) get(kind string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[kind]
}

func (t *tally) total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	sum := 0
	for _, v := range t.n {
		sum += v
	}
	return sum
}

// String is "kind=n …" in a stable order.
func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	kinds := make([]string, 0, len(t.n))
	for k := range t.n {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s=%d", k, t.n[k])
	}
	return strings.Join(parts, " ")
}

func (t *tally) Details() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.details)
}

// soakAPI calls the JSON API of whichever serve process it picks. The
// serves restart under it, so a request that cannot reach one, or that
// one answers with a 5xx, is tried again, as a careful client would.
type soakAPI struct {
	http   *http.Client
	serves []string // base URLs
	stats  *tally
	// notes gets the 500s: a failure of the moment (the database is down)
	// should be a 503 that says when to come back.
	notes *tally
}

// answer is one HTTP answer: its status and body.
type answer struct {
	status int
	body   []byte
}

// errorCode is the code of an {"error":{"code"}} body, or "".
func (a answer) errorCode() string {
	var b struct {
		Error struct{ Code string } `json:"error"`
	}
	json.Unmarshal(a.body, &b)
	return b.Error.Code
}

func (a *soakAPI) base() string { return a.serves[rand.IntN(len(a.serves))] }

// once sends one request to a serve picked at random.
func (a *soakAPI) once(ctx context.Context, token, method, path, key string, body any) (answer, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{}, err
		}
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base()+path, r)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := a.http.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, body: b}, err
}

// call sends the request until an answer that is not a failure of the
// moment arrives (a refused connection, a 5xx, a 429), backing off, or
// until ctx ends.
func (a *soakAPI) call(ctx context.Context, token, method, path, key string, body any) (answer, error) {
	pause := 20 * time.Millisecond
	for {
		ans, err := a.once(ctx, token, method, path, key, body)
		switch {
		case err == nil && ans.status < 500 && ans.status != http.StatusTooManyRequests:
			return ans, nil
		case err != nil:
			a.stats.inc("api_unreachable")
		case ans.status == http.StatusInternalServerError:
			a.notes.note("api_500", "%s %s: %s", method, path, bytes.TrimSpace(ans.body))
		default:
			a.stats.inc("api_" + strconv.Itoa(ans.status))
		}
		if !pauseFor(ctx, pause) {
			return ans, errors.Join(err, ctx.Err())
		}
		pause = min(2*pause, time.Second)
	}
}

// pauseFor waits d, jittered, unless ctx ends first (false).
func pauseFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d/2 + rand.N(d))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// soakSnapshot is what the soak reads of GET /api/runs/{id} and of a
// stream's reset event.
type soakSnapshot struct {
	Access string `json:"access"`
	Run    struct {
		ID              string `json:"id"`
		State           string `json:"state"`
		CancelRequested bool   `json:"cancel_requested"`
	} `json:"run"`
	CoveringSeq int64 `json:"covering_seq"`
	Operations  []struct {
		ID          string  `json:"id"`
		State       string  `json:"state"`
		Amount      int64   `json:"amount"`
		Currency    string  `json:"currency"`
		ProviderRef *string `json:"provider_ref"`
	} `json:"operations"`
	FinalMessage *string `json:"final_message"`
}

// progress is the state a client holds after the snapshot, in the form
// store.Progress moves forward by events.
func (s *soakSnapshot) progress() (store.Progress, error) {
	p := store.Progress{State: s.Run.State, CancelRequested: s.Run.CancelRequested, CoveringSeq: s.CoveringSeq}
	if s.FinalMessage != nil {
		p.FinalMessage = *s.FinalMessage
	}
	for _, o := range s.Operations {
		id, err := uuid.Parse(o.ID)
		if err != nil {
			return p, fmt.Errorf("operation id %q: %w", o.ID, err)
		}
		op := store.Operation{ID: id, Kind: "refund", State: o.State, Amount: o.Amount, Currency: o.Currency}
		if o.ProviderRef != nil {
			op.ProviderRef = sql.NullString{String: *o.ProviderRef, Valid: true}
		}
		p.Operations = append(p.Operations, op)
	}
	return p, nil
}

// describe is a progress in one comparable line.
func describe(p store.Progress) string {
	ops := make([]string, 0, len(p.Operations))
	for _, o := range p.Operations {
		ops = append(ops, fmt.Sprintf("%s:%s:%d%s:%s", o.ID, o.State, o.Amount, o.Currency, o.ProviderRef.String))
	}
	slices.Sort(ops)
	return fmt.Sprintf("state=%s cancel=%t seq=%d ops=[%s] final=%q",
		p.State, p.CancelRequested, p.CoveringSeq, strings.Join(ops, " "), p.FinalMessage)
}

// watcher follows one run's JSON stream as the browser's script does:
// it applies an event only if its seq is above the last one applied, a
// reset replaces its state and moves its cursor, and it reconnects with
// its cursor whenever the connection ends. It drops connections after
// random events, and sometimes resumes from an older cursor, so that
// ranges are replayed twice. What the stream gets wrong goes to viol.
type watcher struct {
	api       *soakAPI
	token     string
	runID     uuid.UUID
	viol      *tally
	onWaiting func() // once, when the run is seen awaiting approval; must not block
	// skippedSeqs reads the seqs the run's log skipped after PostgreSQL
	// restarts (nil: none): a jump over them misses no event.
	skippedSeqs func() []store.SeqRange
	// tailMayBeLost: the database may fail over to a standby that lacked
	// its last seconds, business events included (asynchronous
	// replication), so a reset may go back past an applied business event.
	// No seq may name a different event all the same.
	tailMayBeLost bool
	// resumed: the watcher starts from what a client already holds
	// (resumeFrom), and its first connection sends that cursor.
	resumed bool

	cur    atomic.Int64 // the last seq applied
	closed atomic.Bool  // the stream said close: the run has finished

	// Only the watcher's goroutine touches these until run returns.
	prog store.Progress
	ids  map[int64]uuid.UUID // event_id applied at each seq
	// lastBusiness is the seq of the last business event applied: a reset
	// may go back past lost narration, never past it.
	lastBusiness int64
	signaled     bool
}

func newWatcher(api *soakAPI, token string, runID uuid.UUID, viol *tally, onWaiting func()) *watcher {
	return &watcher{api: api, token: token, runID: runID, viol: viol, onWaiting: onWaiting, ids: map[int64]uuid.UUID{}}
}

// resumeFrom makes the watcher a client that has applied the events seen
// (seq to event ID) up to cursor, as a page open since then holds them.
// Call it before run.
func (w *watcher) resumeFrom(seen map[int64]uuid.UUID, cursor int64) {
	w.resumed = true
	maps.Copy(w.ids, seen)
	w.cur.Store(cursor)
	w.lastBusiness = cursor
}

// run follows the stream until the run has finished or ctx ends.
func (w *watcher) run(ctx context.Context) {
	pause := 20 * time.Millisecond
	for first := !w.resumed; ctx.Err() == nil && !w.closed.Load(); first = false {
		ok, err := w.connect(ctx, first)
		if err != nil {
			if ctx.Err() == nil {
				w.viol.note("stream_refused", "run %s: %v", w.runID, err)
			}
			return
		}
		if ok {
			pause = 20 * time.Millisecond
			continue
		}
		// The serve is down or the database is: try again soon.
		if !pauseFor(ctx, pause) {
			return
		}
		pause = min(2*pause, time.Second)
	}
}

// streamCursor is where a reconnect resumes: the last applied seq, or now
// and then an older one, so the server replays a range the client has.
func (w *watcher) streamCursor(first bool) (cursor int64, send bool) {
	cur := w.cur.Load()
	switch {
	case first:
		return 0, false
	case cur > 0 && rand.IntN(5) == 0:
		w.api.stats.inc("stream_older_cursor")
		return rand.Int64N(cur + 1), true
	}
	return cur, true
}

// connect opens the stream once and reads it until it ends, the watcher
// drops it, or the close event. ok: it was opened (or refused for a
// moment: false); err: it was refused for good.
func (w *watcher) connect(ctx context.Context, first bool) (ok bool, err error) {
	cursor, send := w.streamCursor(first)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.api.base()+"/api/runs/"+w.runID.String()+"/stream", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	if send {
		// Both ways a client names its cursor.
		if rand.IntN(3) == 0 {
			req.URL.RawQuery = "after=" + strconv.FormatInt(cursor, 10)
		} else {
			req.Header.Set("Last-Event-ID", strconv.FormatInt(cursor, 10))
		}
	}
	res, err := w.api.http.Do(req)
	if err != nil {
		w.api.stats.inc("stream_unreachable")
		return false, nil
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		if res.StatusCode == http.StatusInternalServerError {
			w.api.notes.note("stream_500", "run %s: %s", w.runID, bytes.TrimSpace(body))
			return false, nil
		}
		if res.StatusCode >= 500 {
			w.api.stats.inc("stream_" + strconv.Itoa(res.StatusCode))
			return false, nil
		}
		return false, fmt.Errorf("status %d: %s", res.StatusCode, body)
	}
	w.api.stats.inc("stream_connects")
	w.read(res.Body, cursor)
	return true, nil
}

// read applies what one connection sends. Half the connections are
// dropped after a few events, as a flaky network or a closed laptop does.
func (w *watcher) read(body io.Reader, cursor int64) {
	dropAfter := 0
	if rand.IntN(2) == 0 {
		dropAfter = 1 + rand.IntN(8)
	}
	last := cursor // what this connection sent last: it must go on from its cursor
	n := 0
	for ev, err := range testkit.SSE(body) {
		if err != nil {
			return
		}
		if ev.Comment != "" {
			continue
		}
		if !w.handle(ev, &last) {
			return
		}
		if n++; dropAfter > 0 && n >= dropAfter {
			w.api.stats.inc("stream_dropped")
			return
		}
	}
}

// handle applies one message; false ends the connection.
func (w *watcher) handle(ev testkit.SSEEvent, last *int64) bool {
	switch ev.Event {
	case "close":
		w.closed.Store(true)
		return false
	case "reset":
		return w.reset(ev, last)
	case "":
		return w.apply(ev, last)
	case "restart":
		// The server is shutting down: the stream ends next, and the
		// watcher comes back after the hint with its cursor.
		if !strings.Contains(ev.Data, `"reason":"restarting"`) {
			w.viol.note("stream_bad_restart", "run %s: %s", w.runID, ev.Data)
		}
		w.api.stats.inc("stream_restart_words")
		return true
	}
	w.viol.note("stream_unexpected_event", "run %s: event %q: %s", w.runID, ev.Event, ev.Data)
	return false
}

func (w *watcher) reset(ev testkit.SSEEvent, last *int64) bool {
	var s soakSnapshot
	if err := json.Unmarshal([]byte(ev.Data), &s); err != nil {
		w.viol.note("stream_bad_reset", "run %s: %v: %s", w.runID, err, ev.Data)
		return false
	}
	p, err := s.progress()
	if err != nil || s.Access != "full" || ev.ID != strconv.FormatInt(s.CoveringSeq, 10) {
		w.viol.note("stream_bad_reset", "run %s: access %q, id %q, covering %d, err %v", w.runID, s.Access, ev.ID, s.CoveringSeq, err)
		return false
	}
	if cur := w.cur.Load(); s.CoveringSeq < cur {
		// The log went back. PostgreSQL crashed and lost narration that
		// was committed without the WAL flush, which the design allows
		// (the next append skips past every seq handed out, so none is
		// reused: stream_seq_reused watches that). A business event is
		// durable: losing one applied is a violation.
		switch {
		case s.CoveringSeq < w.lastBusiness && w.tailMayBeLost:
			w.api.stats.inc("stream_business_lost_in_failover")
			w.lastBusiness = s.CoveringSeq
		case s.CoveringSeq < w.lastBusiness:
			w.viol.note("stream_reset_backwards", "run %s: reset to %d after business event %d was applied", w.runID, s.CoveringSeq, w.lastBusiness)
		default:
			w.api.stats.inc("stream_narration_lost_in_crash")
		}
	}
	w.api.stats.inc("stream_resets")
	w.prog = p
	w.cur.Store(s.CoveringSeq)
	*last = s.CoveringSeq
	w.afterApply()
	return true
}

// apply checks an event against the connection's order and the client's
// cursor, and applies it once.
func (w *watcher) apply(msg testkit.SSEEvent, last *int64) bool {
	var ev store.Event
	if err := json.Unmarshal([]byte(msg.Data), &ev); err != nil || ev.RunID != w.runID || msg.ID != strconv.FormatInt(ev.Seq, 10) {
		w.viol.note("stream_bad_event", "run %s: id %q, err %v: %s", w.runID, msg.ID, err, msg.Data)
		return false
	}
	from := coalescedFrom(ev)
	if from != *last+1 && !w.skipped(*last, from) {
		// One connection sends the log from its cursor, in order, once.
		w.viol.note("stream_out_of_order", "run %s: after seq %d the connection sent %d..%d", w.runID, *last, from, ev.Seq)
	}
	*last = ev.Seq
	cur := w.cur.Load()
	if ev.Seq <= cur {
		w.api.stats.inc("stream_duplicates_dropped")
		if id, ok := w.ids[ev.Seq]; ok && id != ev.EventID {
			w.viol.note("stream_seq_reused", "run %s: seq %d was event %s, now %s (%s)", w.runID, ev.Seq, id, ev.EventID, ev.Type)
		}
		return true
	}
	if from > cur+1 && !w.skipped(cur, from) {
		w.viol.note("stream_gap", "run %s: applied up to %d, next applied %d..%d", w.runID, cur, from, ev.Seq)
	}
	if id, ok := w.ids[ev.Seq]; ok && id != ev.EventID {
		// Applied before a reset went back (a crash or a failover lost the
		// tail): the seq must not have been given to another event since.
		w.viol.note("stream_seq_reused", "run %s: seq %d was event %s, now %s (%s)", w.runID, ev.Seq, id, ev.EventID, ev.Type)
	}
	w.prog.Apply(ev)
	w.ids[ev.Seq] = ev.EventID
	if ev.Class == store.ClassBusiness {
		w.lastBusiness = ev.Seq
	}
	w.cur.Store(ev.Seq)
	w.api.stats.inc("stream_events_applied")
	w.afterApply()
	return true
}

// skipped reports whether every seq strictly between after and next lies
// in one range the log skipped after a restart: no event ever had them.
func (w *watcher) skipped(after, next int64) bool {
	if w.skippedSeqs == nil {
		return false
	}
	for _, g := range w.skippedSeqs() {
		if g.From <= after+1 && next-1 <= g.To {
			return true
		}
	}
	return false
}

// coalescedFrom is the first seq an event covers: a slow subscriber gets
// runs of narration merged into one delta numbered as the last of them.
func coalescedFrom(ev store.Event) int64 {
	if p, err := store.PayloadOf[store.NarrationDelta](ev); err == nil && p.CoalescedFrom > 0 {
		return p.CoalescedFrom
	}
	return ev.Seq
}

func (w *watcher) afterApply() {
	if w.prog.State == store.StateAwaitingApproval && !w.signaled {
		w.signaled = true
		if w.onWaiting != nil {
			w.onWaiting()
		}
	}
}
