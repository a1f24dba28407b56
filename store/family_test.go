package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// family starts a request for the fixture's order and two more orders of
// the same customer, 300, 200 and 100 cents.
func (f *fixture) family(t *testing.T, key string) (*store.Family, store.FamilyRequest) {
	t.Helper()
	ctx := context.Background()
	req := store.FamilyRequest{OwnerID: f.customer.ID, ClientRequestID: key, Reason: "late delivery", MaxChildren: 20,
		Refunds: []store.RefundItem{{OrderID: f.order.ID, Amount: 300}}}
	for i, amount := range []int64{200, 100} {
		o, err := f.s.CreateOrder(ctx, f.customer.ID, []string{"Hat", "Scarf"}[i], 1000, "EUR")
		if err != nil {
			t.Fatal(err)
		}
		req.Refunds = append(req.Refunds, store.RefundItem{OrderID: o.ID, Amount: amount})
	}
	fam, created, err := f.s.StartFamily(ctx, req)
	if err != nil || !created {
		t.Fatalf("StartFamily: created %v, err %v", created, err)
	}
	return fam, req
}

func TestStartFamily_OneTransactionOneKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	fam, req := f.family(t, "k1")
	if !fam.Parent.IsParent() || fam.Parent.Amount != 600 || fam.Parent.OrderID != 0 || len(fam.Children) != 3 {
		t.Fatalf("parent %+v with %d children", fam.Parent, len(fam.Children))
	}
	for i, c := range fam.Children {
		if c.ParentRunID.UUID != fam.Parent.ID || c.CorrelationID != fam.Parent.ID || c.Position != i+1 || c.OrderID != req.Refunds[i].OrderID {
			t.Errorf("child %d: %+v", i, c)
		}
	}
	// The parent's log: run.created, then child.started for each child.
	snap, err := f.s.Snapshot(ctx, fam.Parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range snap.Events {
		types = append(types, ev.Type)
		if ev.CorrelationID != fam.Parent.ID || ev.ParentRunID.Valid {
			t.Errorf("parent event %s: correlation %s, parent %v", ev.Type, ev.CorrelationID, ev.ParentRunID)
		}
	}
	if want := "[run.created child.started child.started child.started]"; fmt.Sprint(types) != want {
		t.Errorf("parent log %v, want %s", types, want)
	}
	child, err := f.s.EventsAfter(ctx, fam.Children[1].ID, 0, 10)
	if err != nil || len(child) != 1 || child[0].ParentRunID.UUID != fam.Parent.ID || child[0].CorrelationID != fam.Parent.ID {
		t.Fatalf("child log %+v, %v", child, err)
	}

	// A repeat returns the same family, however many race; another body is a conflict.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			again, created, err := f.s.StartFamily(ctx, req)
			if err != nil || created || again.Parent.ID != fam.Parent.ID || again.Children[2].ID != fam.Children[2].ID {
				t.Errorf("repeat: created %v, err %v", created, err)
			}
		})
	}
	wg.Wait()
	other := req
	other.Refunds = append([]store.RefundItem{}, req.Refunds...)
	other.Refunds[2].Amount = 101
	if _, _, err := f.s.StartFamily(ctx, other); !errors.Is(err, store.ErrIdempotencyConflict) {
		t.Errorf("changed body: %v, want a conflict", err)
	}
	if _, _, err := f.s.StartRun(ctx, store.StartRequest{OwnerID: f.customer.ID, ClientRequestID: "k1", OrderID: f.order.ID, Amount: 300, Reason: "late delivery"}); !errors.Is(err, store.ErrIdempotencyConflict) {
		t.Errorf("single start with a family's key: %v, want a conflict", err)
	}
	if n := count(t, f.s, `SELECT count(*) FROM runs`); n != 4 {
		t.Errorf("%d runs, want 4", n)
	}
	// Bad families change nothing.
	for _, bad := range []store.FamilyRequest{
		{Refunds: []store.RefundItem{{OrderID: f.order.ID, Amount: 1}, {OrderID: f.order.ID, Amount: 2}}},
		{Refunds: []store.RefundItem{{OrderID: f.order.ID, Amount: 10000}}},
		{Refunds: []store.RefundItem{{OrderID: f.order.ID, Amount: 1}, {OrderID: f.order.ID + 999, Amount: 1}}},
		{Refunds: []store.RefundItem{{OrderID: f.order.ID, Amount: 1}, {OrderID: f.order.ID + 1, Amount: 1}, {OrderID: f.order.ID + 2, Amount: 1}}, MaxChildren: 2},
	} {
		bad.OwnerID, bad.ClientRequestID, bad.Reason = f.customer.ID, "bad", "x"
		if _, _, err := f.s.StartFamily(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%+v: %v, want invalid", bad.Refunds, err)
		}
	}
	if n := count(t, f.s, `SELECT count(*) FROM runs`); n != 4 {
		t.Errorf("%d runs after bad requests, want 4", n)
	}
}

func TestFamily_ParentEndsWithItsLastChild(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	fam, _ := f.family(t, "k2")
	f.walk(t, fam.Children[0].ID) // completed, 300 refunded
	op, err := f.s.SubmitOperation(ctx, fam.Children[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpFailed, Reason: "declined"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.FinishRun(ctx, fam.Children[1].ID, store.StateFailed, store.Say("Declined.")); err != nil {
		t.Fatal(err)
	}
	p, _ := f.s.RunByID(ctx, fam.Parent.ID)
	if p.State != store.StateCreated {
		t.Fatalf("parent %s with a child still going", p.State)
	}
	// Cancel the family: recorded on the parent and the child still going.
	d, err := f.s.RequestCancelBecause(ctx, fam.Parent.ID, f.customer.ID, "changed my mind")
	if err != nil || d.Outcome != store.DecisionAccepted {
		t.Fatalf("cancel family: %+v, %v", d, err)
	}
	if n := count(t, f.s, `SELECT count(*) FROM runs WHERE cancel_requested_at IS NOT NULL`); n != 2 {
		t.Errorf("%d runs with a cancel, want the parent and the last child", n)
	}
	if _, err := f.s.FinishRun(ctx, fam.Children[2].ID, store.StateCanceled, store.Say("Canceled.")); err != nil {
		t.Fatal(err)
	}
	snap, err := f.s.SnapshotFamily(ctx, fam.Parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Parent.Run.State != store.StateCompleted || snap.Parent.FinalMessage == nil {
		t.Fatalf("parent %s, message %v", snap.Parent.Run.State, snap.Parent.FinalMessage)
	}
	var refunded int64
	finished := 0
	for _, ev := range snap.Parent.Events {
		if p, err := store.PayloadOf[store.ChildFinished](ev); err == nil {
			finished++
			refunded += p.Refunded
		}
	}
	if finished != 3 || refunded != 300 {
		t.Errorf("%d child.finished refunding %d, want 3 and 300", finished, refunded)
	}
	for i, want := range []string{store.StateCompleted, store.StateFailed, store.StateCanceled} {
		if c := snap.Children[i]; c.Run.State != want || c.CoveringSeq != c.Run.LastSeq || (i < 2) != (len(c.Operations) == 1) {
			t.Errorf("child %d: %s, %d operations", i, c.Run.State, len(c.Operations))
		}
	}
	if problems, err := f.s.Verify(ctx); err != nil || len(problems) > 0 {
		t.Errorf("verify: %v %v", problems, err)
	}
}

// TestStartFamily_CountsAStartThatCommittedWhileItWaited: a family that
// waited for an order's lock sees what the start holding it reserved.
func TestStartFamily_CountsAStartThatCommittedWhileItWaited(t *testing.T) {
	t.Parallel()
	f := newFixture(t) // the order paid 10000
	ctx := context.Background()
	tx, err := storetest.DB(t, f.s).BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`SELECT 1 FROM orders WHERE id = $1 FOR UPDATE`, f.order.ID); err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	if _, err := tx.Exec(`INSERT INTO runs (id, correlation_id, owner_id, order_id, amount, currency, reason, client_request_id)
        VALUES ($1, $1, $2, $3, 8000, 'EUR', 'x', 'holder')`, id, f.customer.ID, f.order.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := f.s.StartFamily(ctx, store.FamilyRequest{OwnerID: f.customer.ID, ClientRequestID: "waiter", Reason: "late",
			Refunds: []store.RefundItem{{OrderID: f.order.ID, Amount: 5000}}})
		done <- err
	}()
	// Commit once the family waits for the order's lock (a deadline, not a
	// sleep: it may take a loaded machine a while to get there).
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting int
		if err := storetest.DB(t, f.s).GetContext(ctx, &waiting, `SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'`); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the family never waited for the order's lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a family asking 5000 of what 8000 of 10000 left: %v, want refused", err)
	}
	if problems, err := f.s.Verify(ctx); err != nil || len(problems) > 0 {
		t.Errorf("verify: %v %v", problems, err)
	}
}

// TestStartFamily_SameKeyRacingOnOtherOrders: two requests with one key on
// different orders share no lock; the second is answered as a repeat (the
// same family) or a conflict, never an error of the database.
func TestStartFamily_SameKeyRacingOnOtherOrders(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	other, err := f.s.CreateOrder(ctx, f.customer.ID, "Hat", 10000, "EUR")
	if err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		key := fmt.Sprintf("race-%d", round)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, order := range []int64{f.order.ID, other.ID} {
			wg.Go(func() {
				_, _, errs[i] = f.s.StartFamily(ctx, store.FamilyRequest{OwnerID: f.customer.ID, ClientRequestID: key, Reason: "late",
					Refunds: []store.RefundItem{{OrderID: order, Amount: 1}}})
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, store.ErrIdempotencyConflict):
				t.Fatalf("round %d: %v, want a family or a conflict", round, err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d families started under one key, want 1 (%v)", round, ok, errs)
		}
	}
}
