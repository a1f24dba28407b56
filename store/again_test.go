package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// refund ends run as the provider confirming its refund does.
func (f *fixture) refund(t *testing.T, run *store.Run) {
	t.Helper()
	ctx := context.Background()
	op, err := f.s.SubmitOperation(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpSucceeded, ProviderRef: "re_1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.FinishRun(ctx, run.ID, store.StateCompleted, store.Say("Refunded.")); err != nil {
		t.Fatal(err)
	}
}

// wantConflict checks err is a conflict that names the run's state.
func wantConflict(t *testing.T, err error, state string) {
	t.Helper()
	var se *store.Error
	if !errors.As(err, &se) || se.Code != store.CodeConflict || se.State != state {
		t.Errorf("err = %v, want a conflict with state %s", err, state)
	}
}

// TestAskAgainOf_OnlyAnOwnRunThatEndedWithoutARefund: a run that failed or
// was canceled may be asked again for by its owner, with its order and
// amount; one that refunded or goes on is a conflict with its state;
// someone else's is not found.
func TestAskAgainOf_OnlyAnOwnRunThatEndedWithoutARefund(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	going := f.start(t, "going", 100)
	failed := f.start(t, "failed", 200)
	if _, err := f.s.FinishRun(ctx, failed.ID, store.StateFailed, store.Say("Not refunded.")); err != nil {
		t.Fatal(err)
	}
	canceled := f.start(t, "canceled", 300)
	if _, err := f.s.FinishRun(ctx, canceled.ID, store.StateCanceled, store.Say("Canceled.")); err != nil {
		t.Fatal(err)
	}
	refunded := f.start(t, "refunded", 400)
	f.refund(t, refunded)

	for _, r := range []*store.Run{failed, canceled} {
		a, err := f.s.AskAgainOf(ctx, f.customer.ID, r.ID)
		if err != nil {
			t.Fatalf("%s: %v", r.State, err)
		}
		if want := fmt.Sprint([]store.RefundItem{{OrderID: r.OrderID, Amount: r.Amount}}); a.Run.ID != r.ID || fmt.Sprint(a.Refunds) != want {
			t.Errorf("ask again for %s: %s %v, want %s", r.ID, a.Run.ID, a.Refunds, want)
		}
	}
	_, err := f.s.AskAgainOf(ctx, f.customer.ID, going.ID)
	wantConflict(t, err, store.StateCreated)
	_, err = f.s.AskAgainOf(ctx, f.customer.ID, refunded.ID)
	wantConflict(t, err, store.StateCompleted)
	for _, who := range []struct {
		name  string
		owner int64
		run   uuid.UUID
	}{{"another's", f.approver.ID, failed.ID}, {"none", f.customer.ID, uuid.New()}} {
		if _, err := f.s.AskAgainOf(ctx, who.owner, who.run); store.ErrorCode(err) != store.CodeNotFound {
			t.Errorf("%s: err = %v, want not found", who.name, err)
		}
	}
}

// TestAskAgainOf_FamilyCopiesTheRefundsNotMade: a request partly refunded
// is asked again for its refunds that were not made; one wholly refunded
// is a conflict.
func TestAskAgainOf_FamilyCopiesTheRefundsNotMade(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	fam, req := f.family(t, "partly")
	f.refund(t, &fam.Children[0])
	for _, c := range fam.Children[1:] {
		if _, err := f.s.FinishRun(ctx, c.ID, store.StateFailed, store.Say("Not refunded.")); err != nil {
			t.Fatal(err)
		}
	}
	a, err := f.s.AskAgainOf(ctx, f.customer.ID, fam.Parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(a.Refunds), fmt.Sprint(req.Refunds[1:]); got != want || a.Run.Reason != req.Reason {
		t.Errorf("refunds %s, reason %q; want %s, %q", got, a.Run.Reason, want, req.Reason)
	}
	// A child that ended without a refund is asked again for alone.
	if a, err := f.s.AskAgainOf(ctx, f.customer.ID, fam.Children[2].ID); err != nil || len(a.Refunds) != 1 || a.Refunds[0] != req.Refunds[2] {
		t.Errorf("child: %+v, %v", a, err)
	}

	whole, _ := f.family(t, "whole")
	for i := range whole.Children {
		f.refund(t, &whole.Children[i])
	}
	_, err = f.s.AskAgainOf(ctx, f.customer.ID, whole.Parent.ID)
	wantConflict(t, err, store.StateCompleted)
}

// TestStartRun_AskAgainIsIdempotentAndLeavesTheOldRun: asking again starts
// a run with its own key that names the old run; the same key and run
// return it, the same key for another run (or none) is a conflict; a run
// that refunded cannot be asked again for; the old run is never written.
func TestStartRun_AskAgainIsIdempotentAndLeavesTheOldRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	old := f.start(t, "old", 500)
	if _, err := f.s.FinishRun(ctx, old.ID, store.StateFailed, store.Say("Not refunded.")); err != nil {
		t.Fatal(err)
	}
	before, err := f.s.RunByID(ctx, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	req := store.StartRequest{OwnerID: f.customer.ID, ClientRequestID: "again", OrderID: old.OrderID, Amount: old.Amount,
		Reason: old.Reason, RetryOf: uuid.NullUUID{UUID: old.ID, Valid: true}}
	run, created, err := f.s.StartRun(ctx, req)
	if err != nil || !created {
		t.Fatalf("ask again: created %v, %v", created, err)
	}
	if run.RetryOf != req.RetryOf || run.ID == old.ID {
		t.Errorf("new run %s retry_of %v, want a new run naming %s", run.ID, run.RetryOf, old.ID)
	}
	same, created, err := f.s.StartRun(ctx, req)
	if err != nil || created || same.ID != run.ID {
		t.Errorf("repeat: %v created %v, %v; want %s", same, created, err, run.ID)
	}
	other := f.start(t, "other", 100)
	if _, err := f.s.FinishRun(ctx, other.ID, store.StateCanceled, store.Say("Canceled.")); err != nil {
		t.Fatal(err)
	}
	for name, retryOf := range map[string]uuid.NullUUID{"another run": {UUID: other.ID, Valid: true}, "no run": {}} {
		r := req
		r.RetryOf = retryOf
		if _, _, err := f.s.StartRun(ctx, r); !errors.Is(err, store.ErrIdempotencyConflict) {
			t.Errorf("same key, %s: err = %v, want an idempotency conflict", name, err)
		}
	}
	// The new run goes on: it is not asked again for until it ends.
	r := req
	r.ClientRequestID, r.RetryOf = "again-again", uuid.NullUUID{UUID: run.ID, Valid: true}
	_, _, err = f.s.StartRun(ctx, r)
	wantConflict(t, err, store.StateCreated)

	after, err := f.s.RunByID(ctx, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprintf("%+v", *after), fmt.Sprintf("%+v", *before); got != want {
		t.Errorf("old run changed:\n%s\nwant\n%s", got, want)
	}
	if n := count(t, f.s, `SELECT count(*) FROM runs WHERE retry_of = $1`, old.ID); n != 1 {
		t.Errorf("runs asking again for the old one = %d, want 1", n)
	}
	if problems, err := f.s.Verify(ctx); err != nil || len(problems) > 0 {
		t.Errorf("verify: %v %v", problems, err)
	}
	// verify names a run that asks again for one that refunded.
	refunded := f.start(t, "refunded", 100)
	f.refund(t, refunded)
	if _, err := storetest.DB(t, f.s).ExecContext(ctx, `UPDATE runs SET retry_of = $1 WHERE id = $2`, refunded.ID, run.ID); err != nil {
		t.Fatal(err)
	}
	if problems, err := f.s.Verify(ctx); err != nil || len(problems) != 1 || !strings.Contains(problems[0], "refunded all it asked for") {
		t.Errorf("verify after a forged link: %v %v, want the one problem", problems, err)
	}
}

// TestRetriesOf_LinksBothWaysAndTheChain: a run's retries name the run it
// asks again for, those asking again for it, and the whole chain in
// order.
func TestRetriesOf_LinksBothWaysAndTheChain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var chain []*store.Run
	var prev uuid.NullUUID
	for i := range 3 {
		r, _, err := f.s.StartRun(ctx, store.StartRequest{OwnerID: f.customer.ID, ClientRequestID: fmt.Sprint("k", i),
			OrderID: f.order.ID, Amount: 100, Reason: "broken", RetryOf: prev})
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if r, err = f.s.FinishRun(ctx, r.ID, store.StateFailed, store.Say("Not refunded.")); err != nil {
				t.Fatal(err)
			}
		}
		chain, prev = append(chain, r), uuid.NullUUID{UUID: r.ID, Valid: true}
	}
	mid, err := f.s.RetriesOf(ctx, chain[1])
	if err != nil {
		t.Fatal(err)
	}
	if mid.Of == nil || mid.Of.ID != chain[0].ID || len(mid.Again) != 1 || mid.Again[0].ID != chain[2].ID {
		t.Errorf("middle: of %v, again %v; want %s and %s", mid.Of, mid.Again, chain[0].ID, chain[2].ID)
	}
	var ids []uuid.UUID
	for _, r := range mid.Chain {
		ids = append(ids, r.ID)
	}
	if want := []uuid.UUID{chain[0].ID, chain[1].ID, chain[2].ID}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("chain %v, want %v", ids, want)
	}
	alone := f.start(t, "alone", 100)
	if r, err := f.s.RetriesOf(ctx, alone); err != nil || r.Of != nil || r.Again != nil || r.Chain != nil {
		t.Errorf("a run of its own: %+v, %v", r, err)
	}
}
