package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// askAll makes each child of fam ask for an approval.
func (f *fixture) askAll(t *testing.T, fam *store.Family) {
	t.Helper()
	for _, c := range fam.Children {
		if _, err := f.s.RequestApproval(context.Background(), c.ID, store.ActionProposed{Action: "refund", OrderID: c.OrderID, Amount: c.Amount, Currency: c.Currency}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestApproveFamily_DuplicateRequestsRace: two "approve all" at once (a
// double click, two approvers) approve each child once; the other answer
// is already made, never an error.
func TestApproveFamily_DuplicateRequestsRace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	fam, _ := f.family(t, "race")
	f.askAll(t, fam)
	var (
		wg   sync.WaitGroup
		out  [2]store.FamilyDecision
		errs [2]error
	)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = f.s.ApproveFamily(ctx, fam.Parent.ID, f.approver.ID, "", nil)
		}()
	}
	wg.Wait()
	accepted := 0
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("ApproveFamily #%d: %v", i+1, errs[i])
		}
		if out[i].Outcome == store.DecisionAccepted {
			accepted++
		} else if out[i].Outcome != store.DecisionAlreadyMade {
			t.Errorf("ApproveFamily #%d outcome = %v, want accepted or already made", i+1, out[i].Outcome)
		}
	}
	if accepted != 1 {
		t.Errorf("accepted %d times, want once", accepted)
	}
	for _, c := range fam.Children {
		snap, err := f.s.Snapshot(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range snap.Events {
			if ev.Type == store.EventApprovalGranted {
				n++
			}
		}
		if n != 1 || snap.Run.State != store.StateSubmitting {
			t.Errorf("child %d: %d approval.granted, state %s; want 1, submitting", c.Position, n, snap.Run.State)
		}
	}
}

// TestApproveFamily_Refusals: a request none of whose children waits is a
// refusal in words; the customer may not approve their own request; a
// child named that is not the family's is left alone; a single run is no
// family.
func TestApproveFamily_Refusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	fam, _ := f.family(t, "refusals")
	d, err := f.s.ApproveFamily(ctx, fam.Parent.ID, f.approver.ID, "", nil)
	if err != nil || d.Outcome != store.DecisionNotAllowed || store.ErrorCode(d.Why) != store.CodeConflict {
		t.Errorf("nothing waiting: %+v, %v; want not allowed, a conflict", d, err)
	}
	f.askAll(t, fam)
	if d, err := f.s.ApproveFamily(ctx, fam.Parent.ID, f.customer.ID, "", nil); err != nil || d.Outcome != store.DecisionNotAllowed || store.ErrorCode(d.Why) != store.CodeForbidden {
		t.Errorf("own request: %+v, %v; want forbidden", d, err)
	}
	if d, err := f.s.ApproveFamily(ctx, fam.Parent.ID, f.approver.ID, "", []uuid.UUID{uuid.New()}); err != nil || len(d.Children) != 0 || d.Outcome != store.DecisionNotAllowed {
		t.Errorf("a stranger named: %+v, %v; want nothing approved", d, err)
	}
	if _, err := f.s.ApproveFamily(ctx, fam.Children[0].ID, f.approver.ID, "", nil); err == nil {
		t.Error("a child approved as a family")
	}
}
