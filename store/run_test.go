package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// fixture is a customer with one paid order, and an approver.
type fixture struct {
	s        *store.Store
	customer *store.User
	approver *store.User
	order    *store.Order
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s := storetest.MustOpen(t)
	p := storetest.MustSeedParties(t, s, 10000)
	return &fixture{s: s, customer: p.Customer, approver: p.Approver, order: p.Order}
}

func (f *fixture) start(t *testing.T, key string, amount int64) *store.Run {
	t.Helper()
	r, created, err := f.s.StartRun(context.Background(), store.StartRequest{
		OwnerID: f.customer.ID, ClientRequestID: key, OrderID: f.order.ID, Amount: amount, Reason: "too small",
	})
	if err != nil {
		t.Fatalf("StartRun(%s): %v", key, err)
	}
	if !created {
		t.Fatalf("StartRun(%s): created = false, want true", key)
	}
	return r
}

func count(t *testing.T, s *store.Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := storetest.DB(t, s).GetContext(context.Background(), &n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func TestStartRun_DuplicateRequestsRace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const n = 50
	var (
		wg      sync.WaitGroup
		ids     = make([]uuid.UUID, n)
		created = make([]bool, n)
		errs    = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			r, c, err := f.s.StartRun(context.Background(), store.StartRequest{
				OwnerID: f.customer.ID, ClientRequestID: "req-1", OrderID: f.order.ID, Amount: 2500, Reason: "broken",
			})
			errs[i], created[i] = err, c
			if r != nil {
				ids[i] = r.ID
			}
		})
	}
	wg.Wait()
	nCreated := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Errorf("call %d returned run %s, want %s", i, ids[i], ids[0])
		}
		if created[i] {
			nCreated++
		}
	}
	if nCreated != 1 {
		t.Errorf("created = true for %d calls, want 1", nCreated)
	}
	if got := count(t, f.s, `SELECT count(*) FROM runs`); got != 1 {
		t.Errorf("runs = %d, want 1", got)
	}
	if got := count(t, f.s, `SELECT count(*) FROM run_events WHERE type = 'run.created'`); got != 1 {
		t.Errorf("run.created events = %d, want 1", got)
	}
}

func TestStartRun_IdempotencyConflict(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	other, err := f.s.CreateOrder(ctx, f.customer.ID, "Hat", 5000, "EUR")
	if err != nil {
		t.Fatal(err)
	}
	orig := store.StartRequest{OwnerID: f.customer.ID, ClientRequestID: "k", OrderID: f.order.ID, Amount: 100, Reason: "late"}
	first, _, err := f.s.StartRun(ctx, orig)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("same parameters return the same run", func(t *testing.T) {
		again, created, err := f.s.StartRun(ctx, orig)
		if err != nil || created || again.ID != first.ID {
			t.Errorf("StartRun again = %v, created %v, err %v; want run %s, false, nil", again.ID, created, err, first.ID)
		}
	})
	for name, mutate := range map[string]func(r *store.StartRequest){
		"other amount": func(r *store.StartRequest) { r.Amount = 200 },
		"other reason": func(r *store.StartRequest) { r.Reason = "early" },
		"other order":  func(r *store.StartRequest) { r.OrderID = other.ID },
	} {
		t.Run(name, func(t *testing.T) {
			req := orig
			mutate(&req)
			_, _, err := f.s.StartRun(ctx, req)
			if !errors.Is(err, store.ErrIdempotencyConflict) {
				t.Errorf("err = %v, want ErrIdempotencyConflict", err)
			}
		})
	}
	if got := count(t, f.s, `SELECT count(*) FROM runs`); got != 1 {
		t.Errorf("runs = %d, want 1", got)
	}
	t.Run("another user may reuse the ID", func(t *testing.T) {
		c2, err := f.s.CreateUser(ctx, "c2@example.com", "C2", store.RoleCustomer, "pw")
		if err != nil {
			t.Fatal(err)
		}
		o2, err := f.s.CreateOrder(ctx, c2.ID, "Bag", 3000, "USD")
		if err != nil {
			t.Fatal(err)
		}
		r, created, err := f.s.StartRun(ctx, store.StartRequest{OwnerID: c2.ID, ClientRequestID: "k", OrderID: o2.ID, Amount: 100, Reason: "x"})
		if err != nil || !created || r.ID == first.ID {
			t.Errorf("StartRun by another user: created %v, err %v, want a new run", created, err)
		}
	})
}

func TestStartRun_Validation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	stranger, err := f.s.CreateUser(ctx, "s@example.com", "S", store.RoleCustomer, "pw")
	if err != nil {
		t.Fatal(err)
	}
	f.start(t, "reserve", 6000) // leaves 40.00 refundable
	valid := store.StartRequest{OwnerID: f.customer.ID, ClientRequestID: "v", OrderID: f.order.ID, Amount: 100, Reason: "why"}
	for name, mutate := range map[string]func(r *store.StartRequest){
		"someone else's order":     func(r *store.StartRequest) { r.OwnerID = stranger.ID },
		"unknown order":            func(r *store.StartRequest) { r.OrderID = 999999 },
		"zero amount":              func(r *store.StartRequest) { r.Amount = 0 },
		"negative amount":          func(r *store.StartRequest) { r.Amount = -5 },
		"above what is refundable": func(r *store.StartRequest) { r.Amount = 4001 },
		"no reason":                func(r *store.StartRequest) { r.Reason = "   " },
		"no request ID":            func(r *store.StartRequest) { r.ClientRequestID = "" },
		"no order":                 func(r *store.StartRequest) { r.OrderID = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			req := valid
			mutate(&req)
			_, _, err := f.s.StartRun(ctx, req)
			if got := store.ErrorCode(err); got != store.CodeInvalid {
				t.Errorf("code = %q (err %v), want %q", got, err, store.CodeInvalid)
			}
		})
	}
	if got := count(t, f.s, `SELECT count(*) FROM runs`); got != 1 {
		t.Errorf("runs = %d, want 1 (only the reserving run)", got)
	}
	t.Run("exactly what is refundable", func(t *testing.T) {
		req := valid
		req.Amount = 4000
		if _, _, err := f.s.StartRun(ctx, req); err != nil {
			t.Errorf("StartRun: %v", err)
		}
	})
}

func TestAppend_ConcurrentSeqsHaveNoGaps(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := f.start(t, "k", 100) // seq 1 is run.created
	const workers, each = 8, 500
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if _, err := f.s.Append(context.Background(), run.ID, store.EventOf(store.NarrationDelta{Text: fmt.Sprintf("w%d-%d ", w, i)})); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const want = workers*each + 1
	var got struct {
		N, Min, Max, Distinct int
	}
	if err := storetest.DB(t, f.s).QueryRowx(`SELECT count(*), min(seq), max(seq), count(DISTINCT seq) FROM run_events WHERE run_id = $1`, run.ID).
		Scan(&got.N, &got.Min, &got.Max, &got.Distinct); err != nil {
		t.Fatal(err)
	}
	if got.N != want || got.Min != 1 || got.Max != want || got.Distinct != want {
		t.Errorf("events: count %d, seqs %d..%d, distinct %d; want %d events, 1..%d", got.N, got.Min, got.Max, got.Distinct, want, want)
	}
	r, err := f.s.RunByID(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.LastSeq != want {
		t.Errorf("last_seq = %d, want %d", r.LastSeq, want)
	}
}

func TestAppend_RunsDoNotWaitForEachOther(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, "a", 100)
	b := f.start(t, "b", 100)
	ctx := context.Background()
	// Hold run a's row lock in an open transaction.
	tx, err := storetest.DB(t, f.s).BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM runs WHERE id = $1 FOR UPDATE`, a.ID); err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := f.s.Append(bctx, b.ID, store.EventOf(store.NarrationDelta{})); err != nil {
		t.Fatalf("append to run b while run a is locked: %v", err)
	}
	// And run a's append does wait: it proceeds once the lock is released.
	done := make(chan error, 1)
	go func() {
		_, err := f.s.Append(ctx, a.ID, store.EventOf(store.NarrationDelta{}))
		done <- err
	}()
	testkit.WaitUntil(t, "the append to run a to wait on its row lock", 10*time.Second, func() bool {
		return count(t, f.s, `SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
	})
	select {
	case err := <-done:
		t.Fatalf("append to locked run a returned while locked: %v", err)
	default:
	}
	tx.Rollback()
	if err := <-done; err != nil {
		t.Fatalf("append to run a after unlock: %v", err)
	}
}

func TestAppend_UnknownRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.s.Append(context.Background(), uuid.New(), store.EventOf(store.NarrationDelta{}))
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound", err)
	}
}

func TestListener_WakesOnCommittedAppend(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := f.start(t, "k", 100)
	ctx := context.Background()
	l := store.NewListener(f.s.URL(), testLogger(t))
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	wake, cancel := l.Subscribe(store.RunTopic(run.ID.String()))
	defer cancel()
	if _, err := f.s.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{})); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up within 10s of a committed append")
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// TestStartRun_BadBytesRefused: PostgreSQL refuses NUL and invalid UTF-8
// with an error that used to surface as a 500; they are a mistake in the
// request, refused in words before the database sees them, like other
// control characters that would hide in pages and logs.
func TestStartRun_BadBytesRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	valid := store.StartRequest{OwnerID: f.customer.ID, ClientRequestID: "v", OrderID: f.order.ID, Amount: 100, Reason: "why"}
	for _, tc := range []struct {
		name   string
		mutate func(r *store.StartRequest)
		says   string
	}{
		{"NUL in reason", func(r *store.StartRequest) { r.Reason = "torn\x00sole" }, "reason"},
		{"invalid UTF-8 in reason", func(r *store.StartRequest) { r.Reason = "torn \xff sole" }, "reason"},
		{"bell in reason", func(r *store.StartRequest) { r.Reason = "torn\asole" }, "reason"},
		{"escape in reason", func(r *store.StartRequest) { r.Reason = "torn\x1b[2Jsole" }, "reason"},
		{"NUL in request ID", func(r *store.StartRequest) { r.ClientRequestID = "k\x00" }, "request ID"},
		{"invalid UTF-8 in request ID", func(r *store.StartRequest) { r.ClientRequestID = "k\xc3" }, "request ID"},
		{"tab in request ID", func(r *store.StartRequest) { r.ClientRequestID = "k\tl" }, "request ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := valid
			tc.mutate(&req)
			_, _, err := f.s.StartRun(ctx, req)
			if got := store.ErrorCode(err); got != store.CodeInvalid {
				t.Fatalf("code = %q (err %v), want %q", got, err, store.CodeInvalid)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %q, want it to name the %s", err, tc.says)
			}
		})
	}
	if got := count(t, f.s, `SELECT count(*) FROM runs`); got != 0 {
		t.Errorf("runs = %d, want none", got)
	}
	t.Run("tabs and line breaks in reason", func(t *testing.T) {
		req := valid
		req.ClientRequestID = "multiline"
		req.Reason = "Sole came off.\r\n\tSecond line: ünïcode ✓"
		run, _, err := f.s.StartRun(ctx, req)
		if err != nil {
			t.Fatalf("StartRun: %v", err)
		}
		if run.Reason != req.Reason {
			t.Errorf("reason = %q, want %q", run.Reason, req.Reason)
		}
	})
}
