package agent

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/refundd/refundd/store"
)

// Facts are what the narrator may talk about. Narration is presentation
// only: nothing it says changes a run.
type Facts struct {
	Stage string // "planning" or "submitting"
	// Language is the customer's (a BCP 47 tag; "" reads as English): the
	// narration is spoken in it, and the amounts below are written in it.
	Language    string `json:"language,omitempty"`
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

// Builtin is the narrator that needs no model: it says the words table's
// lines for the facts (Words: views.Answers), in the customer's language,
// a word at a time with a small delay, like a model would.
type Builtin struct {
	Delay time.Duration // between words; zero in tests
	Words Words
}

// Words are the built-in narrator's lines in a language: the words table's
// "narration.*" keys.
type Words interface {
	Say(lang, key string, data map[string]any) string
}

var _ Narrator = Builtin{}

// Narrate speaks the built-in lines for the stage.
func (b Builtin) Narrate(ctx context.Context, f Facts, emit func(string) error) error {
	if b.Words == nil {
		return errors.New("agent: the built-in narrator has no words (Builtin.Words)")
	}
	for _, w := range pieces(b.text(f)) {
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

func (b Builtin) text(f Facts) string {
	say := func(key string, data map[string]any) string { return b.Words.Say(f.Language, key, data) }
	switch f.Stage {
	case "planning":
		// The reason is the customer's own sentence: quoted, without the
		// full stop that would end ours twice.
		s := say("narration.planning", map[string]any{"Order": f.OrderID, "Description": f.Description, "Paid": f.Paid,
			"Amount": f.Amount, "Reason": strings.TrimRight(strings.TrimSpace(f.Reason), ".。")})
		s += say("narration.refundable", nil)
		if f.NeedsOK {
			return s + say("narration.needs_ok", nil)
		}
		return s + say("narration.no_ok", nil)
	case "submitting":
		return say("narration.submitting", map[string]any{"Amount": f.Amount})
	default:
		return ""
	}
}

// pieces cuts text where a model's tokens would end: after each space,
// and after the punctuation of a language written without spaces.
func pieces(text string) []string {
	var out []string
	start := 0
	for i, r := range text {
		if r == ' ' || strings.ContainsRune("，。：；！？、", r) {
			end := i + utf8.RuneLen(r)
			out = append(out, text[start:end])
			start = end
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
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
		if err := (Builtin{Delay: e.cfg.NarrationDelay, Words: e.cfg.Answers}).Narrate(ctx, f, emit); err != nil {
			return err
		}
	}
	return c.flush(ctx)
}
