package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/refundd/refundd/store"
)

// Facts are what the narrator may talk about. Narration is presentation
// only: nothing it says changes a run.
type Facts struct {
	Stage       string // "planning" or "submitting"
	OrderID     int64
	Description string
	Paid        string // formatted money
	Amount      string
	Reason      string
	NeedsOK     bool
}

// Narrator streams text about a run, piece by piece, to emit.
type Narrator interface {
	Narrate(ctx context.Context, f Facts, emit func(text string) error) error
}

// Builtin is the narrator that needs no model: it writes plain sentences
// from the facts, a word at a time with a small delay, like a model would.
type Builtin struct {
	Delay time.Duration // between words; zero in tests
}

var _ Narrator = Builtin{}

// Narrate speaks the built-in lines for the stage.
func (b Builtin) Narrate(ctx context.Context, f Facts, emit func(string) error) error {
	text := builtinText(f)
	words := strings.SplitAfter(text, " ")
	for _, w := range words {
		if err := emit(w); err != nil {
			return err
		}
		if b.Delay > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(b.Delay):
			}
		}
	}
	return nil
}

func builtinText(f Facts) string {
	switch f.Stage {
	case "planning":
		// The reason is the customer's own sentence: quoted, without the
		// full stop that would end ours twice.
		s := fmt.Sprintf("I'm looking at order #%d, %s, paid %s. The request is for %s back because: “%s”. ",
			f.OrderID, f.Description, f.Paid, f.Amount, strings.TrimRight(strings.TrimSpace(f.Reason), "."))
		s += "That is within what is still refundable on this order. "
		if f.NeedsOK {
			s += "Refunds need an approver's OK, so I am asking for one now. "
		} else {
			s += "It is small enough to go ahead without an approval. "
		}
		return s
	case "submitting":
		return fmt.Sprintf("Approved. I'm asking the payment provider to refund %s. ", f.Amount)
	default:
		return ""
	}
}

// chunker turns a stream of small pieces of text into narration.delta
// events of at most about ten per second, never one row per token.
type chunker struct {
	st    *store.Store
	run   *store.Run
	every time.Duration
	buf   strings.Builder
	last  time.Time
}

func (c *chunker) emit(ctx context.Context, text string) error {
	c.buf.WriteString(text)
	if time.Since(c.last) < c.every {
		return nil
	}
	return c.flush(ctx)
}

func (c *chunker) flush(ctx context.Context) error {
	if c.buf.Len() == 0 {
		return nil
	}
	text := c.buf.String()
	c.buf.Reset()
	c.last = time.Now()
	return c.st.AppendNarration(ctx, c.run.ID, text)
}

// narrate runs the narrator for the facts, falling back to the built-in one
// when it fails: a model's failure never fails a refund. What the model
// already said stays in the log, behind a new attempt.
func (e *Executor) narrate(ctx context.Context, run *store.Run, f Facts) error {
	c := &chunker{st: e.store, run: run, every: e.cfg.ChunkEvery, last: time.Now()}
	said := false
	var emitErr error
	emit := func(s string) error {
		said = said || s != ""
		emitErr = c.emit(ctx, s)
		return emitErr
	}
	if err := e.narrator.Narrate(ctx, f, emit); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if emitErr != nil {
			// Our log failed, not the narrator: nothing to fall back to.
			return emitErr
		}
		e.logger.Warn("narrator failed; using the built-in one", "run", run.ID, "err", err)
		if said {
			// What the model said stays in the log, but the built-in
			// narrator starts a new attempt: its words never continue
			// the model's broken sentence.
			if err := c.flush(ctx); err != nil {
				return err
			}
			if err := e.beginAttempt(ctx, run, f.Stage); err != nil {
				return err
			}
		}
		if err := (Builtin{Delay: e.cfg.NarrationDelay}).Narrate(ctx, f, emit); err != nil {
			return err
		}
	}
	return c.flush(ctx)
}
