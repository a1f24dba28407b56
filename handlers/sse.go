package handlers

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// sseWriter frames Server-Sent Events into a buffer and writes it out with
// a deadline, flushing through the ResponseController (which reports
// errors, unlike echo's Flush).
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
}

// openStream sends the stream's headers and the retry hint at once, so the
// browser's EventSource opens.
func openStream(c echo.Context, cfg *StreamConfig) (*sseWriter, error) {
	res := c.Response()
	hdr := res.Header()
	hdr.Set(echo.HeaderContentType, "text/event-stream; charset=utf-8")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w := &sseWriter{w: res, rc: http.NewResponseController(res.Writer), timeout: cfg.SlowAfter}
	// The server may have a WriteTimeout; a stream lives longer.
	if err := w.rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, err
	}
	res.WriteHeader(http.StatusOK)
	w.retry(cfg.Retry)
	return w, w.flush()
}

// retry tells the browser how long to wait before it reconnects; the last
// hint it got wins.
func (w *sseWriter) retry(d time.Duration) {
	w.buf.WriteString("retry: " + strconv.FormatInt(d.Milliseconds(), 10) + "\n\n")
}

// message frames one event whose id is a seq; id < 0 sends no id (the
// browser keeps its last one).
func (w *sseWriter) message(event string, id int64, data []byte) {
	text := ""
	if id >= 0 {
		text = strconv.FormatInt(id, 10)
	}
	w.event(event, text, data)
}

// event frames one event: every line of data gets its own data: field; an
// empty id sends none.
func (w *sseWriter) event(event, id string, data []byte) {
	if event != "" {
		w.buf.WriteString("event: " + event + "\n")
	}
	if id != "" {
		w.buf.WriteString("id: " + id + "\n")
	}
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	data = bytes.ReplaceAll(data, []byte("\r"), []byte("\n"))
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		w.buf.WriteString("data: ")
		w.buf.Write(line)
		w.buf.WriteByte('\n')
	}
	w.buf.WriteByte('\n')
}

func (w *sseWriter) comment(text string) { w.buf.WriteString(": " + text + "\n\n") }

func (w *sseWriter) flush() error {
	if w.buf.Len() == 0 {
		return nil
	}
	if err := w.rc.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	_, err := w.w.Write(w.buf.Bytes())
	w.buf.Reset()
	if err != nil {
		return err
	}
	if err := w.rc.Flush(); err != nil {
		return err
	}
	return w.rc.SetWriteDeadline(time.Time{})
}

// abort makes a write blocked on a client that does not read fail now.
func (w *sseWriter) abort() { _ = w.rc.SetWriteDeadline(time.Now()) }
