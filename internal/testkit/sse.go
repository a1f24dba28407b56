package testkit

import (
	"bufio"
	"io"
	"iter"
	"strconv"
	"strings"
	"testing"
)

// SSEEvent is one message of an event stream, or one comment line (then
// only Comment is set, without its colon).
type SSEEvent struct {
	Event, ID, Data string
	Comment         string
}

// Seq is the message's id read as the run event's seq it names, as
// refundd's streams send it; an id that is not one fails the test.
func (e SSEEvent) Seq(tb testing.TB) int64 {
	tb.Helper()
	n, err := strconv.ParseInt(e.ID, 10, 64)
	if err != nil {
		tb.Fatalf("event %q has id %q, want a seq", e.Event, e.ID)
	}
	return n
}

// SSE parses a text/event-stream as it arrives: each message (its data
// lines joined by newlines) and each comment with text, in order (a bare
// ":" is padding, skipped). The sequence ends
// with the stream, or with the reading error, yielded last.
func SSE(r io.Reader) iter.Seq2[SSEEvent, error] {
	return func(yield func(SSEEvent, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var ev SSEEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if data != nil || ev.Event != "" {
					ev.Data = strings.Join(data, "\n")
					if !yield(ev, nil) {
						return
					}
				}
				ev, data = SSEEvent{}, nil
			case strings.HasPrefix(line, ":"):
				if c := strings.TrimSpace(line[1:]); c != "" && !yield(SSEEvent{Comment: c}, nil) {
					return
				}
			default:
				field, value, _ := strings.Cut(line, ":")
				value = strings.TrimPrefix(value, " ")
				switch field {
				case "event":
					ev.Event = value
				case "id":
					ev.ID = value
				case "data":
					data = append(data, value)
				}
			}
		}
		if err := sc.Err(); err != nil {
			yield(SSEEvent{}, err)
		}
	}
}

// ReadSSE sends what SSE parses from r to out until the stream ends, then
// closes out: for reading a stream in the background while the test waits
// on out under a deadline of its own.
func ReadSSE(r io.Reader, out chan<- SSEEvent) {
	defer close(out)
	for ev, err := range SSE(r) {
		if err != nil {
			return
		}
		out <- ev
	}
}
