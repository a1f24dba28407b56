package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// claimed starts a run and claims it for worker "w"; it returns the run as
// claimed, whose LastSeq is what the worker has seen.
func (f *fixture) claimed(t *testing.T) *store.Run {
	t.Helper()
	f.start(t, uuid.NewString(), 100)
	r, _, err := f.s.ClaimNext(context.Background(), "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// dueIn is how long until the run is due again, by the database's clock.
func dueIn(t *testing.T, s *store.Store, runID uuid.UUID) time.Duration {
	t.Helper()
	var micros int64
	if err := storetest.DB(t, s).Get(&micros, `SELECT (extract(epoch FROM next_attempt_at - now()) * 1e6)::bigint
        FROM runs WHERE id = $1 AND lease_owner IS NULL`, runID); err != nil {
		t.Fatal(err)
	}
	return time.Duration(micros) * time.Microsecond
}

// The executor's own events of its last step (narration here) used to
// make the run due at once, which turned every backoff into a retry.
func TestReleaseRun_OwnEventsKeepTheBackoff(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	r := f.claimed(t)
	if _, err := f.s.Append(ctx, r.ID, store.EventOf(store.NarrationDelta{Text: "trying again "})); err != nil {
		t.Fatal(err)
	}
	if err := f.s.ReleaseRun(ctx, r.ID, "w", r.LastSeq, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := dueIn(t, f.s, r.ID); got < 59*time.Minute {
		t.Errorf("run due in %v, want about an hour", got)
	}
}

func TestReleaseRun_CommandWakesRunAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	r := f.claimed(t)
	if _, err := f.s.RequestCancel(ctx, r.ID, f.customer.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.s.ReleaseRun(ctx, r.ID, "w", r.LastSeq, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := dueIn(t, f.s, r.ID); got > 0 {
		t.Errorf("run due in %v after a cancel, want at once", got)
	}
}

// A command that holds the run's lock while the release waits for it must
// still wake the run: the release must not decide from what it read before
// the command committed.
func TestReleaseRun_CommandCommittingDuringReleaseWakesRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	db := storetest.DB(t, f.s)
	r := f.claimed(t)
	// A cancel in progress, written as RequestCancel writes it.
	tx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`UPDATE runs SET last_seq = last_seq + 1, cancel_requested_at = now(), next_attempt_at = now()
        WHERE id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO run_events (run_id, correlation_id, seq, event_id, type, class) VALUES ($1, $1, $2, $3, 'cancel.requested', 'business')`,
		r.ID, r.LastSeq+1, uuid.New()); err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() { released <- f.s.ReleaseRun(ctx, r.ID, "w", r.LastSeq, time.Hour) }()
	testkit.WaitUntil(t, "the release to wait for the cancel's lock", 10*time.Second, func() bool {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if got := dueIn(t, f.s, r.ID); got > 0 {
		t.Errorf("run due in %v after a cancel, want at once", got)
	}
}

func TestNoteRefusal_BudgetCountsFromFirstRefusal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	db := storetest.DB(t, f.s)
	r := f.start(t, "k", 100)
	op, err := f.s.SubmitOperation(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	first, err := f.s.NoteRefusal(ctx, op.ID, "503")
	if err != nil {
		t.Fatal(err)
	}
	if first.Count != 1 || first.For != 0 {
		t.Errorf("first refusal = %+v, want count 1 and no time yet", first)
	}
	// A resume and a reconcile pass in between spend nothing.
	if _, err := db.Exec(`UPDATE operations SET first_refused_at = now() - interval '10 seconds' WHERE id = $1`, op.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.BeginSubmit(ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpReconciling, Reason: "timeout"}); err != nil {
		t.Fatal(err)
	}
	second, err := f.s.NoteRefusal(ctx, op.ID, "503")
	if err != nil {
		t.Fatal(err)
	}
	if second.Count != 2 || second.For < 10*time.Second || second.For > time.Minute {
		t.Errorf("second refusal = %+v, want count 2, about 10s after the first", second)
	}
	ops, err := f.s.OperationsByRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !ops[0].LastCallRefused {
		t.Error("after a refusal the operation does not say its last call was refused")
	}
	if _, err := f.s.BeginSubmit(ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	if ops, err = f.s.OperationsByRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if ops[0].LastCallRefused {
		t.Error("once a retry began the operation still says its last call was refused: a crash now would skip reconciling")
	}
}

// A worker renews the lease of each run it holds every third of the lease
// (every second with the 3 s default): this is what each renewal costs.
func BenchmarkRenewLease(b *testing.B) {
	s := storetest.MustOpen(b)
	p := storetest.MustSeedParties(b, s, 10000)
	ctx := context.Background()
	if _, _, err := s.StartRun(ctx, store.StartRequest{OwnerID: p.Customer.ID, ClientRequestID: "k",
		OrderID: p.Order.ID, Amount: 100, Reason: "x"}); err != nil {
		b.Fatal(err)
	}
	r, _, err := s.ClaimNext(ctx, "w", 3*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := s.RenewLease(ctx, r.ID, "w", 3*time.Second); err != nil {
			b.Fatal(err)
		}
	}
}
