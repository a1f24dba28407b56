package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
	"github.com/refundd/refundd/views"
)

// TestStreamPool_ReadsAndWakeupsDoNotWaitForWriters: with every connection
// of the main pool taken by a writer (here its only one, held by a
// transaction), a stream's read of the log answers and a wake-up is still
// sent: both go through the stream pool.
func TestStreamPool_ReadsAndWakeupsDoNotWaitForWriters(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), storetest.URL(t), store.PoolSize(1), store.StreamPoolSize(1), store.WithAnswers(views.Answers{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := storetest.MustSeedParties(t, st, 10000)
	run, _, err := st.StartRun(context.Background(), store.StartRequest{OwnerID: p.Customer.ID,
		ClientRequestID: "pool", OrderID: p.Order.ID, Amount: 1, Reason: "pool"})
	if err != nil {
		t.Fatal(err)
	}
	l := pq.NewListener(st.URL(), 10*time.Millisecond, time.Second, nil)
	t.Cleanup(func() { l.Close() })
	if err := l.Listen(store.ChannelEvents); err != nil {
		t.Fatal(err)
	}
	held := errors.New("held the main pool")
	_, _, err = st.Mutate(context.Background(), run.ID, func(*sqlx.Tx, *store.Run) (string, []store.NewEvent, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		evs, err := st.EventsAfter(ctx, run.ID, 0, 10)
		if err != nil || len(evs) != int(run.LastSeq) {
			t.Errorf("EventsAfter with the main pool taken: %d events, err %v; want %d", len(evs), err, run.LastSeq)
		}
		st.Wake(store.ChannelEvents, "pool-test")
		for {
			select {
			case n := <-l.Notify:
				if n == nil || n.Extra != "pool-test" {
					continue // the start's own notice, or a reconnect
				}
			case <-ctx.Done():
				t.Error("no wake-up within 5 s while the main pool was taken")
			}
			return "", nil, held
		}
	})
	if !errors.Is(err, held) {
		t.Fatalf("err = %v, want %v", err, held)
	}
}

// TestPrepare_NoPoolDeadlock: a statement prepared for the first time
// waits for a connection of the pool; meanwhile a transaction that holds
// the pool's last connection must still reach its own prepared statements
// (the append at its end). Preparing once held the store's statement lock
// while it waited, and every transaction on the full pool waited for that
// lock: 100 starts and reads at once stalled `refundd dev` for good.
func TestPrepare_NoPoolDeadlock(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), storetest.URL(t), store.PoolSize(1), store.WithAnswers(views.Answers{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := storetest.MustSeedParties(t, st, 10000)
	run, _, err := st.StartRun(context.Background(), store.StartRequest{OwnerID: p.Customer.ID,
		ClientRequestID: "prepare", OrderID: p.Order.ID, Amount: 1, Reason: "prepare"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	read := make(chan error, 1)
	_, _, err = st.Mutate(ctx, run.ID, func(*sqlx.Tx, *store.Run) (string, []store.NewEvent, error) {
		// A first read of its kind prepares its statement: it waits for
		// the connection this transaction holds.
		go func() {
			_, _, err := st.RunForAccess(ctx, run.ID)
			read <- err
		}()
		time.Sleep(200 * time.Millisecond)
		return "", []store.NewEvent{store.EventOf(store.NarrationDelta{Text: "still here"})}, nil
	})
	if err != nil {
		t.Fatalf("the transaction's append while a first prepare waited for the pool: %v", err)
	}
	if err := <-read; err != nil {
		t.Errorf("the read once the pool was free: %v", err)
	}
}

// TestWarm_OpensEachPoolsConnectionsBeforeTheFirstRequest: a server just
// started opens its connections before the first wave of streams, not
// within it: PostgreSQL has a process for each warmed connection of both
// pools (no more than a pool holds), and a stream's open then starts none.
func TestWarm_OpensEachPoolsConnectionsBeforeTheFirstRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.URL(t), store.PoolSize(5), store.StreamPoolSize(2), store.WithAnswers(views.Answers{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := storetest.MustSeedParties(t, st, 10000)
	run, _, err := st.StartRun(ctx, store.StartRequest{OwnerID: p.Customer.ID,
		ClientRequestID: "warm", OrderID: p.Order.ID, Amount: 1, Reason: "warm"})
	if err != nil {
		t.Fatal(err)
	}
	sid, err := st.CreateSession(ctx, p.Customer.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The test's own connection, outside the store's pools.
	db, err := sqlx.Open("postgres", st.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	backends := func() int {
		var n int
		if err := db.GetContext(ctx, &n, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := backends()
	if err := st.Warm(ctx, 4); err != nil {
		t.Fatal(err)
	}
	warmed := backends()
	if warmed < 4+2 || warmed > 5+2 {
		t.Fatalf("%d processes of the store's after warming 4 of 5 and 2 of 2 (%d before), want 6 or 7", warmed, before)
	}
	if _, _, _, err := st.StreamOpen(ctx, &store.StreamCredential{SessionID: sid, RunID: run.ID}); err != nil {
		t.Fatal(err)
	}
	if n := backends(); n != warmed {
		t.Errorf("a stream's open after warming: %d processes, want the %d warmed", n, warmed)
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := st.Warm(canceled, 4); err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("warming with a canceled context: %v, want context.Canceled", err)
	}
}
