package stream

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/testkit"
)

// FuzzSSEMessage holds the stream's framing to its promise: whatever bytes
// a fragment carries (line breaks of any kind, "event:", "id:" or "data:"
// of its own, a blank line), the frame reads back, through the one SSE
// parser the tests use, as exactly the message that was sent, with its
// line endings made \n, and the message after it is untouched.
func FuzzSSEMessage(f *testing.F) {
	f.Add("run.event", int64(7), []byte("<p>a\r\nb</p>\n<p>c\rd</p>"))
	f.Add("reset", int64(0), []byte(""))
	f.Add("close", int64(-1), []byte("\n"))
	f.Add("", int64(-1), []byte("x"))
	f.Add("run.event", int64(9223372036854775807), []byte("\n\nevent: evil\nid: 99\ndata: injected\n\n"))
	f.Add("run.event", int64(3), []byte("\r\n\r\nid: 4\r\rretry: 1\r\n: comment"))
	f.Add("reset", int64(12), []byte("data:data: \r\r\n\n\r"))
	f.Add("x", int64(1), []byte("\x00\xff\xfe é ✓"))
	f.Fuzz(func(t *testing.T, event string, id int64, data []byte) {
		if strings.ContainsAny(event, "\r\n") {
			// Event names are the code's own constants, never text.
			t.Skip()
		}
		w := &sseWriter{w: nil, timeout: time.Second}
		w.message(event, id, data)
		frame := w.buf.String()

		// The frame is fields only, one blank line, at its very end.
		if !strings.HasSuffix(frame, "\n\n") || strings.Count(frame, "\n\n") != 1 || strings.Contains(frame, "\r") {
			t.Fatalf("frame %q: want one blank line, at the end, and no CR", frame)
		}
		for line := range strings.SplitSeq(strings.TrimSuffix(frame, "\n\n"), "\n") {
			if !strings.HasPrefix(line, "data: ") && !strings.HasPrefix(line, "event: ") && !strings.HasPrefix(line, "id: ") {
				t.Fatalf("frame %q has the line %q, not a field the writer sends", frame, line)
			}
		}

		// A second message right after it must come through whole.
		w.message("next", 1, []byte("after"))
		var got []testkit.SSEEvent
		for ev, err := range testkit.SSE(strings.NewReader(w.buf.String())) {
			if err != nil {
				t.Fatalf("parse %q: %v", w.buf.String(), err)
			}
			got = append(got, ev)
		}
		wantID := ""
		if id >= 0 {
			wantID = strconv.FormatInt(id, 10)
		}
		want := []testkit.SSEEvent{
			{Event: event, ID: wantID, Data: string(normalizeNewlines(data))},
			{Event: "next", ID: "1", Data: "after"},
		}
		if len(got) != len(want) {
			t.Fatalf("parsed %q into %d messages %+v, want %d %+v", w.buf.String(), len(got), got, len(want), want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("message %d = %+v, want %+v (stream %q)", i, got[i], want[i], w.buf.String())
			}
		}
	})
}

// normalizeNewlines is what the spec makes of CRLF, CR and LF in data: \n.
func normalizeNewlines(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	return bytes.ReplaceAll(b, []byte("\r"), []byte("\n"))
}
