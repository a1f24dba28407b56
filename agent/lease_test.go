package agent_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// stuckNarrator starts narrating and never finishes, so the worker that
// holds the run is in the middle of a step when it dies.
type stuckNarrator struct {
	once    sync.Once
	started chan struct{}
}

func (n *stuckNarrator) Narrate(ctx context.Context, _ agent.Facts, _ func(string) error) error {
	n.once.Do(func() { close(n.started) })
	<-ctx.Done()
	return context.Cause(ctx)
}

// A worker dies mid-step without giving its lease back. With the default
// lease another worker resumes the run within 5 s (it used to wait out a
// 30 s lease).
func TestExecutor_CrashedWorkersRunResumesWithinFiveSeconds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	// The doomed worker has a pool of its own: closing it cuts the worker
	// off from the database as a killed process is, with no renewal and no
	// release.
	pool, err := store.Open(context.Background(), e.s.URL(), store.WithAnswers(views.Answers{}))
	if err != nil {
		t.Fatal(err)
	}
	stuck := &stuckNarrator{started: make(chan struct{})}
	testkit.StartExecutor(t, pool, nil, e.client, stuck, agent.Config{WorkerID: "doomed", Concurrency: 1})
	run := e.start(100)
	select {
	case <-stuck.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the doomed worker never started on the run")
	}
	pool.Close()
	crashed := time.Now()
	takeovers := testutil.ToFloat64(metrics.LeaseTakeovers)

	e.executor(agent.Config{WorkerID: "survivor"}, nil)
	r := testkit.WaitRunState(t, e.s, run.ID, store.StateAwaitingApproval, 5*time.Second)
	t.Logf("resumed %v after the crash", time.Since(crashed))
	var owner *string
	if err := e.db.Get(&owner, `SELECT lease_owner FROM runs WHERE id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}
	if owner != nil && *owner == "doomed" {
		t.Errorf("lease owner = %q, want the survivor or none", *owner)
	}
	if got := testutil.ToFloat64(metrics.LeaseTakeovers); got < takeovers+1 {
		t.Errorf("refundd_lease_takeovers_total went from %v to %v, want the survivor's takeover counted", takeovers, got)
	}
}
