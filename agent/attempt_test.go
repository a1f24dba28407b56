package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// TestExecutor_TakeoverStartsTheNarrationAfresh: a worker dies in the
// middle of its narration; the worker that takes the run over records a
// second attempt of the step, and what the run shows afterwards is the
// new attempt's narration, once, with none of the old words.
func TestExecutor_TakeoverStartsTheNarrationAfresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	pool, err := store.Open(context.Background(), e.s.URL(), store.WithAnswers(views.Answers{}))
	if err != nil {
		t.Fatal(err)
	}
	chatty := &testkit.ChattyNarrator{Started: make(chan struct{})}
	testkit.StartExecutor(t, pool, nil, e.client, chatty, agent.Config{WorkerID: "doomed", Concurrency: 1, ChunkEvery: time.Millisecond})
	run := e.start(100)
	testkit.WaitUntil(t, "the doomed worker's narration", 20*time.Second, func() bool {
		var n int
		return e.db.Get(&n, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = $2`, run.ID, store.EventNarrationDelta) == nil && n > 0
	})
	pool.Close() // the worker dies: no renewal, no release

	e.executor(agent.Config{WorkerID: "survivor", ChunkEvery: time.Millisecond}, testkit.FreshNarrator{})
	e.waitState(run.ID, store.StateAwaitingApproval)

	var attempts []int
	if err := e.db.Select(&attempts, `SELECT (payload->>'attempt')::int FROM run_events
        WHERE run_id = $1 AND type = $2 AND payload->>'step' = 'planning' ORDER BY seq`, run.ID, store.EventStepAttempt); err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 2 || attempts[0] != 1 || attempts[1] != 2 {
		t.Errorf("planning attempts = %v, want [1 2]", attempts)
	}
	snap, err := e.s.Snapshot(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	p := store.ProgressOf(snap)
	var shown, all strings.Builder
	for _, ev := range snap.Events {
		if ev.Type != store.EventNarrationDelta {
			continue
		}
		pl, err := store.PayloadOf[store.NarrationDelta](ev)
		if err != nil {
			t.Fatal(err)
		}
		all.WriteString(pl.Text)
		if p.ShowsNarration(ev) {
			shown.WriteString(pl.Text)
		}
	}
	if shown.String() != testkit.FreshWords {
		t.Errorf("narration shown = %q, want %q", shown.String(), testkit.FreshWords)
	}
	if !strings.HasPrefix(all.String(), "old ") {
		t.Errorf("the log's narration = %q, want the dead worker's words still in the log", all.String())
	}
	e.verify()
}
