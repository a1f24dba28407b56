package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/refundd/refundd/internal/testkit"
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

// TestServe_NeverReadingClientIsCut: a client that pipelines 2,000
// requests for the OpenAPI document on one connection and never reads is
// cut once a response has waited WRITE_TIMEOUT, and the cut is counted in
// /metrics; before it the server holds the connection.
func TestServe_NeverReadingClientIsCut(t *testing.T) {
	t.Parallel()
	p := startSeededServe(t, map[string]string{"REQUEST_TIMEOUT": "1s", "WRITE_TIMEOUT": "2s"})
	addr := strings.TrimPrefix(p.url, "http://")
	// The registry is the process's, shared with parallel tests.
	before := writeTimeouts(t, p.url)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() {
		// Blocks once the server stops reading; ends when the server cuts.
		req := "GET /api/openapi.json HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"
		_, _ = io.WriteString(conn, strings.Repeat(req, 2000))
	}()
	testkit.WaitUntil(t, "the never-reading client cut (refundd_http_write_timeouts_total grown)", 2*time.Minute,
		func() bool { return writeTimeouts(t, p.url) > before })
	// What the client reads now ends: the server closed its side.
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	n, err := io.Copy(io.Discard, conn)
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		t.Fatalf("the connection is still open after the cut (read %d bytes, then waited)", n)
	}
	if n == 0 {
		t.Error("the client got no byte of any answer before the cut")
	}
}

// writeTimeouts reads refundd_http_write_timeouts_total from /metrics.
func writeTimeouts(t *testing.T, base string) float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "refundd_http_write_timeouts_total "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	t.Fatal("/metrics has no refundd_http_write_timeouts_total")
	return 0
}
