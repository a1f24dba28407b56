package main

import (
	"bufio"
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store/storetest"
)

func TestMain(m *testing.M) {
	code := storetest.Main(m)
	browsertest.Close()
	// The binary buildBinary made for this process's tests.
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

const testSessionKey = "0123456789abcdef0123456789abcdef"

// testProviderSecret is the simulated provider's secret where a test runs
// `provider` and workers as processes of their own.
const testProviderSecret = "provider-secret-for-tests"

// program is refundd's run() started in-process, as a test's own process.
type program struct {
	url    string              // the base URL it printed
	stderr *testkit.SyncBuffer // its log
	out    chan string         // further stdout lines
	done   chan int            // its exit code
	stop   func() (code int)
}

// start runs `refundd <args>` with env as its whole environment and waits
// until it prints the URL it serves.
func start(t *testing.T, env map[string]string, args ...string) *program {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	p := &program{out: make(chan string, 100), done: make(chan int, 1)}
	stderr := &testkit.SyncBuffer{}
	p.stderr = stderr
	go func() {
		code := run(ctx, args, func(k string) string { return env[k] }, outW, stderr)
		outW.Close()
		p.done <- code
	}()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			line := sc.Text()
			if u, ok := strings.CutPrefix(line, "refundd is running at "); ok {
				urls <- u
			}
			select {
			case p.out <- line:
			default:
			}
		}
	}()
	var exited bool
	var code int
	p.stop = func() int {
		if !exited {
			cancel()
			select {
			case code = <-p.done:
			case <-time.After(time.Minute):
				t.Fatalf("refundd %s did not stop within a minute of SIGTERM", args[0])
			}
			exited = true
		}
		return code
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("refundd %s stderr:\n%s", args[0], stderr.String())
		}
	})
	select {
	case p.url = <-urls:
	case code := <-p.done:
		exited = true
		t.Fatalf("refundd %s exited with %d before serving; stderr:\n%s", args[0], code, stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("refundd %s did not print its URL within 2 minutes", args[0])
	}
	return p
}

func TestBrowser_CustomerLogsInAndSeesHome(t *testing.T) {
	t.Parallel()
	p := startSeededServe(t, nil)

	ctx := browsertest.New(t)
	if err := browsertest.Login(ctx, p.url, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	whoami, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#whoami")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"customer@example.com", "customer"} {
		if !strings.Contains(whoami, want) {
			t.Errorf("#whoami = %q, want it to contain %q", whoami, want)
		}
	}
	heading, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1")))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := heading, "Hello, Casey Customer"; got != want {
		t.Errorf("h1 = %q, want %q", got, want)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := loc, p.url+"/"; got != want {
		t.Errorf("location = %q, want %q", got, want)
	}
	if code := p.stop(); code != 0 {
		t.Errorf("serve exit code after SIGTERM = %d, want 0", code)
	}
}

// TestDev_PrivateClusterLifecycle runs `refundd dev` twice on one DATA_DIR:
// the first run creates the cluster, migrates and seeds; the second finds it
// all again; each stops the cluster it started when told to stop.
func TestDev_PrivateClusterLifecycle(t *testing.T) {
	t.Parallel()
	dataDir := traversableTempDir(t)
	env := map[string]string{"DATA_DIR": dataDir, "ADDR": "127.0.0.1:0", "PROVIDER_ADDR": "127.0.0.1:0"}
	pidFile := filepath.Join(dataDir, "pg", "postmaster.pid")

	var firstKey []byte
	for i, name := range []string{"first run", "second run"} {
		t.Run(name, func(t *testing.T) {
			p := start(t, env, "dev")
			client := newClient(t)
			form := url.Values{"email": {"customer@example.com"}, "password": {devdb.DemoPassword}}
			res, err := client.PostForm(p.url+"/login", form)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if got, want := res.StatusCode, http.StatusOK; got != want {
				t.Fatalf("login then home: status %d, want %d", got, want)
			}
			if !strings.Contains(string(body), "€129.99") {
				t.Errorf("home page lacks the seeded order €129.99:\n%s", body)
			}
			if _, err := os.Stat(pidFile); err != nil {
				t.Errorf("PostgreSQL not running under DATA_DIR while dev runs: %v", err)
			}
			key, err := os.ReadFile(filepath.Join(dataDir, "session.key"))
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				firstKey = key
			} else if string(key) != string(firstKey) {
				t.Errorf("session.key changed between runs")
			}
			if st, err := os.Stat(filepath.Join(dataDir, "session.key")); err == nil && st.Mode().Perm() != 0o600 {
				t.Errorf("session.key mode = %v, want 0600", st.Mode().Perm())
			}
			checkDevProviderSecret(t, p, dataDir)

			if code := p.stop(); code != 0 {
				t.Errorf("dev exit code after SIGTERM = %d, want 0", code)
			}
			if _, err := os.Stat(pidFile); err == nil {
				t.Errorf("PostgreSQL still running after dev stopped (%s exists)", pidFile)
			}
			if i == 0 {
				// Made readable by others between runs: the next run's
				// fresh secret must not inherit that (checked above).
				if err := os.Chmod(filepath.Join(dataDir, "provider.secret"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// checkDevProviderSecret: dev's simulated provider switches its faults
// only for a client with its secret, which dev keeps in
// DATA_DIR/provider.secret (mode 0600) and prints nowhere.
func checkDevProviderSecret(t *testing.T, p *program, dataDir string) {
	t.Helper()
	path := filepath.Join(dataDir, "provider.secret")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(string(raw))
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 || len(secret) < payments.MinSecret {
		t.Errorf("provider.secret: %v, want a secret of at least %d characters, mode 0600", err, payments.MinSecret)
	}
	var providerURL string
	for providerURL == "" {
		select {
		case line := <-p.out:
			if rest, ok := strings.CutPrefix(line, "Simulated payment provider at "); ok {
				providerURL = strings.Fields(rest)[0]
			}
			if strings.Contains(line, secret) {
				t.Errorf("dev printed the provider's secret: %q", line)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("dev did not say where its provider listens")
		}
	}
	for _, tc := range []struct {
		secret string
		status int
	}{{"", http.StatusUnauthorized}, {secret, http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodPut, providerURL+"/admin/faults", strings.NewReader(`{}`))
		if tc.secret != "" {
			req.Header.Set("Authorization", "Bearer "+tc.secret)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.status {
			t.Errorf("PUT /admin/faults with secret %v = %d, want %d", tc.secret != "", res.StatusCode, tc.status)
		}
	}
	if strings.Contains(p.stderr.String(), secret) {
		t.Error("dev logged the provider's secret")
	}
}

func TestRun_Usage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want int
		says string
	}{
		{"no command", nil, nil, 2, "usage: refundd"},
		{"unknown command", []string{"frobnicate"}, nil, 2, `unknown command "frobnicate"`},
		{"events without a run", []string{"events"}, map[string]string{"DATABASE_URL": "postgres://nowhere/x"}, 2, "--run must be a run ID"},
		{"events with a bad flag", []string{"events", "--run", "x", "--later"}, map[string]string{"DATABASE_URL": "postgres://nowhere/x"}, 2, "flag provided but not defined"},
		{"worker with arguments", []string{"worker", "now"}, map[string]string{"DATABASE_URL": "postgres://nowhere/x"}, 2, "unexpected arguments"},
		{"bad config", []string{"migrate"}, map[string]string{"REPLAY_WINDOW": "soon"}, 2, "REPLAY_WINDOW"},
		{"serve without SESSION_KEY", []string{"serve"}, map[string]string{"DATABASE_URL": "postgres://nowhere/x"}, 2, "SESSION_KEY is required"},
		{"extra arguments", []string{"migrate", "now"}, map[string]string{"DATABASE_URL": "postgres://nowhere/x"}, 2, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := run(context.Background(), tc.args, func(k string) string { return tc.env[k] }, &stdout, &stderr)
			if code != tc.want {
				t.Errorf("exit code = %d, want %d", code, tc.want)
			}
			if !strings.Contains(stderr.String(), tc.says) {
				t.Errorf("stderr = %q, want it to say %q", stderr.String(), tc.says)
			}
			if n := strings.Count(strings.TrimSpace(stderr.String()), "\n"); tc.says != "usage: refundd" && !strings.HasPrefix(tc.name, "unknown") && n != 0 {
				t.Errorf("stderr has %d lines, want one:\n%s", n+1, stderr.String())
			}
		})
	}
}

func TestRun_Migrate(t *testing.T) {
	t.Parallel()
	u := storetest.URL(t)
	var stdout, stderr strings.Builder
	code := run(context.Background(), []string{"migrate"}, func(k string) string {
		return map[string]string{"DATABASE_URL": u}[k]
	}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("migrate exit code = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "up to date") {
		t.Errorf("stdout = %q, want it to say the database is up to date", stdout.String())
	}
}

func newClient(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second}
}

// traversableTempDir is a short folder that the postgres user can reach
// (t.TempDir's parents are private to root). It is removed at the end.
func traversableTempDir(t *testing.T) string {
	t.Helper()
	base := "/dev/shm"
	if st, err := os.Stat(base); err != nil || !st.IsDir() {
		base = os.TempDir()
	}
	dir, err := os.MkdirTemp(base, "refundd-dev-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startSeededServe runs `refundd serve` on a free loopback port over a
// fresh database holding the demo users, with env on top of the usual
// settings.
func startSeededServe(t *testing.T, env map[string]string) *program {
	t.Helper()
	st := storetest.MustOpen(t)
	if err := devdb.SeedDemo(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"DATABASE_URL": st.URL(), "SESSION_KEY": testSessionKey, "ADDR": "127.0.0.1:0"}
	maps.Copy(all, env)
	return start(t, all, "serve")
}
