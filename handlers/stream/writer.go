package stream

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/net/http/httpguts"
)

// sseWriter frames Server-Sent Events into a buffer and writes it out with
// a deadline: through the ResponseController (which reports errors, unlike
// echo's Flush) until detach, then on the connection itself, as chunks.
type sseWriter struct {
	w       http.ResponseWriter
	rc      atomic.Pointer[http.ResponseController]
	timeout time.Duration
	// buf holds what is framed and not yet written: taken from a pool at
	// the first frame and given back once written (nil: nothing pending),
	// so an idle stream holds no buffer and a fan-out allocates none.
	buf *bytes.Buffer
	// conn is the connection once detach took it from the server: writes
	// then go to it directly, in HTTP/1.1 chunks. detached is the same,
	// for abort, which another goroutine may call.
	conn     net.Conn
	detached atomic.Pointer[connRef]
	deadline time.Time // conn's write deadline (writeDeadline)
	// res is the response whose head the first flush writes itself, on
	// the connection it takes (beginTakeover); nil once taken, or when
	// the server sends it. head is that head's fields until written.
	res  *echo.Response
	head http.Header
	// close1_0: the client spoke HTTP/1.0 (as nginx does to its upstream
	// unless told otherwise), which has no chunks: the server sent the
	// head without chunked encoding, so the body is the bytes themselves
	// and ends when the connection closes.
	close1_0 bool
}

type connRef struct{ net.Conn }

func newSSEWriter(w http.ResponseWriter, rc *http.ResponseController, timeout time.Duration) *sseWriter {
	sw := &sseWriter{w: w, timeout: timeout}
	sw.rc.Store(rc)
	return sw
}

// openStream sends the stream's headers and the retry hint at once, so the
// browser's EventSource opens.
func openStream(c echo.Context, cfg *Config) (*sseWriter, error) {
	w, err := beginStream(c, cfg)
	if err != nil {
		return nil, err
	}
	return w, w.flush()
}

// beginStream is openStream with the head and retry hint left in the
// buffer, for a caller that writes more before its first flush: one write
// where there were two.
func beginStream(c echo.Context, cfg *Config) (*sseWriter, error) {
	w, err := newStream(c, cfg)
	if err != nil {
		return nil, err
	}
	c.Response().WriteHeader(http.StatusOK)
	w.retry(cfg.RetryHint())
	return w, nil
}

// beginTakeover is beginStream for a stream that detach will take from
// the server: an HTTP/1.1 one's first flush takes the connection at once
// and writes the head itself, with the first chunk, in one write. The
// server's own head (its clone of the headers, their sorting, its
// buffers) goes unused, and the stream is detached. Any other stream
// (HTTP/1.0, a writer that cannot be taken) begins as beginStream does.
func beginTakeover(c echo.Context, cfg *Config) (*sseWriter, error) {
	w, err := newStream(c, cfg)
	if err != nil {
		return nil, err
	}
	if w.close1_0 {
		c.Response().WriteHeader(http.StatusOK)
	} else {
		w.res = c.Response()
	}
	w.retry(cfg.RetryHint())
	return w, nil
}

// newStream sets an event stream's headers on c's response and makes its
// writer; nothing is sent yet.
func newStream(c echo.Context, cfg *Config) (*sseWriter, error) {
	res := c.Response()
	hdr := res.Header()
	hdr.Set(echo.HeaderContentType, "text/event-stream; charset=utf-8")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w := newSSEWriter(res, http.NewResponseController(res.Writer), cfg.SlowAfter)
	w.close1_0 = !c.Request().ProtoAtLeast(1, 1)
	if err := w.rc.Load().SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, err
	}
	return w, nil
}

// retry tells the browser how long to wait before it reconnects; the last
// hint it got wins.
func (w *sseWriter) retry(d time.Duration) {
	w.out().WriteString("retry: " + strconv.FormatInt(d.Milliseconds(), 10) + "\n\n")
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
	b := w.out()
	if event != "" {
		b.WriteString("event: ")
		b.WriteString(event)
		b.WriteByte('\n')
	}
	if id != "" {
		b.WriteString("id: ")
		b.WriteString(id)
		b.WriteByte('\n')
	}
	if bytes.IndexByte(data, '\r') >= 0 { // copies: data may be shared (Frames)
		data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
		data = bytes.ReplaceAll(data, []byte("\r"), []byte("\n"))
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
}

func (w *sseWriter) comment(text string) { w.out().WriteString(": " + text + "\n\n") }

func (w *sseWriter) flush() error {
	if w.pending() == 0 {
		return nil
	}
	if w.res != nil {
		if err := w.takeOver(); err != nil {
			return err
		}
	}
	if w.conn != nil {
		return w.flushChunk()
	}
	rc := w.rc.Load()
	if err := rc.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	_, err := w.w.Write(w.buf.Bytes())
	w.reset()
	if err != nil {
		return err
	}
	if err := rc.Flush(); err != nil {
		return err
	}
	if err := rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// abort makes a write blocked on a client that does not read fail now.
func (w *sseWriter) abort() {
	if c := w.detached.Load(); c != nil {
		_ = c.SetWriteDeadline(time.Now())
		return
	}
	if rc := w.rc.Load(); rc != nil {
		_ = rc.SetWriteDeadline(time.Now())
	}
}

// reset gives the written buffer back to the pool; one grown past
// maxPooledChunk (a long replay's) is let go.
func (w *sseWriter) reset() {
	if b := w.buf; b != nil {
		w.buf = nil
		if b.Cap() <= maxPooledChunk {
			b.Reset()
			frameBuffers.Put(b)
		}
	}
}

// out is the buffer frames are written into.
func (w *sseWriter) out() *bytes.Buffer {
	if w.buf == nil {
		w.buf = frameBuffers.Get().(*bytes.Buffer)
	}
	return w.buf
}

// pending is how many framed bytes wait to be written.
func (w *sseWriter) pending() int {
	if w.buf == nil {
		return 0
	}
	return w.buf.Len()
}

var frameBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// detach takes the connection from the HTTP server (http.Hijacker), after
// the response's head and first chunks were sent (or with them:
// takeOver), so that the handler can return and the stream holds only its
// own state: no request, no server buffers, and a goroutine whose stack is
// its own. An HTTP/1.1 response stays chunked: flush frames each write as
// a chunk, and finish ends the body; an HTTP/1.0 one is written as it is.
// nil: the response cannot be taken over (a recorder, HTTP/2); the stream
// is served by the handler as before.
func (w *sseWriter) detach() net.Conn {
	if w.conn != nil {
		return w.conn // taken at the first flush (takeOver)
	}
	if w.pending() > 0 {
		return nil
	}
	if w.hijack() != nil {
		return nil
	}
	return w.conn
}

// takeOver takes the connection before anything was written and frames
// the response's head for the first chunk's write. A writer that cannot
// be taken (a recorder, HTTP/2) gets its head written by the server.
func (w *sseWriter) takeOver() error {
	res := w.res
	w.res = nil
	err := w.hijack()
	if errors.Is(err, http.ErrNotSupported) {
		res.WriteHeader(http.StatusOK)
		return nil
	}
	if err != nil {
		return err
	}
	// The log's status and size, as the server's head would have set
	// them: the first chunk's bytes.
	res.Status, res.Committed = http.StatusOK, true
	res.Size += int64(w.pending())
	w.head = res.Header()
	return nil
}

// hijack takes the connection from the server.
func (w *sseWriter) hijack() error {
	conn, brw, err := w.rc.Load().Hijack()
	if err != nil {
		return err
	}
	if brw.Reader.Buffered() > 0 {
		// The client sent more (a pipelined request): this connection
		// carries only the stream now, so it is not read.
		_, _ = brw.Reader.Discard(brw.Reader.Buffered())
	}
	w.conn, w.w = conn, nil
	w.detached.Store(&connRef{conn})
	// The controller holds the server's response and its buffers.
	w.rc.Store(nil)
	return nil
}

// appendHead frames a 200 response's head with header, as net/http's
// would be for a body of chunks: what the server itself adds (Date,
// Transfer-Encoding) is not taken from header, a field whose name is not
// a token is dropped and line breaks in a value become spaces.
func appendHead(b []byte, header http.Header, now time.Time) []byte {
	b = append(b, "HTTP/1.1 200 OK\r\n"...)
	for k, vs := range header {
		if !httpguts.ValidHeaderFieldName(k) || serverOwnsHeader[k] {
			continue
		}
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			for i := 0; i < len(v); i++ {
				c := v[i]
				if c == '\r' || c == '\n' {
					c = ' '
				}
				b = append(b, c)
			}
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "Date: "...)
	b = now.UTC().AppendFormat(b, http.TimeFormat)
	return append(b, "\r\nTransfer-Encoding: chunked\r\n\r\n"...)
}

// serverOwnsHeader: fields appendHead writes itself or that a body of
// chunks must not carry.
var serverOwnsHeader = map[string]bool{"Date": true, "Transfer-Encoding": true, "Content-Length": true, "Connection": true}

// flushChunk writes the buffer as one HTTP/1.1 chunk (HTTP/1.0: as it
// is) with the write deadline.
func (w *sseWriter) flushChunk() error {
	if err := w.writeDeadline(); err != nil {
		return err
	}
	var err error
	if w.close1_0 {
		_, err = w.conn.Write(w.buf.Bytes())
	} else {
		// One write, one system call: the connection is wrapped (the
		// caps' counting), so net.Buffers would not use writev. The
		// chunk is framed in a pooled buffer: a fan-out to a thousand
		// streams allocates none.
		p := chunks.Get().(*[]byte)
		chunk := (*p)[:0]
		if w.head != nil { // the head, before the first chunk
			chunk = appendHead(chunk, w.head, time.Now())
			w.head = nil
		}
		chunk = strconv.AppendInt(chunk, int64(w.buf.Len()), 16)
		chunk = append(chunk, '\r', '\n')
		chunk = append(chunk, w.buf.Bytes()...)
		chunk = append(chunk, '\r', '\n')
		_, err = w.conn.Write(chunk)
		if cap(chunk) <= maxPooledChunk {
			*p = chunk
			chunks.Put(p)
		}
	}
	w.reset()
	return err
}

// writeDeadline gives the write about to start at least timeout on the
// detached connection. The deadline set lasts half as long again, so a
// fan-out's writes, each within the last's half, set none: setting a
// deadline moves a runtime timer, and setting and clearing it at every
// write was two for each watcher of each event. An idle stream's deadline
// passes unseen: it bounds writes only. After abort the deadline kept here
// is stale, so the next write is not given a new one and fails at once.
func (w *sseWriter) writeDeadline() error {
	now := time.Now()
	if w.deadline.Sub(now) >= w.timeout {
		return nil
	}
	w.deadline = now.Add(w.timeout + w.timeout/2)
	return w.conn.SetWriteDeadline(w.deadline)
}

// chunks holds the buffers flushChunk frames chunks in; one larger than
// maxPooledChunk is let go.
var chunks = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledChunk = 64 << 10

// finish ends a detached stream's body (the last chunk; HTTP/1.0's ends
// with the connection), best effort.
func (w *sseWriter) finish() {
	if w.conn == nil {
		return
	}
	if w.pending() > 0 {
		_ = w.flushChunk()
	}
	if w.close1_0 {
		return
	}
	_ = w.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = w.conn.Write([]byte("0\r\n\r\n"))
}
