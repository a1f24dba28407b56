package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// chattyNarrator says "old " over and over until its worker dies, so the
// worker is cut off in the middle of a sentence.
type chattyNarrator struct {
	once    sync.Once
	started chan struct{}
}

func (n *chattyNarrator) Narrate(ctx context.Context, _ agent.Facts, emit func(string) error) error {
	n.once.Do(func() { close(n.started) })
	for {
		if err := emit("old "); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// freshNarrator says its planning lines in two pieces.
type freshNarrator struct{}

const freshWords = "Fresh start. I'm looking at the order."

func (freshNarrator) Narrate(ctx context.Context, f agent.Facts, emit func(string) error) error {
	if f.Stage != "planning" {
		return agent.Builtin{}.Narrate(ctx, f, emit)
	}
	if err := emit("Fresh start. "); err != nil {
		return err
	}
	return emit("I'm looking at the order.")
}

// TestExecutor_TakeoverStartsTheNarrationAfresh: a worker dies in the
// middle of its narration; the worker that takes the run over records a
// second attempt of the step, and what the run shows afterwards is the
// new attempt's narration, once, with none of the old words.
func TestExecutor_TakeoverStartsTheNarrationAfresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t, payments.Faults{})
	pool, err := store.Open(context.Background(), e.s.URL())
	if err != nil {
		t.Fatal(err)
	}
	chatty := &chattyNarrator{started: make(chan struct{})}
	testkit.StartExecutor(t, pool, nil, e.client, chatty, agent.Config{WorkerID: "doomed", Concurrency: 1, ChunkEvery: time.Millisecond})
	run := e.start(100)
	testkit.WaitUntil(t, "the doomed worker's narration", 20*time.Second, func() bool {
		var n int
		return e.db.Get(&n, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = $2`, run.ID, store.EventNarrationDelta) == nil && n > 0
	})
	pool.Close() // the worker dies: no renewal, no release

	e.executor(agent.Config{WorkerID: "survivor", ChunkEvery: time.Millisecond}, freshNarrator{})
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
		var pl struct{ Text string }
		if err := json.Unmarshal(ev.Payload, &pl); err != nil {
			t.Fatal(err)
		}
		all.WriteString(pl.Text)
		if p.ShowsNarration(ev) {
			shown.WriteString(pl.Text)
		}
	}
	if shown.String() != freshWords {
		t.Errorf("narration shown = %q, want %q", shown.String(), freshWords)
	}
	if !strings.HasPrefix(all.String(), "old ") {
		t.Errorf("the log's narration = %q, want the dead worker's words still in the log", all.String())
	}
	e.verify()
}
