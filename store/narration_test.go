package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
	"github.com/refundd/refundd/views"
)

// TestAppendNarration_BatchesKeepEachRunsOrder: many runs narrating at once
// share batches; each run's log still holds its pieces once, in the order
// they were appended, numbered without gaps.
func TestAppendNarration_BatchesKeepEachRunsOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const runs, pieces = 12, 25
	ids := make([]uuid.UUID, runs)
	for i := range ids {
		ids[i] = f.start(t, fmt.Sprintf("narr-%d", i), 1).ID
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			for p := range pieces {
				if err := f.s.AppendNarration(ctx, id, fmt.Sprintf("piece %d ", p)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		evs, err := f.s.EventsAfter(ctx, id, 0, store.MaxPage)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Fatalf("run %s: event %d has seq %d", id, i, ev.Seq)
			}
			if ev.Type == store.EventNarrationDelta {
				got = append(got, narrationText(t, ev))
			}
		}
		if len(got) != pieces {
			t.Fatalf("run %s: %d narration events, want %d", id, len(got), pieces)
		}
		for p, text := range got {
			if want := fmt.Sprintf("piece %d ", p); text != want {
				t.Fatalf("run %s: narration %d = %q, want %q", id, p, text, want)
			}
		}
	}
	if problems, err := f.s.Verify(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("Verify: %v %v", problems, err)
	}
}

// TestAppendNarration_MissingRun: a piece for a run that does not exist is
// ErrNotFound and writes nothing.
func TestAppendNarration_MissingRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	err := f.s.AppendNarration(context.Background(), uuid.New(), "nobody")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if n := count(t, f.s, `SELECT count(*) FROM run_events WHERE type = 'narration.delta'`); n != 0 {
		t.Fatalf("%d narration rows, want 0", n)
	}
}

func narrationText(t *testing.T, ev store.Event) string {
	t.Helper()
	p, err := store.PayloadOf[store.NarrationDelta](ev)
	if err != nil {
		t.Fatal(err)
	}
	return p.Text
}

// TestAppendNarration_CrashLosesNarrationButNoSeqIsReused stops PostgreSQL
// with an immediate shutdown (its crash) while narration sits committed
// but unflushed, as a client already saw it. After the restart the lost
// narration is gone, the client's cursor is a reset (ahead of the log at
// first, inside the skipped seqs once the run goes on), no seq the client
// held ever names a different event, and a cursor at a kept event resumes.
func TestAppendNarration_CrashLosesNarrationButNoSeqIsReused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := privateDir(t)
	log := slog.New(slog.DiscardHandler)
	// Asynchronous commits stay in PostgreSQL's WAL buffers until the WAL
	// writer's next round: make that round late, so the crash finds them.
	st, closeDB := openPrivate(t, dir, log)
	for _, q := range []string{
		`ALTER SYSTEM SET wal_writer_delay = '10s'`,
		`ALTER SYSTEM SET wal_writer_flush_after = '64MB'`,
		`ALTER SYSTEM SET autovacuum = off`,
	} {
		if _, err := storetest.DB(t, st).ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	closeDB() // a clean stop; the settings apply from the next start
	st, closeDB = openPrivate(t, dir, log)
	defer func() { closeDB() }()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	p := storetest.MustSeedParties(t, st, 10000)
	run, _, err := st.StartRun(ctx, store.StartRequest{OwnerID: p.Customer.ID, ClientRequestID: "crash",
		OrderID: p.Order.ID, Amount: 100, Reason: "crash test"})
	if err != nil {
		t.Fatal(err)
	}
	durable := lastSeq(t, st, run.ID)
	// What a client watching the run has seen: every seq up to seen.
	seen := narrateUnflushed(t, st, run.ID)
	cluster, err := devdb.NewCluster(dir, 5433)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	closeDB()
	st, closeDB = openPrivate(t, dir, log)

	after := lastSeq(t, st, run.ID)
	if after >= seen {
		// The WAL writer's round came between the check and the kill.
		t.Fatalf("last_seq %d after the crash, %d before: no narration was lost, so this test proved nothing", after, seen)
	}
	if after < durable {
		t.Fatalf("last_seq %d after the crash is below the durable %d: a business commit was lost", after, durable)
	}
	// Nothing appended yet: the client's cursor is ahead of the log.
	if _, err := st.EventsAfter(ctx, run.ID, seen, 100); !errors.Is(err, store.ErrCursorInvalid) {
		t.Fatalf("cursor %d ahead of last_seq %d: err = %v, want ErrCursorInvalid (a reset)", seen, after, err)
	}
	// The run goes on: its next event takes a seq no client has held.
	evs, err := st.Append(ctx, run.ID, store.EventOf(store.RunPlanning{}))
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].Seq <= seen {
		t.Fatalf("the first event after the crash has seq %d; a client already holds seq %d for another event", evs[0].Seq, seen)
	}
	if _, err := st.EventsAfter(ctx, run.ID, seen, 100); !errors.Is(err, store.ErrCursorInvalid) {
		t.Fatalf("cursor %d after the restart: err = %v, want ErrCursorInvalid (a reset: it names no kept event)", seen, err)
	}
	// The skip is no loss: a cursor at the last kept event resumes, and
	// retention's floor stays where it was.
	got, err := st.EventsAfter(ctx, run.ID, after, 100)
	if err != nil || len(got) != 1 || got[0].Seq != evs[0].Seq {
		t.Fatalf("events after the kept seq %d = %v, %v; want the new event %d", after, got, err, evs[0].Seq)
	}
	if r, err := st.RunByID(ctx, run.ID); err != nil || r.ReplayFloor != 0 {
		t.Fatalf("replay_floor after the restart = %v (%v), want 0: nothing was pruned", r, err)
	}
	if problems, err := st.Verify(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("Verify: %v %v", problems, err)
	}
}

// narrateUnflushed appends narration until some of it is committed but not
// yet flushed (PostgreSQL's insert position is past its flush position),
// and returns the run's last_seq then.
func narrateUnflushed(t *testing.T, st *store.Store, runID uuid.UUID) int64 {
	t.Helper()
	ctx := context.Background()
	for i := range 200 {
		if err := st.AppendNarration(ctx, runID, fmt.Sprintf("word %d ", i)); err != nil {
			t.Fatal(err)
		}
		var unflushed bool
		if err := storetest.DB(t, st).GetContext(ctx, &unflushed,
			`SELECT pg_current_wal_insert_lsn() > pg_current_wal_flush_lsn()`); err != nil {
			t.Fatal(err)
		}
		if unflushed && i >= 5 {
			return lastSeq(t, st, runID)
		}
	}
	t.Fatal("every narration commit was flushed at once: synchronous_commit=off is not in effect")
	return 0
}

func lastSeq(t *testing.T, st *store.Store, runID uuid.UUID) int64 {
	t.Helper()
	var n int64
	if err := storetest.DB(t, st).GetContext(context.Background(), &n, `SELECT last_seq FROM runs WHERE id = $1`, runID); err != nil {
		t.Fatal(err)
	}
	return n
}

// privateDir is a folder for a cluster of the test's own that the postgres
// user can enter, removed (with its server stopped) when the test ends.
func privateDir(t *testing.T) string {
	t.Helper()
	base := "/dev/shm"
	if st, err := os.Stat(base); err != nil || !st.IsDir() {
		base = os.TempDir()
	}
	dir, err := os.MkdirTemp(base, "refundd-crash-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := devdb.NewCluster(dir, 5433); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = c.Kill(ctx)
		}
		os.RemoveAll(dir)
	})
	return dir
}

func openPrivate(t *testing.T, dir string, log *slog.Logger) (*store.Store, func()) {
	t.Helper()
	st, closeDB, err := devdb.OpenPrivate(context.Background(), dir, log)
	if err != nil {
		t.Fatal(err)
	}
	return st, closeDB
}

// TestAppendNarration_NeverDeadlocks: narration batches from two processes
// cover overlapping runs while a third party's transactions lock the same
// runs one statement at a time in id order, as any transaction that locks
// several runs must. A batch locks its runs in that order too, so
// PostgreSQL finds no deadlock (it counts them per database), and every
// run's log holds each process's pieces once, in the order that process
// appended them, without gaps.
func TestAppendNarration_NeverDeadlocks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const runs, pieces, app = 24, 30, "narration-deadlock-test"
	ids := make([]uuid.UUID, runs)
	for i := range ids {
		ids[i] = f.start(t, fmt.Sprintf("dl-%d", i), 1).ID
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	url := f.s.URL() + "&application_name=" + app
	var wg sync.WaitGroup
	for proc := range 2 {
		st, err := store.Open(ctx, url, store.WithAnswers(views.Answers{}))
		if err != nil {
			t.Fatal(err)
		}
		var writers sync.WaitGroup
		for _, id := range ids {
			writers.Go(func() {
				for p := range pieces {
					if err := st.AppendNarration(ctx, id, fmt.Sprintf("%d:%d", proc, p)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Go(func() { writers.Wait(); st.Close() })
	}
	lockInOrder(t, url, ids, &wg)
	wg.Wait()
	if n := deadlocksOf(t, storetest.DB(t, f.s), app); n != 0 {
		t.Fatalf("PostgreSQL found %d deadlocks between the batches and the ordered transactions, want 0", n)
	}
	for _, id := range ids {
		evs, err := f.s.EventsAfter(ctx, id, 0, store.MaxPage)
		if err != nil {
			t.Fatal(err)
		}
		next := [2]int{}
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Fatalf("run %s: event %d has seq %d", id, i, ev.Seq)
			}
			if ev.Type != store.EventNarrationDelta {
				continue
			}
			var proc, p int
			if _, err := fmt.Sscanf(narrationText(t, ev), "%d:%d", &proc, &p); err != nil || p != next[proc] {
				t.Fatalf("run %s: seq %d is %q, want process %d's piece %d", id, ev.Seq, narrationText(t, ev), proc, next[proc])
			}
			next[proc]++
		}
		if next != [2]int{pieces, pieces} {
			t.Fatalf("run %s: %v pieces per process, want %d each", id, next, pieces)
		}
	}
}

// lockInOrder runs, until wg's other members are done, transactions that
// lock the runs ids (sorted) one statement at a time, holding each lock a
// moment before taking the next. A deadlock fails the test (once the
// writers are done); the
// connection is closed before it returns.
func lockInOrder(t *testing.T, url string, ids []uuid.UUID, wg *sync.WaitGroup) {
	t.Helper()
	db, err := sqlx.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return
		default:
		}
		tx, err := db.Beginx()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if _, err := tx.Exec(`SELECT pg_sleep(0.001) FROM runs WHERE id = $1 FOR UPDATE`, id); err != nil {
				tx.Rollback()
				t.Errorf("locking run %s in order: %v", id, err)
				return
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// deadlocksOf waits for every connection named app to end (a backend
// reports its deadlocks at the latest when it exits, bounded at 10 s) and
// returns the deadlocks PostgreSQL counted in the database.
func deadlocksOf(t *testing.T, db *sqlx.DB, app string) int {
	t.Helper()
	ctx := context.Background()
	testkit.WaitUntil(t, "the connections named "+app+" to end", 10*time.Second, func() bool {
		var left int
		if err := db.GetContext(ctx, &left, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app); err != nil {
			t.Fatal(err)
		}
		return left == 0
	})
	var n int
	if err := db.GetContext(ctx, &n, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`); err != nil {
		t.Fatal(err)
	}
	return n
}
