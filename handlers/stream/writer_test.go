package stream

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestSSEWriter_MultiLineData(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	w := &sseWriter{w: rec, timeout: time.Second}
	w.message("reset", 7, []byte("<p>a\r\nb</p>\n<p>c\rd</p>"))
	w.message("", -1, []byte("x"))
	w.comment("ping")
	want := "event: reset\nid: 7\ndata: <p>a\ndata: b</p>\ndata: <p>c\ndata: d</p>\n\ndata: x\n\n: ping\n\n"
	if got := w.buf.String(); got != want {
		t.Errorf("framed =\n%q\nwant\n%q", got, want)
	}
}
