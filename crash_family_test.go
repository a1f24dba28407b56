package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// TestCrash_FamilyWorkerKilledWithChildrenInFlight kills a worker with
// SIGKILL while the three children of one request are in flight: two have
// reached the provider, which committed them (one refunded, one declined)
// and holds its answers, so the worker dies between the provider's commit
// and our log write; the third waits for an approver. After a restart
// every child's ledger must equal the provider's, the parent must end
// once, with child.finished saying what the provider refunded, and
// `refundd verify` must find every invariant, the family rules too.
func TestCrash_FamilyWorkerKilledWithChildrenInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.MustOpen(t)
	providerAddr := freeAddr(t)
	env := []string{"DATABASE_URL=" + st.URL(), "PROVIDER_ADDR=" + providerAddr,
		"PROVIDER_URL=http://" + providerAddr, "WORKER_LEASE=2s", "PROVIDER_SECRET=" + testProviderSecret,
		// The two small refunds go to the provider at once; the large one
		// waits for an approver.
		"APPROVAL_THRESHOLD=5000", "NARRATION_PACE=5ms"}

	spawn(t, env, "simulated payment provider running", "provider")
	provider := payments.NewClient("http://"+providerAddr, 5*time.Second).WithSecret(testProviderSecret)
	defer provider.Close()
	// The provider commits each refund (the first as declined), then holds
	// its answer.
	if err := provider.SetFaults(ctx, payments.Faults{HoldAfterCommit: true, DeclineNext: 1}); err != nil {
		t.Fatal(err)
	}
	fam, approver := startCrashFamily(t, st, []int64{1000, 2000, 7000})
	sent, waiting := fam.Children[:2], fam.Children[2]

	worker := spawn(t, env, "worker running", "worker")
	testkit.WaitUntil(t, "two refunds committed by the provider and the third awaiting approval", 30*time.Second, func() bool {
		l, err := provider.Ledger(ctx)
		r, rerr := st.RunByID(ctx, waiting.ID)
		return err == nil && len(l) == 2 && rerr == nil && r.State == store.StateAwaitingApproval
	})
	worker.kill(t)

	// The worker died before it could log either outcome.
	for _, c := range sent {
		ops, err := st.OperationsByRun(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ops) != 1 || ops[0].State != store.OpSubmitted {
			t.Fatalf("after the kill, child %d's operations = %+v, want one still submitted", c.Position, ops)
		}
	}
	if p, err := st.RunByID(ctx, fam.Parent.ID); err != nil || store.Terminal(p.State) {
		t.Fatalf("after the kill the parent is %v (%v), want it still going", p, err)
	}
	if err := provider.SetFaults(ctx, payments.Faults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Approve(ctx, waiting.ID, approver, ""); err != nil {
		t.Fatal(err)
	}

	spawn(t, env, "worker running", "worker")
	testkit.WaitUntil(t, "the parent to end", 60*time.Second, func() bool {
		p, err := st.RunByID(ctx, fam.Parent.ID)
		return err == nil && store.Terminal(p.State)
	})

	// The outcomes the dead worker never logged were asked of the provider.
	for _, c := range sent {
		evs, err := st.EventsAfter(ctx, c.ID, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(evs, func(e store.Event) bool { return e.Type == "operation.reconciling" }) {
			t.Errorf("child %d's log has no operation.reconciling: its outcome was not verified with the provider", c.Position)
		}
	}
	refunded := wantLedgersEqualProvider(t, st, provider, fam)
	wantParentEndedOnce(t, st, fam, refunded)
	wantVerifyClean(t, env)
}

// startCrashFamily starts a request of the seeded customer over one order
// per amount, and returns it with the approver's ID.
func startCrashFamily(t *testing.T, st *store.Store, amounts []int64) (*store.Family, int64) {
	t.Helper()
	ctx := context.Background()
	who := storetest.MustSeedParties(t, st, 12999)
	req := store.FamilyRequest{OwnerID: who.Customer.ID, ClientRequestID: "crash-family", Reason: "late delivery", MaxChildren: 20}
	for i, amount := range amounts {
		o := who.Order
		if i > 0 {
			var err error
			if o, err = st.CreateOrder(ctx, who.Customer.ID, fmt.Sprintf("Order %d", i+1), 10000, "EUR"); err != nil {
				t.Fatal(err)
			}
		}
		req.Refunds = append(req.Refunds, store.RefundItem{OrderID: o.ID, Amount: amount})
	}
	fam, created, err := st.StartFamily(ctx, req)
	if err != nil || !created {
		t.Fatalf("StartFamily: created %v, err %v", created, err)
	}
	return fam, who.Approver.ID
}

// wantLedgersEqualProvider checks that the provider's ledger holds exactly
// one refund per child, and that each child's one operation says what the
// provider committed: its key, amount, currency, outcome and reference.
// It returns what the provider refunded for each child.
func wantLedgersEqualProvider(t *testing.T, st *store.Store, provider *payments.Client, fam *store.Family) map[uuid.UUID]int64 {
	t.Helper()
	ctx := context.Background()
	ledger, err := provider.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]payments.Receipt{}
	for _, rc := range ledger {
		byKey[rc.Key] = rc
	}
	if len(ledger) != len(fam.Children) || len(byKey) != len(ledger) {
		t.Errorf("the provider's ledger has %d refunds under %d keys, want one per child (%d): %+v", len(ledger), len(byKey), len(fam.Children), ledger)
	}
	refunded := map[uuid.UUID]int64{}
	declined := 0
	for _, c := range fam.Children {
		ops, err := st.OperationsByRun(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ops) != 1 {
			t.Errorf("child %d has %d operations, want 1", c.Position, len(ops))
			continue
		}
		op, rc := ops[0], byKey[ops[0].ID.String()]
		wantState := map[string]string{payments.StatusSucceeded: store.OpSucceeded, payments.StatusFailed: store.OpFailed}[rc.Status]
		if rc.Key == "" || op.State != wantState || op.Amount != rc.Amount || op.Currency != rc.Currency || op.Amount != c.Amount ||
			(rc.Status == payments.StatusSucceeded && op.ProviderRef.String != rc.Ref) {
			t.Errorf("child %d: operation %s %s %d %s ref %q; the provider has %+v", c.Position, op.ID, op.State, op.Amount, op.Currency, op.ProviderRef.String, rc)
		}
		if rc.Status == payments.StatusSucceeded {
			refunded[c.ID] = rc.Amount
		} else {
			declined++
		}
	}
	if declined != 1 {
		t.Errorf("%d refunds declined, want 1 (DeclineNext)", declined)
	}
	return refunded
}

// wantParentEndedOnce checks the parent's log: one child.started and one
// child.finished per child, the latter saying what the provider refunded,
// then one message.final and one terminal event, last, in the state the
// children's ends make.
func wantParentEndedOnce(t *testing.T, st *store.Store, fam *store.Family, refunded map[uuid.UUID]int64) {
	t.Helper()
	ctx := context.Background()
	evs, err := st.EventsAfter(ctx, fam.Parent.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	finished := map[uuid.UUID]store.ChildFinished{}
	var sum, provided int64
	for _, ev := range evs {
		count[ev.Type]++
		if ev.Type == "child.finished" {
			var p store.ChildFinished
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			finished[p.ChildRunID] = p
			sum += p.Refunded
		}
	}
	var states []string
	for _, c := range fam.Children {
		r, err := st.RunByID(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, r.State)
		p, ok := finished[c.ID]
		if !ok || p.State != r.State || p.Refunded != refunded[c.ID] {
			t.Errorf("child %d ended %s, provider refunded %d; its child.finished: %+v (found %v)", c.Position, r.State, refunded[c.ID], p, ok)
		}
		provided += refunded[c.ID]
	}
	parent, err := st.RunByID(ctx, fam.Parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	ends := count["run.completed"] + count["run.failed"] + count["run.canceled"]
	if ends != 1 || count["message.final"] != 1 || count["child.started"] != 3 || count["child.finished"] != 3 {
		t.Errorf("the parent's log has %v, want 3 child.started, 3 child.finished, one message.final and one end", count)
	}
	if want := store.ParentEnd(states); parent.State != want || evs[len(evs)-1].Type != "run."+want {
		t.Errorf("the parent is %s, its last event %s; with children %v it should end %s", parent.State, evs[len(evs)-1].Type, states, want)
	}
	if sum != provided || sum == 0 {
		t.Errorf("child.finished says %d refunded in all, the provider %d", sum, provided)
	}
}
