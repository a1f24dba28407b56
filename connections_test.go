package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/devdb"
)

// TestServe_CapsKeepPagesAnswering: with streams at MAX_STREAMS and the
// rest of MAX_CONNECTIONS held by idle keep-alive connections, a new
// client still gets /healthz and the login page: near the connection cap
// the server closes idle connections instead of letting them hold it.
func TestServe_CapsKeepPagesAnswering(t *testing.T) {
	t.Parallel()
	p := startSeededServe(t, map[string]string{"MAX_CONNECTIONS": "12", "MAX_STREAMS": "4", "MAX_STREAMS_PER_USER": "4"})
	c := newClient(t)
	c.Transport = &http.Transport{}
	if res, err := c.PostForm(p.url+"/login", url.Values{"email": {"customer@example.com"}, "password": {devdb.DemoPassword}}); err != nil {
		t.Fatal(err)
	} else {
		res.Body.Close()
	}
	runID := startRunAPI(t, c, p.url)
	// From here on the test counts every connection it holds.
	c.CloseIdleConnections()

	// Streams up to their cap; the next is refused in words.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := func() *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/runs/"+runID+"/events?after=0", nil)
		res, err := (&http.Client{Jar: c.Jar, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for range 4 {
		res := stream()
		defer res.Body.Close()
		if line, _ := bufio.NewReader(res.Body).ReadString('\n'); !strings.HasPrefix(line, "retry: ") {
			t.Fatalf("stream began %q, want an open stream", line)
		}
	}
	refused := stream()
	body, _ := io.ReadAll(refused.Body)
	refused.Body.Close()
	if !strings.Contains(string(body), "event: busy") || !strings.Contains(string(body), "tries again in 30 seconds") {
		t.Fatalf("the fifth stream got:\n%s\nwant the busy event in words", body)
	}

	// Idle keep-alive connections for the rest of the connection cap: 4
	// streams and 8 of these are 12. Without the server closing idle
	// connections near the cap, the next client would wait for their
	// IdleTimeout (30 s), past its own timeout.
	idle := openIdleKeepAlives(t, strings.TrimPrefix(p.url, "http://"), 8)

	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/healthz", "/readyz", "/login"} {
		res, err := fresh.Get(p.url + path)
		if err != nil {
			t.Fatalf("GET %s with streams and connections at their caps: %v", path, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", path, res.StatusCode)
		}
	}
	// The server hung up on idle connections to make that room.
	if closedByServer(idle, 5*time.Second) == 0 {
		t.Error("no idle keep-alive connection was closed near the connection cap")
	}
}

// startRunAPI starts a refund for the signed-in customer and returns its ID.
func startRunAPI(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	res, err := c.Get(base + "/api/orders")
	if err != nil {
		t.Fatal(err)
	}
	var orders []struct{ ID int64 }
	decode(t, res, &orders)
	req, _ := http.NewRequest(http.MethodPost, base+"/api/runs",
		strings.NewReader(fmt.Sprintf(`{"order_id":%d,"amount":100,"reason":"broken"}`, orders[0].ID)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "caps-test")
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var run struct{ ID string }
	decode(t, res, &run)
	return run.ID
}

func decode(t *testing.T, res *http.Response, v any) {
	t.Helper()
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("%s %s = %d: %s", res.Request.Method, res.Request.URL.Path, res.StatusCode, b)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// openIdleKeepAlives opens n connections to addr, has each answer one
// request, and leaves them open and idle until the test ends.
func openIdleKeepAlives(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var idle []net.Conn
	for range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		idle = append(idle, conn)
	}
	return idle
}

// closedByServer is how many of conns the server closes (a read sees EOF)
// within wait.
func closedByServer(conns []net.Conn, wait time.Duration) int32 {
	var closed atomic.Int32
	var wg sync.WaitGroup
	for _, conn := range conns {
		wg.Go(func() {
			conn.SetReadDeadline(time.Now().Add(wait))
			if _, err := conn.Read(make([]byte, 1)); err == io.EOF {
				closed.Add(1)
			}
		})
	}
	wg.Wait()
	return closed.Load()
}
