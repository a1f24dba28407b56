package agent_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// TestExecutor_CancelAnswerAgreesWithOutcome: 40 runs, each with a cancel
// racing the executor through planning, the operation's creation and the
// provider call. Whatever the moment, the answer holds: a cancel answered
// as accepted ends canceled with nothing at the provider (an operation it
// has was never sent, and is closed); one answered too_late never ends
// canceled; one that found the run finished changed nothing.
func TestExecutor_CancelAnswerAgreesWithOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{Latency: 30 * time.Millisecond})
	e.executor(agent.Config{ApprovalThreshold: 1 << 40, Concurrency: 8}, nil)
	const n = 40
	runs := make([]*store.Run, n)
	answers := make([]store.DecisionOutcome, n)
	var wg sync.WaitGroup
	for i := range n {
		runs[i] = e.start(100)
		wg.Go(func() {
			time.Sleep(rand.N(400 * time.Millisecond)) // a random moment of the run
			d, err := e.s.RequestCancel(context.Background(), runs[i].ID, e.customer.ID)
			if err != nil {
				t.Error(err)
			}
			answers[i] = d.Outcome
		})
	}
	wg.Wait()
	counts := map[store.DecisionOutcome]int{}
	for i, run := range runs {
		var r *store.Run
		testkit.WaitUntil(t, "every run to finish", 60*time.Second, func() bool {
			var err error
			r, err = e.s.RunByID(context.Background(), run.ID)
			return err == nil && store.Terminal(r.State)
		})
		counts[answers[i]]++
		ops, err := e.s.OperationsByRun(context.Background(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch answers[i] {
		case store.DecisionAccepted:
			if r.State != store.StateCanceled {
				t.Errorf("run %d: cancel answered accepted, run ended %s; want canceled", i, r.State)
			}
			for _, op := range ops {
				if op.State != store.OpFailed || !op.Unsent {
					t.Errorf("run %d: cancel answered accepted, operation %s, unsent %v; want failed, never sent", i, op.State, op.Unsent)
				}
				e.wantNoRefundAt(op.ID.String())
			}
		case store.DecisionTooLate, store.DecisionRunFinished:
			if r.State == store.StateCanceled {
				t.Errorf("run %d: cancel answered %v, run ended canceled", i, answers[i])
			}
		default:
			t.Errorf("run %d: cancel answered %v", i, answers[i])
		}
	}
	t.Logf("answers: %d accepted, %d too late, %d run finished", counts[store.DecisionAccepted],
		counts[store.DecisionTooLate], counts[store.DecisionRunFinished])
	e.verify()
}
