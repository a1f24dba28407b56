package handlers_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

// startNginx runs Debian's nginx (`make test` installs it) on a free
// loopback port in front of upstream (host:port), with a configuration of
// its own and nginx's default proxy settings: it speaks HTTP/1.0 to
// upstream. It returns nginx's base URL.
func startNginx(t *testing.T, upstream string) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatal("nginx is missing; install it with `apt-get install -y --no-install-recommends nginx` (`make test` does this when run as root)")
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	conf := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server {
		listen %[2]s;
		location / { proxy_pass http://%[3]s; }
	}
}
`, dir, addr, upstream)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx error log:\n%s", b)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatal("nginx did not listen within 30 s")
		}
	}
}

// sseLine is every line an event stream may hold; chunk framing (a size
// in hex, a lone 0) is none of them.
var sseLine = regexp.MustCompile(`^(|(retry|id|event|data)(: .*)?|: .*)$`)

// TestStream_BehindDefaultNginx: nginx with its default settings proxies
// with HTTP/1.0; the stream reaches its client through it as the server
// wrote it (no chunk framing inside the body, before or after the stream
// leaves the server's hands), live events included, and it ends cleanly
// when the run ends.
func TestStream_BehindDefaultNginx(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	proxy := startNginx(t, strings.TrimPrefix(a.srv.URL, "http://"))
	req, _ := http.NewRequest(http.MethodGet, proxy+jsonStreamPath(a.run.ID, "0"), nil)
	req.Header.Set("Cookie", a.loginCookie(t))
	res, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("stream through nginx = %d, want 200", res.StatusCode)
	}
	lines := make(chan string, 1000)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		readErr <- sc.Err()
		close(lines)
	}()
	ids := waitLines(t, lines, "id: 1")
	a.narrate(t, 1, 3) // seq 2..4, sent after the stream was handed over
	ids = append(ids, waitLines(t, lines, "id: 4")...)
	if _, err := a.store.FinishRun(context.Background(), a.run.ID, store.StateCanceled, store.Say("Canceled as requested.")); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, waitLines(t, lines, "event: close")...)
	ended := time.After(20 * time.Second)
	for drained := false; !drained; {
		select {
		case line, ok := <-lines:
			if !ok {
				drained = true
			} else if !sseLine.MatchString(line) {
				t.Errorf("line %q is not event-stream text (chunk framing?)", line)
			}
		case <-ended:
			t.Fatal("the stream through nginx did not end within 20 s of its close event")
		}
	}
	if err := <-readErr; err != nil {
		t.Errorf("the stream through nginx ended with %v, want a clean end", err)
	}
	if got, want := strings.Join(filterIDs(ids), ","), "id: 1,id: 2,id: 3,id: 4"; !strings.HasPrefix(got, want) {
		t.Errorf("ids = %s, want them to begin %s", got, want)
	}
}

// waitLines reads lines until one is last, checking each is event-stream
// text, and returns them.
func waitLines(t *testing.T, lines <-chan string, last string) []string {
	t.Helper()
	var got []string
	timeout := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended before %q; got %q", last, got)
			}
			if !sseLine.MatchString(line) {
				t.Fatalf("line %q is not event-stream text (chunk framing?)", line)
			}
			got = append(got, line)
			if line == last {
				return got
			}
		case <-timeout:
			t.Fatalf("no %q within 20 s; got %q", last, got)
		}
	}
}

func filterIDs(lines []string) []string {
	var ids []string
	for _, l := range lines {
		if strings.HasPrefix(l, "id: ") {
			ids = append(ids, l)
		}
	}
	return ids
}
