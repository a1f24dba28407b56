package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// TestRefundKey_SameRequestSameKey: the provider's key for a refund is
// derived from what the customer asked (owner, request key, order), so the
// same request started again after the database forgot it has the same
// key, and the operation the ledger records carries it; any other request
// has another.
func TestRefundKey_SameRequestSameKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "k1", 100)
	key, err := f.s.RefundKey(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	again := *run
	again.ID = uuid.New() // a new run for the same request
	if k, _ := f.s.RefundKey(ctx, &again); k != key {
		t.Errorf("the same request's key changed with its run: %s, then %s", key, k)
	}
	for name, other := range map[string]store.Run{
		"another owner":       {OwnerID: run.OwnerID + 1, ClientRequestID: run.ClientRequestID, OrderID: run.OrderID},
		"another request key": {OwnerID: run.OwnerID, ClientRequestID: "k2", OrderID: run.OrderID},
		"another order":       {OwnerID: run.OwnerID, ClientRequestID: run.ClientRequestID, OrderID: run.OrderID + 1},
	} {
		if k, _ := f.s.RefundKey(ctx, &other); k == key {
			t.Errorf("%s has the same key %s", name, k)
		}
	}
	if k, _ := f.s.RefundKey(ctx, run); k.Version() != 5 {
		t.Errorf("key %s is a version %d UUID, want 5 (derived)", k, k.Version())
	}

	if _, err := f.s.RequestApproval(ctx, run.ID, store.ActionProposed{Amount: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Approve(ctx, run.ID, f.approver.ID, ""); err != nil {
		t.Fatal(err)
	}
	op, err := f.s.SubmitOperation(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if op.ID != key {
		t.Errorf("operation %s, want the request's key %s", op.ID, key)
	}

	t.Run("a family's children", func(t *testing.T) {
		fam, _ := f.family(t, "fam")
		var keys []uuid.UUID
		for _, c := range fam.Children {
			k, err := f.s.RefundKey(ctx, &c)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := f.s.RefundKey(ctx, &store.Run{OwnerID: fam.Parent.OwnerID, ClientRequestID: "fam", OrderID: c.OrderID})
			if k != want {
				t.Errorf("child on order %d: key %s, want the family's key and the order's %s", c.OrderID, k, want)
			}
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
		if len(slices.Compact(keys)) != len(fam.Children) {
			t.Errorf("children share keys: %v", keys)
		}
	})
}

// TestCheckTimeline_NewTimelineMarksUnfinishedRuns: on a timeline no check
// has seen (a promotion), the first check marks every unfinished refund run
// for a provider check, once; a marked run leaves the approval queue, and
// nobody may approve it until the provider has answered. A finished run
// is left alone.
func TestCheckTimeline_NewTimelineMarksUnfinishedRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	db := storetest.DB(t, f.s)
	waiting := f.queued(t, "waiting", 100)
	fresh := f.start(t, "fresh", 100)
	done := f.start(t, "done", 100)
	if _, err := f.s.FinishRun(ctx, done.ID, store.StateFailed, store.Say("no")); err != nil {
		t.Fatal(err)
	}
	c, err := f.s.CheckTimeline(ctx)
	if err != nil || c.New || c.Marked != 0 {
		t.Fatalf("on the migrated database's own timeline: %+v, %v; want known, nothing marked", c, err)
	}

	// As after a promotion: the database's timeline is one it never wrote on.
	if _, err := db.Exec(`DELETE FROM db_timelines`); err != nil {
		t.Fatal(err)
	}
	if c, err = f.s.CheckTimeline(ctx); err != nil || !c.New || c.Marked != 2 {
		t.Fatalf("first check on a new timeline: %+v, %v; want new, 2 runs marked", c, err)
	}
	if c, err = f.s.CheckTimeline(ctx); err != nil || c.New || c.Marked != 0 {
		t.Errorf("second check: %+v, %v; want known, nothing marked", c, err)
	}
	for _, tc := range []struct {
		run  *store.Run
		want bool
	}{{waiting, true}, {fresh, true}, {done, false}} {
		r, err := f.s.RunByID(ctx, tc.run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.ProviderCheck != tc.want {
			t.Errorf("run %s (%s): provider check %t, want %t", r.ClientRequestID, r.State, r.ProviderCheck, tc.want)
		}
	}
	if page := mustQueue(t, f.s, store.QueuePlace{}, 10); len(page.Items) != 0 {
		t.Errorf("queue holds %v while its run is checked with the provider, want nothing", queueIDs(page))
	}
	d, err := f.s.Approve(ctx, waiting.ID, f.approver.ID, "")
	if err != nil || d.Outcome != store.DecisionNotAllowed || store.ErrorCode(d.Why) != store.CodeConflict {
		t.Errorf("approve a run being checked: %+v, %v; want not allowed (conflict)", d, err)
	}
	if _, err := f.s.RequestApproval(ctx, fresh.ID, store.ActionProposed{Amount: 100}); !errors.Is(err, store.ErrProviderCheck) {
		t.Errorf("ask for a decision on a run being checked: %v, want ErrProviderCheck", err)
	}

	// The provider holds nothing under the key: back in the queue.
	if err := f.s.ProviderChecked(ctx, waiting.ID); err != nil {
		t.Fatal(err)
	}
	if page := mustQueue(t, f.s, store.QueuePlace{}, 10); !slices.Equal(queueIDs(page), []uuid.UUID{waiting.ID}) {
		t.Errorf("queue after the check: %v; want the waiting run", queueIDs(page))
	}
	if d, err := f.s.Approve(ctx, waiting.ID, f.approver.ID, ""); err != nil || d.Outcome != store.DecisionAccepted {
		t.Errorf("approve once checked: %+v, %v; want accepted", d, err)
	}
}

// TestRecordFound_EndsTheRunAsTheProviderSays: a refund the provider holds
// under the run's key, which the ledger lacks, is recorded with the lookup
// that found it and ends the run in one transaction; the run's events say
// it was recovered. Recording it again, or for a run with an operation,
// changes nothing.
func TestRecordFound_EndsTheRunAsTheProviderSays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.queued(t, "lost", 100)
	key, err := f.s.RefundKey(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	found := store.Found{Outcome: store.Outcome{State: store.OpSucceeded, ProviderRef: "re_1"},
		Call: store.FoundCall{HTTPStatus: 200, Result: "refunded (reference re_1)"}, End: store.StateCompleted, Message: store.Say("Refunded.")}
	if _, err := f.s.RecordFound(ctx, run.ID, key, found); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.RecordFound(ctx, run.ID, key, found); !errors.Is(err, store.ErrAlreadyDone) {
		t.Errorf("recorded twice: %v, want ErrAlreadyDone", err)
	}
	snap, err := f.s.Snapshot(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Run.State != store.StateCompleted || len(snap.Operations) != 1 || !snap.Operations[0].Recovered ||
		snap.Operations[0].ID != key || snap.Operations[0].ProviderRef.String != "re_1" || snap.FinalMessage.Body != "Refunded." {
		t.Errorf("after RecordFound: %s, operations %+v, message %v", snap.Run.State, snap.Operations, snap.FinalMessage)
	}
	var news []store.OperationNews
	for _, ev := range snap.Events {
		if n, ok := store.OperationNewsOf(ev); ok {
			news = append(news, n)
		}
	}
	if len(news) != 1 || news[0].State != store.OpSucceeded || !news[0].Recovered {
		t.Errorf("operation events %+v, want one succeeded, recovered", news)
	}
	calls, err := f.s.ProviderCallsBegun(ctx, key)
	if err != nil || calls != 1 {
		t.Errorf("provider calls recorded: %d, %v; want the lookup", calls, err)
	}
	if p := store.ProgressOf(snap); !p.Operations[0].Recovered || p.Outcome() != store.OutcomeCompleted {
		t.Errorf("progress %+v, want completed with a recovered operation", p)
	}
	if problems, err := f.s.Verify(ctx); err != nil || len(problems) > 0 {
		t.Errorf("verify: %v %v", problems, err)
	}
}

// TestExpireApproval_NotWhileTheProviderIsAsked: a decision's deadline
// passes while the run is marked for a provider check (a failover): the
// run does not end "no money moved" before the provider has said so; once
// it has (nothing under the key), the deadline ends it.
func TestExpireApproval_NotWhileTheProviderIsAsked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "late", 100)
	if _, err := f.s.RequestApprovalWithin(ctx, run.ID, store.ActionProposed{Amount: 100}, time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if _, err := storetest.DB(t, f.s).Exec(`DELETE FROM db_timelines`); err != nil {
		t.Fatal(err)
	}
	if c, err := f.s.CheckTimeline(ctx); err != nil || c.Marked != 1 {
		t.Fatalf("check: %+v, %v; want the run marked", c, err)
	}
	if expired, err := f.s.ExpireApproval(ctx, run.ID); err != nil || expired {
		t.Errorf("expire while the provider is asked: %t, %v; want not expired", expired, err)
	}
	if err := f.s.ProviderChecked(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if expired, err := f.s.ExpireApproval(ctx, run.ID); err != nil || !expired {
		t.Errorf("expire once the provider said it holds nothing: %t, %v; want expired", expired, err)
	}
}

// TestReleaseRun_MarkedWhileLeasedIsDueAtOnce: a run marked for a provider
// check (a new timeline) while a worker held it is due at once when that
// worker lets it go, not at the time its step asked for: the release
// overwrote the mark's wake-up, so a waiting run marked as it was being
// released slept until its decision's deadline (seen under load in
// agent: TestExecutor_FailoverMarkedRunIsNotAskedAgain).
func TestReleaseRun_MarkedWhileLeasedIsDueAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	db := storetest.DB(t, f.s)
	run := f.start(t, "leased", 100)
	if _, err := f.s.CheckTimeline(ctx); err != nil {
		t.Fatal(err)
	}
	claimed, _, err := f.s.ClaimNext(ctx, "w", time.Minute)
	if err != nil || claimed.ID != run.ID {
		t.Fatalf("claim: %+v, %v; want the run", claimed, err)
	}
	if _, err := db.Exec(`DELETE FROM db_timelines`); err != nil {
		t.Fatal(err)
	}
	if c, err := f.s.CheckTimeline(ctx); err != nil || c.Marked != 1 {
		t.Fatalf("check on a new timeline: %+v, %v; want the leased run marked", c, err)
	}
	// The worker's step asks to come back in an hour.
	if err := f.s.ReleaseRun(ctx, run.ID, "w", claimed.LastSeq, time.Hour); err != nil {
		t.Fatal(err)
	}
	var due bool
	if err := db.QueryRow(`SELECT next_attempt_at <= now() FROM runs WHERE id = $1`, run.ID).Scan(&due); err != nil || !due {
		t.Errorf("marked run due at once after the release: %v, %v; want true", due, err)
	}
}
