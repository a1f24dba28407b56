package store

import (
	"strconv"
	"strings"
)

// A cursor is the seq of the last event a reader has: it asks for the
// events strictly after it. This file is the one place that reads a cursor
// from text (Last-Event-ID, ?after=, the CLI's --after) and judges it
// against a run's log.

// ParseCursor reads a cursor written as a seq: a non-negative decimal
// number, spelled as the stream sends it (no sign, no leading zeros),
// surrounding spaces ignored. An empty cursor is 0: from the start. Anything
// else is ErrCursorInvalid, which a stream answers with a snapshot.
func ParseCursor(raw string) (int64, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	// Only the seq's own spelling: "+7" or "007" was never an id we sent.
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, Refuse(CodeCursorInvalid, "refuse.cursor_not_seq", map[string]any{"Cursor": QuoteCursor(raw)})
	}
	return n, nil
}

// quotedCursorMax is how much of a cursor an error quotes back: enough to
// recognise it, never a reflection of a header the size of the limit.
const quotedCursorMax = 64

// QuoteCursor quotes a cursor for an error's words, its first
// quotedCursorMax bytes only ("…" says there was more).
func QuoteCursor(raw string) string {
	if len(raw) <= quotedCursorMax {
		return strconv.Quote(raw)
	}
	return strconv.Quote(raw[:quotedCursorMax]) + "…"
}

// CheckCursor judges a cursor against the run as read: ErrCursorExpired
// when events after it may have been pruned, ErrCursorInvalid when it is
// outside the log (negative, or ahead of last_seq) or names a seq a restart
// skipped (one handed out for narration the crash lost). A stream checks it
// against the run it already loaded for access, so a cursor that cannot
// resume goes straight to a snapshot without asking the log first.
func (r *Run) CheckCursor(cursor int64) error {
	return checkCursor(cursor, r.LastSeq, r.ReplayFloor, r.SeqGaps)
}

func checkCursor(cursor, lastSeq, floor int64, gaps []int64) error {
	switch {
	case cursor < 0 || cursor > lastSeq:
		return Refuse(CodeCursorInvalid, "refuse.cursor_outside", map[string]any{"Cursor": cursor, "Last": lastSeq})
	case cursor < floor:
		return Refuse(CodeCursorExpired, "refuse.cursor_expired", map[string]any{"Cursor": cursor, "From": floor + 1})
	}
	for _, g := range skipped(gaps) {
		if cursor >= g.From && cursor <= g.To {
			return Refuse(CodeCursorInvalid, "refuse.cursor_skipped", map[string]any{"Cursor": cursor, "From": g.From, "To": g.To})
		}
	}
	return nil
}

// SeqRange is the seqs From..To, both included.
type SeqRange struct{ From, To int64 }

// SkippedSeqs are the seq ranges the run's log skipped after PostgreSQL
// restarts, oldest first: no event ever had them, so nothing there is
// missing.
func (r *Run) SkippedSeqs() []SeqRange { return skipped(r.SeqGaps) }

func skipped(gaps []int64) []SeqRange {
	out := make([]SeqRange, len(gaps))
	for i, g := range gaps {
		out[i] = SeqRange{g + 1, g + seqEpochGap}
	}
	return out
}
