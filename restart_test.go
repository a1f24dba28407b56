package main

import (
	"bufio"
	"context"
	"io"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// serveWithAStream starts a real `refundd serve` (1 s drain) over a fresh
// database with one run of the demo customer, and opens that run's page
// stream as the customer, past its retry hint.
func serveWithAStream(t *testing.T) (*process, *bufio.Reader) {
	t.Helper()
	ctx := context.Background()
	st := storetest.MustOpen(t)
	if err := devdb.SeedDemo(ctx, st); err != nil {
		t.Fatal(err)
	}
	customer, err := st.UserByEmail(ctx, "customer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	orders, err := st.OrdersByCustomer(ctx, customer.ID)
	if err != nil || len(orders) == 0 {
		t.Fatalf("orders: %v (%d)", err, len(orders))
	}
	run, _, err := st.StartRun(ctx, store.StartRequest{OwnerID: customer.ID, ClientRequestID: uuid.NewString(),
		OrderID: orders[0].ID, Amount: 100, Reason: "sigterm test"})
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := spawn(t, []string{"DATABASE_URL=" + st.URL(), "SESSION_KEY=" + testSessionKey, "ADDR=" + addr, "STREAM_DRAIN=1s"},
		"refundd is running at", "serve")
	base := "http://" + addr
	c := newClient(t)
	c.Timeout = 0 // a stream
	res, err := c.PostForm(base+"/login", url.Values{"email": {"customer@example.com"}, "password": {devdb.DemoPassword}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	res, err = c.Get(base + "/runs/" + run.ID.String() + "/events?after=x")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	body := bufio.NewReader(res.Body)
	if line, _ := body.ReadString('\n'); !strings.HasPrefix(line, "retry: ") {
		t.Fatalf("stream began %q, want its retry hint", line)
	}
	return p, body
}

// TestServe_SIGTERMTellsStreamsToReconnect: a real `refundd serve` that
// gets SIGTERM tells each open stream to reconnect (a fresh retry hint
// and event: restart) before it ends it, within the drain window.
func TestServe_SIGTERMTellsStreamsToReconnect(t *testing.T) {
	t.Parallel()
	p, body := serveWithAStream(t)
	// The start (a reset, for the cursor x) is read before the signal.
	for sawReset := false; ; {
		line, err := body.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before its reset: %v", err)
		}
		sawReset = sawReset || line == "event: reset\n"
		if sawReset && line == "\n" {
			break
		}
	}
	// Everything the stream sends from the signal on, until its end.
	rest := make(chan string, 1)
	go func() {
		got, _ := io.ReadAll(body)
		rest <- string(got)
	}()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var tail string
	select {
	case tail = <-rest:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not end within 20 s of SIGTERM")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the stream ended %v after SIGTERM, want within the 1 s drain window (and the shutdown)", d)
	}
	if !strings.Contains(tail, "retry: ") {
		t.Errorf("after SIGTERM the stream sent %q, want a fresh retry hint", tail)
	}
	var restart *testkit.SSEEvent
	for ev, err := range testkit.SSE(strings.NewReader(tail)) {
		if err == nil && ev.Event == "restart" {
			restart = &ev
		}
	}
	if restart == nil || !strings.Contains(restart.Data, "Reconnecting") {
		t.Errorf("after SIGTERM the stream sent %q, want event: restart saying the page reconnects", tail)
	}
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Error("serve did not exit within 20 s of SIGTERM")
	}
}
