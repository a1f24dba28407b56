package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// madeBefore makes the provider hold a refund under the key of the request
// (the customer's, with key, on the env's order), as if a run of ours had
// made it before a failover made the database forget that run.
func (e *env) madeBefore(key string, amount int64) payments.Receipt {
	e.t.Helper()
	ctx := context.Background()
	k, err := e.s.RefundKey(ctx, &store.Run{OwnerID: e.customer.ID, ClientRequestID: key, OrderID: e.order.ID})
	if err != nil {
		e.t.Fatal(err)
	}
	rc, err := e.client.Refund(ctx, payments.RefundRequest{Key: k.String(), OrderRef: fmt.Sprint(e.order.ID), Amount: amount, Currency: e.order.Currency})
	if err != nil {
		e.t.Fatal(err)
	}
	return rc
}

func (e *env) startKey(key string, amount int64) *store.Run {
	e.t.Helper()
	r, _, err := e.s.StartRun(context.Background(), store.StartRequest{OwnerID: e.customer.ID,
		ClientRequestID: key, OrderID: e.order.ID, Amount: amount, Reason: "arrived broken"})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// TestExecutor_RetriedStartFindsTheRefundTheDatabaseForgot: a client
// retries a start whose run the database forgot (a failover) after the
// refund was made. The new run asks the provider under the request's key
// before anything else, finds the refund, and ends refunded with it: no
// approver is asked, nothing is sent again, and its words say what
// happened.
func TestExecutor_RetriedStartFindsTheRefundTheDatabaseForgot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	rc := e.madeBefore("retried", 4000)
	e.executor(agent.Config{}, nil) // every refund needs an approver
	run := e.startKey("retried", 4000)
	e.waitState(run.ID, store.StateCompleted)

	if l := e.ledger(); len(l) != 1 {
		t.Errorf("provider ledger = %d refunds, want the one made before", len(l))
	}
	if got, want := strings.Join(e.types(run.ID), ","), "run.created,operation.succeeded,message.final,run.completed"; got != want {
		t.Errorf("business events:\n got %s\nwant %s (no approval asked)", got, want)
	}
	snap, err := e.s.Snapshot(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if op := snap.Operations[0]; op.ID.String() != rc.Key || op.ProviderRef.String != rc.Ref || !op.Recovered {
		t.Errorf("operation %+v, want the provider's refund %s (%s), recovered", op, rc.Key, rc.Ref)
	}
	if !strings.Contains(snap.FinalMessage.Body, "it was found there by this request's key") || !strings.Contains(snap.FinalMessage.Body, rc.Ref) {
		t.Errorf("final message %q does not say the refund was found at the provider", snap.FinalMessage.Body)
	}
	e.wantWordsForEveryReader(run.ID)
	e.wantLedgersAgree(0)
	e.verify()
}

// TestExecutor_FailoverMarkedRunIsNotAskedAgain: a run waits for its
// approver when the database changes timeline; the provider holds its
// refund (approved and made on the primary that died). The worker marks
// the run, finds the refund, and the run ends refunded without a second
// decision.
func TestExecutor_FailoverMarkedRunIsNotAskedAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	e.executor(agent.Config{}, nil)
	run := e.startKey("waiting", 4000)
	e.waitState(run.ID, store.StateAwaitingApproval)
	e.madeBefore("waiting", 4000)

	// As after a promotion: a timeline the database never wrote on.
	if _, err := e.db.Exec(`DELETE FROM db_timelines`); err != nil {
		t.Fatal(err)
	}
	e.waitState(run.ID, store.StateCompleted)
	if got, want := strings.Join(e.types(run.ID), ","), "run.created,run.planning,action.proposed,approval.requested,"+
		"operation.succeeded,message.final,run.completed"; got != want {
		t.Errorf("business events:\n got %s\nwant %s", got, want)
	}
	if l := e.ledger(); len(l) != 1 {
		t.Errorf("provider ledger = %d refunds, want 1", len(l))
	}
	e.wantLedgersAgree(0)
	e.verify()
}

// TestExecutor_FoundRefundOfOtherDetailsIsNotAdopted: the provider holds a
// refund under the request's key for another amount (the key was used for
// another request before the database forgot it). It is not this run's:
// the run ends without a refund, saying so, and verify lists the
// provider's refund as one no operation of ours explains.
func TestExecutor_FoundRefundOfOtherDetailsIsNotAdopted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	rc := e.madeBefore("reused", 2500)
	e.executor(agent.Config{}, nil)
	run := e.startKey("reused", 4000)
	e.waitState(run.ID, store.StateFailed)
	snap, err := e.s.Snapshot(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Operations) != 0 || !strings.Contains(snap.FinalMessage.Body, "does not match this request") {
		t.Errorf("operations %+v, final message %q; want none, and words that say the refund found is another", snap.Operations, snap.FinalMessage.Body)
	}
	e.wantLedgersAgree(1)
	if l := e.ledger(); len(l) != 1 || l[0].Ref != rc.Ref {
		t.Errorf("provider ledger %+v, want only the refund made before", l)
	}
}

// wantLedgersAgree compares our ledger with the provider's and wants
// exactly unexplained refunds of the provider's that no operation of ours
// explains, and nothing else amiss.
func (e *env) wantLedgersAgree(unexplained int) {
	e.t.Helper()
	problems, err := agent.VerifyLedger(context.Background(), e.s, e.client)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, p := range problems {
		if strings.Contains(p, "matches no operation") {
			n++
		}
	}
	if n != unexplained || len(problems) != unexplained {
		e.t.Errorf("ledgers: %q; want %d refunds of the provider's that no operation explains, nothing else", problems, unexplained)
	}
}
