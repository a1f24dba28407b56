package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// claimAll claims every due run for worker "w", holding each lease, and
// returns their ids in claim order.
func claimAll(t *testing.T, s *store.Store) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	for {
		r, _, err := s.ClaimNext(context.Background(), "w", time.Minute)
		if err == store.ErrNotFound {
			return ids
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
}

func position(ids []uuid.UUID, id uuid.UUID) int {
	for i, x := range ids {
		if x == id {
			return i + 1
		}
	}
	return -1
}

// One customer's flood used to hold every claim until it drained: another
// customer's run, started after 60 of theirs, waited behind all of them.
func TestClaimNext_FloodDoesNotStarveAnotherCustomer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for i := range 60 {
		f.start(t, fmt.Sprint("flood-", i), 1)
	}
	b, err := f.s.CreateUser(ctx, "b@example.com", "B", store.RoleCustomer, "pw", store.GrantRefundAccess)
	if err != nil {
		t.Fatal(err)
	}
	order, err := f.s.CreateOrder(ctx, b.ID, "Hat", 500, "EUR")
	if err != nil {
		t.Fatal(err)
	}
	theirs, _, err := f.s.StartRun(ctx, store.StartRequest{OwnerID: b.ID, ClientRequestID: "b-1", OrderID: order.ID, Amount: 100, Reason: "late"})
	if err != nil {
		t.Fatal(err)
	}
	ids := claimAll(t, f.s)
	if got, want := len(ids), 61; got != want {
		t.Fatalf("claimed %d runs, want %d", got, want)
	}
	if got := position(ids, theirs.ID); got < 1 || got > 3 {
		t.Errorf("the other customer's run was claim number %d, want among the first 3", got)
	}
}

// Approved runs used to wait behind every new run created before the
// approval, as claims went by when the run became due.
func TestClaimNext_ApprovedBeforeOlderNewRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	approved := f.start(t, "approved", 100)
	if _, err := f.s.RequestApproval(ctx, approved.ID, store.ActionProposed{Amount: 100}); err != nil {
		t.Fatal(err)
	}
	var older []uuid.UUID
	for i := range 5 {
		older = append(older, f.start(t, fmt.Sprint("new-", i), 1).ID)
	}
	if _, err := f.s.Approve(ctx, approved.ID, f.approver.ID, ""); err != nil {
		t.Fatal(err)
	}
	ids := claimAll(t, f.s)
	if got := position(ids, approved.ID); got != 1 {
		t.Errorf("approved run was claim number %d (order %v, new runs %v), want 1", got, ids, older)
	}
}

// ClaimNext says whether more was due, so a worker hands the wake-up on
// only when another claim can succeed.
func TestClaimNext_ReportsMore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.start(t, "one", 1)
	f.start(t, "two", 1)
	for i, want := range []bool{true, false} {
		_, more, err := f.s.ClaimNext(ctx, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if more != want {
			t.Errorf("claim %d: more = %v, want %v", i+1, more, want)
		}
	}
	if _, _, err := f.s.ClaimNext(ctx, "w", time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("third claim: err = %v, want ErrNotFound", err)
	}
}
