package testkit

import (
	"context"
	"sync"
	"time"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/views"
)

// ChattyNarrator says "old " every few milliseconds until its context ends:
// a worker running it is always in the middle of its narration. Started,
// when set, is closed once it begins.
type ChattyNarrator struct {
	Started chan struct{}
	once    sync.Once
}

func (n *ChattyNarrator) Narrate(ctx context.Context, _ agent.Facts, emit func(string) error) error {
	if n.Started != nil {
		n.once.Do(func() { close(n.Started) })
	}
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

// FreshWords is what FreshNarrator says for the planning step.
const FreshWords = "Fresh start. I'm looking at the order."

// FreshNarrator says FreshWords in two pieces for the planning step and
// what the built-in narrator says for the others.
type FreshNarrator struct{}

func (FreshNarrator) Narrate(ctx context.Context, f agent.Facts, emit func(string) error) error {
	if f.Stage != "planning" {
		return agent.Builtin{Words: views.Answers{}}.Narrate(ctx, f, emit)
	}
	if err := emit("Fresh start. "); err != nil {
		return err
	}
	return emit("I'm looking at the order.")
}
