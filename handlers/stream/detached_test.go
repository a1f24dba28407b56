package stream

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/testkit"
)

// A detached stream runs outside the handler and echo's Recover: a panic
// in its loop ends that connection (logged with its stack, its streams
// left, its chunked body ended and the connection closed), and the
// process goes on.
func TestDetached_PanicEndsOnlyItsConnection(t *testing.T) {
	var logs testkit.SyncBuffer
	e := &Engine{cfg: Config{Heartbeat: time.Hour}, log: slog.New(slog.NewTextHandler(&logs, nil))}
	server, client := net.Pipe()
	f := &panickyFeed{}
	sc := &Conn{e: e, ready: make(chan struct{}, 1), recheck: make(chan struct{}, 1),
		unsubscribe: func() {}, feeds: []feed{f}, w: &sseWriter{conn: server, timeout: time.Second}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	read := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(client) // until the detached stream closes the connection
		read <- string(b)
	}()
	stopped := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		sc.detached(ctx, server, cancel, func() bool { close(stopped); return true })
	}()

	sc.ready <- struct{}{} // the feed's update panics
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the detached stream did not end after its loop panicked")
	}
	select {
	case got := <-read:
		if got != "0\r\n\r\n" {
			t.Errorf("the client read %q, want the chunked body's end", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the connection was not closed")
	}
	select {
	case <-stopped:
	default:
		t.Error("the stream did not stop following the shutdown")
	}
	if !f.left {
		t.Error("the stream's feed was not left")
	}
	if cause := context.Cause(ctx); cause == nil || !strings.Contains(cause.Error(), "stream: panicked: feed broke") {
		t.Errorf("the stream's context ended with %v, want the panic", cause)
	}
	if l := logs.String(); !strings.Contains(l, "stream panicked") || !strings.Contains(l, "panickyFeed") {
		t.Errorf("the log does not hold the panic with its stack:\n%s", l)
	}
}

// panickyFeed is a stream whose update panics.
type panickyFeed struct{ left bool }

func (f *panickyFeed) prepare(context.Context) error { return nil }
func (f *panickyFeed) begin(context.Context) error   { return nil }
func (f *panickyFeed) update(context.Context) error  { panic("feed broke") }
func (f *panickyFeed) recheck(context.Context) error { return nil }
func (f *panickyFeed) finished() bool                { return false }
func (f *panickyFeed) closing(context.Context, Reason) ([]byte, error) {
	return nil, nil
}
func (f *panickyFeed) leave()         { f.left = true }
func (f *panickyFeed) name() string   { return "panicky" }
func (f *panickyFeed) prefix() string { return "" }
