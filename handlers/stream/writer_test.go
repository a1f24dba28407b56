package stream

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
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

// A stream that is taken over sends its head itself, with the first
// chunk, in one write, and a client reads it as net/http's own: the
// handler's headers (a line break in one a space), Date and chunked
// encoding once each, and the body's end when the stream finishes.
func TestTakeover_HeadAndFirstChunkInOneWrite(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	writes := make(chan int, 16)
	logged := make(chan [2]int64, 1) // what the request log reads: status, size
	e := echo.New()
	e.GET("/s", func(c echo.Context) error {
		c.Response().Header().Set("X-Frame-Options", "DENY")
		c.Response().Header().Set("X-Broken", "a\r\nInjected: yes")
		w, err := beginTakeover(c, &Config{SlowAfter: time.Second, Retry: 2 * time.Second})
		if err != nil {
			return err
		}
		w.message("hello", 7, []byte("x"))
		if err := w.flush(); err != nil {
			return err
		}
		conn := w.detach()
		if conn == nil {
			return errors.New("not taken over")
		}
		writes <- conn.(*countingConn).writes
		logged <- [2]int64{int64(c.Response().Status), c.Response().Size}
		w.message("", 8, []byte("y"))
		if err := w.flush(); err != nil {
			return err
		}
		w.finish()
		return conn.Close()
	})
	srv := &http.Server{Handler: e}
	go srv.Serve(countingListener{ln})
	t.Cleanup(func() { srv.Close() })

	resp, err := http.Get("http://" + ln.Addr().String() + "/s")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body to its end: %v", err)
	}
	var n int
	select {
	case n = <-writes:
	case <-time.After(10 * time.Second): // the handler failed before it took the connection
		t.Fatalf("the stream was not taken over; the client read %d %q", resp.StatusCode, body)
	}
	if n != 1 {
		t.Errorf("the head and first chunk took %d writes, want 1", n)
	}
	if first := int64(len("retry: 2000\n\nevent: hello\nid: 7\ndata: x\n\n")); <-logged != [2]int64{200, first} {
		t.Errorf("the response as the log reads it is not 200 with the first chunk's %d bytes", first)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" ||
		resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Broken") != "a  Injected: yes" ||
		resp.Header.Get("Injected") != "" {
		t.Errorf("head: %d %v", resp.StatusCode, resp.Header)
	}
	if d := resp.Header.Values("Date"); len(d) != 1 {
		t.Errorf("Date: %q, want one", d)
	} else if _, err := http.ParseTime(d[0]); err != nil {
		t.Errorf("Date %q: %v", d[0], err)
	}
	if te := resp.TransferEncoding; len(te) != 1 || te[0] != "chunked" {
		t.Errorf("Transfer-Encoding %q, want chunked", te)
	}
	if want := "retry: 2000\n\nevent: hello\nid: 7\ndata: x\n\nid: 8\ndata: y\n\n"; string(body) != want {
		t.Errorf("body =\n%q\nwant\n%q", body, want)
	}
}

type countingListener struct{ net.Listener }

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c}, nil
}

// countingConn counts its writes (one goroutine writes at a time here).
type countingConn struct {
	net.Conn
	writes int
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes++
	return c.Conn.Write(p)
}

// A detached stream's writes each get at least the write timeout, and a
// fan-out's writes, each soon after the last, set the connection's
// deadline once, not twice a write (writeDeadline); a client that reads
// nothing is cut, not before the timeout.
func TestFlushChunk_DeadlineAtLeastTheTimeoutSetOnce(t *testing.T) {
	t.Parallel()
	server, client := net.Pipe()
	defer client.Close()
	conn := &deadlineCounter{Conn: server}
	w := &sseWriter{conn: conn, timeout: 2 * time.Second}
	go func() { _, _ = io.Copy(io.Discard, client) }()
	for range 10 {
		w.comment("ping")
		if err := w.flushChunk(); err != nil {
			t.Fatal(err)
		}
	}
	if conn.set != 1 {
		t.Errorf("10 writes set the deadline %d times, want once", conn.set)
	}

	stalled, reader := net.Pipe() // a client that reads nothing
	defer reader.Close()
	const timeout = 200 * time.Millisecond
	w = &sseWriter{conn: stalled, timeout: timeout}
	w.comment("ping")
	began := time.Now()
	err := w.flushChunk()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a write to a client that reads nothing: %v, want the deadline", err)
	}
	if took := time.Since(began); took < timeout {
		t.Errorf("the write was cut after %v, before the timeout of %v", took, timeout)
	}
}

// deadlineCounter counts the write deadlines set on a connection.
type deadlineCounter struct {
	net.Conn
	set int
}

func (c *deadlineCounter) SetWriteDeadline(t time.Time) error {
	c.set++
	return c.Conn.SetWriteDeadline(t)
}
