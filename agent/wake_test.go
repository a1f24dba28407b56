package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// chatty narrates words words per stage, every one its own chunk when
// ChunkEvery is tiny.
type chatty struct{ words int }

func (c chatty) Narrate(ctx context.Context, f agent.Facts, emit func(string) error) error {
	for range c.words {
		if err := emit("word "); err != nil {
			return err
		}
	}
	return nil
}

// Every append used to wake the executor, narration included: thousands
// of claim queries for thousands of chunks. Now only work wakes it, so its
// claims stay within runs started + decisions + retries + polls, however
// much the runs narrate.
func TestExecutor_NarrationDoesNotWakeWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	const threshold = 1000
	// A poll of an hour never ticks here, so polls cannot hide wake-ups;
	// the executor's one look for left-over work at start counts as a poll.
	x := e.executor(agent.Config{Poll: time.Hour, Concurrency: 4, ApprovalThreshold: threshold,
		ChunkEvery: time.Nanosecond}, chatty{words: 50})
	const polls = 1

	started, decisions := 0, 0
	for range 5 {
		r := e.start(100)
		started++
		e.waitState(r.ID, store.StateCompleted)
	}
	r := e.start(threshold)
	started++
	e.waitState(r.ID, store.StateAwaitingApproval)
	// Approve once the worker let go, so the approval's one wake-up is the
	// one that finds it.
	testkit.WaitUntil(t, "the lease released", 20*time.Second, func() bool {
		var held bool
		if err := e.db.Get(&held, `SELECT lease_owner IS NOT NULL FROM runs WHERE id = $1`, r.ID); err != nil {
			t.Fatal(err)
		}
		return !held
	})
	if d, err := e.s.Approve(context.Background(), r.ID, e.approver.ID, ""); err != nil || d.Outcome != store.DecisionAccepted {
		t.Fatalf("approve: %+v, %v", d, err)
	}
	decisions++
	e.waitState(r.ID, store.StateCompleted)

	var chunks int
	if err := e.db.Get(&chunks, `SELECT count(*) FROM run_events WHERE type = $1`, store.EventNarrationDelta); err != nil {
		t.Fatal(err)
	}
	if chunks < 300 {
		t.Fatalf("narration chunks = %d, want at least 300 for the test to mean anything", chunks)
	}
	const retries = 0 // the provider never fails here
	if got, bound := x.Claims(), int64(started+decisions+retries+polls); got > bound {
		t.Errorf("claims = %d over %d narration chunks, want ≤ %d (%d started + %d decisions + %d retries + %d polls)",
			got, chunks, bound, started, decisions, retries, polls)
	}
	t.Logf("claims = %d, narration chunks = %d", x.Claims(), chunks)
}
