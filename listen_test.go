package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store/storetest"
)

// TestListen_ReusesAddressInTimeWait: a restarted serve binds its port at
// once although the previous process's connections linger in TIME_WAIT.
// Go sets SO_REUSEADDR on its listeners on Linux; this holds it to that.
func TestListen_ReusesAddressInTimeWait(t *testing.T) {
	t.Parallel()
	ln, err := listen(context.Background(), "127.0.0.1:0", 0, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	if got := reuseAddr(t, ln); got != 1 {
		t.Errorf("SO_REUSEADDR = %d on a listener, want 1", got)
	}
	addr := ln.Addr().String()
	port := ln.Addr().(*net.TCPAddr).Port

	client, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	// The server hangs up first, as a stopping serve does: its side of the
	// connection is the one left in TIME_WAIT, on the listening port.
	server.Close()
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("client read after the server closed: %v, want EOF", err)
	}
	client.Close()
	testkit.WaitUntil(t, fmt.Sprintf("a connection in TIME_WAIT on port %d", port), 5*time.Second, func() bool {
		return timeWaitOn(t, port)
	})
	ln.Close()

	again, err := listen(context.Background(), addr, 0, discardLogger())
	if err != nil {
		t.Fatalf("listen again on %s with a connection in TIME_WAIT: %v", addr, err)
	}
	again.Close()
}

// TestListen_RetriesBusyAddress: while the old process still listens, a
// new serve says so once and retries; when the old one lets go, about a
// second later, it listens.
func TestListen_RetriesBusyAddress(t *testing.T) {
	t.Parallel()
	holder, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	log := newWatchedWriter("address in use; retrying for up to 10s")
	// The holder lets go a second after the retrying starts.
	go func() {
		<-log.seen
		time.AfterFunc(time.Second, func() { holder.Close() })
	}()
	start := time.Now()
	ln, err := listen(context.Background(), holder.Addr().String(), listenBusyFor, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatalf("listen on an address freed after a second: %v", err)
	}
	ln.Close()
	if took := time.Since(start); took < time.Second {
		t.Errorf("listened after %s, before the holder let go", took)
	}
	if got := strings.Count(log.String(), "address in use"); got != 1 {
		t.Errorf("logged %d lines about the busy address, want 1:\n%s", got, log.String())
	}
	if !strings.Contains(log.String(), "addr="+holder.Addr().String()) {
		t.Errorf("the log line does not name the address:\n%s", log.String())
	}
}

// TestListen_BusyAddressFailsAfterItsBound: an address that stays in use
// fails the start after the retry bound, saying what was in use and that
// it was retried.
func TestListen_BusyAddressFailsAfterItsBound(t *testing.T) {
	t.Parallel()
	holder, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	const bound = 500 * time.Millisecond
	start := time.Now()
	ln, err := listen(context.Background(), holder.Addr().String(), bound, discardLogger())
	if err == nil {
		ln.Close()
		t.Fatal("listened on an address another listener holds")
	}
	if took := time.Since(start); took < bound || took > bound+5*time.Second {
		t.Errorf("failed after %s, want about %s", took, bound)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("err = %v, want EADDRINUSE", err)
	}
	for _, want := range []string{holder.Addr().String(), "address already in use", "after retrying for 500ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to say %q", err, want)
		}
	}
}

// TestServe_WaitsForItsAddress: `refundd serve` started while the old
// process still holds ADDR logs the retry on stderr and serves once the
// address is free, as under a supervisor that restarts it at once.
func TestServe_WaitsForItsAddress(t *testing.T) {
	t.Parallel()
	holder, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	env := map[string]string{"DATABASE_URL": storetest.MustOpen(t).URL(), "SESSION_KEY": testSessionKey,
		"ADDR": holder.Addr().String()}
	stderr := newWatchedWriter("address in use; retrying for up to 10s")
	stdout := newWatchedWriter("refundd is running at http://" + holder.Addr().String())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve"}, func(k string) string { return env[k] }, stdout, stderr) }()

	waitFor := func(what string, seen <-chan struct{}) {
		t.Helper()
		select {
		case <-seen:
		case code := <-done:
			t.Fatalf("serve exited with %d before %s; stderr:\n%s", code, what, stderr.String())
		case <-time.After(30 * time.Second):
			t.Fatalf("no sign of %s within 30s; stderr:\n%s", what, stderr.String())
		}
	}
	waitFor("the retry on stderr", stderr.seen)
	holder.Close()
	waitFor("serve to listen", stdout.seen)
	res, err := http.Get("http://" + holder.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got, want := res.StatusCode, http.StatusOK; got != want {
		t.Errorf("/healthz = %d, want %d", got, want)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exit code after SIGTERM = %d, want 0; stderr:\n%s", code, stderr.String())
	}
}

// TestServe_HealthAddrAnswersAtTheConnectionCap: flooded with three times
// MAX_CONNECTIONS connections, half of them sending nothing (a reconnect
// wave's connections, before their headers) and half pipelining requests
// they never read, ADDR accepts no one, and /healthz and /readyz on
// HEALTH_ADDR still answer within a second.
func TestServe_HealthAddrAnswersAtTheConnectionCap(t *testing.T) {
	t.Parallel()
	const maxConns = 20
	p := startSeededServe(t, map[string]string{"MAX_CONNECTIONS": fmt.Sprint(maxConns), "HEALTH_ADDR": "127.0.0.1:0"})
	health := healthURL(t, p)
	if health == p.url {
		t.Fatalf("health checks at %s, the web server's own address", health)
	}

	addr := strings.TrimPrefix(p.url, "http://")
	for i := range 3 * maxConns {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if i%2 == 1 {
			go func() {
				req := "GET /api/openapi.json HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"
				_, _ = io.WriteString(conn, strings.Repeat(req, 500))
			}()
		}
	}
	// Behind those in the accept queue, a probe of ADDR waits until one of
	// them is closed (10 s without a request header).
	quick := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	if res, err := quick.Get(p.url + "/healthz"); err == nil {
		res.Body.Close()
		t.Fatalf("ADDR answered /healthz with all %d connections held; the test holds nothing", maxConns)
	}

	for _, tc := range []struct {
		path   string
		status int
	}{{"/healthz", http.StatusOK}, {"/readyz", http.StatusOK}, {"/metrics", http.StatusOK}, {"/login", http.StatusNotFound}} {
		t.Run(tc.path, func(t *testing.T) {
			start := time.Now()
			res, err := quick.Get(health + tc.path)
			if err != nil {
				t.Fatalf("GET %s on HEALTH_ADDR with ADDR at its connection cap: %v", tc.path, err)
			}
			res.Body.Close()
			if got := res.StatusCode; got != tc.status {
				t.Errorf("GET %s = %d, want %d", tc.path, got, tc.status)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("GET %s answered after %s, want within 1s", tc.path, took)
			}
		})
	}
}

// healthURL is the health listener's base URL, as serve printed it.
func healthURL(t *testing.T, p *program) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line := <-p.out:
			if rest, ok := strings.CutPrefix(line, "Health checks at "); ok {
				return strings.Fields(rest)[0]
			}
		case <-timeout:
			t.Fatal("serve did not print where health checks are within 10s")
		}
	}
}

// watchedWriter collects what is written to it and closes seen once it
// holds want.
type watchedWriter struct {
	want string
	seen chan struct{}
	mu   sync.Mutex
	buf  strings.Builder
}

func newWatchedWriter(want string) *watchedWriter {
	return &watchedWriter{want: want, seen: make(chan struct{})}
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *watchedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// reuseAddr reads SO_REUSEADDR from ln's socket.
func reuseAddr(t *testing.T, ln net.Listener) int {
	t.Helper()
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		v, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR)
	}); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return v
}

// timeWaitOn says the kernel holds a TCP connection in TIME_WAIT whose
// local port is port (/proc/net/tcp: state 06).
func timeWaitOn(t *testing.T, port int) bool {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Skipf("cannot see the kernel's connections: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 {
			continue
		}
		_, localPort, ok := strings.Cut(fields[1], ":")
		if ok && localPort == fmt.Sprintf("%04X", port) && fields[3] == "06" {
			return true
		}
	}
	return false
}
