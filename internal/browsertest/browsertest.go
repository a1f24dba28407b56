// Package browsertest gives tests a real, headless Chromium driven through
// chromedp. One Chromium serves a whole test binary (starting one costs
// about a second of CPU, and a suite has dozens of browser tests); each test
// gets a browser context of its own, which shares no cookies, storage or
// workers with any other. A missing Chromium fails the test; browser tests
// are never skipped.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Timeout bounds one test's whole browser session.
const Timeout = 60 * time.Second

// candidates are where Chromium is looked for, in order. CHROMIUM overrides.
var candidates = []string{"/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// ExecPath finds the Chromium binary: $CHROMIUM if set, else Debian's real
// binary (not the /usr/bin/chromium wrapper script), else one on PATH.
func ExecPath() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p, nil
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", errors.New("browsertest: Chromium not found (looked for " + strings.Join(candidates, ", ") +
		"); install it with `apt-get install -y --no-install-recommends chromium` (`make test` does this when run as root)")
}

// New opens a tab in a browser context of this test's own and returns a
// context whose chromedp actions run in it. The browser context is closed
// when the test ends; the context expires after Timeout.
func New(tb testing.TB) context.Context {
	tb.Helper()
	return NewWithTimeout(tb, Timeout)
}

// NewWithTimeout is New with a session bound other than Timeout, for a
// test that visits many pages on a machine that may be busy.
func NewWithTimeout(tb testing.TB, timeout time.Duration) context.Context {
	tb.Helper()
	browser, err := start()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancelContext := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	tb.Cleanup(func() {
		cancelTimeout()
		cancelContext() // closes the tab and disposes of its browser context
	})
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("browsertest: open a tab: %v", err)
	}
	return ctx
}

// shared is the test binary's one Chromium, started by the first New.
var shared struct {
	once    sync.Once
	ctx     context.Context // the browser's first tab; never used to act
	err     error
	close   func()
	folders []string
}

func start() (context.Context, error) {
	shared.once.Do(func() { shared.ctx, shared.err = launch() })
	return shared.ctx, shared.err
}

func launch() (context.Context, error) {
	exe, err := ExecPath()
	if err != nil {
		return nil, err
	}
	profile, err := os.MkdirTemp("", "crprofile")
	if err != nil {
		return nil, err
	}
	// Chromium puts its singleton socket in TMPDIR, and a socket's path
	// must stay under ~107 bytes: a short folder of its own.
	tmp, err := os.MkdirTemp("", "cr")
	if err != nil {
		return nil, err
	}
	shared.folders = []string{profile, tmp}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox, // required as root; harmless otherwise
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		// Chromium leaves org.chromium.Chromium.* folders in TMPDIR.
		chromedp.Env("TMPDIR="+tmp),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	shared.close = func() {
		cancelBrowser() // closes the browser and waits for it
		cancelAlloc()
	}
	// Start the browser now, so a broken install fails here, clearly.
	if err := chromedp.Do(ctx); err != nil {
		Close()
		return nil, fmt.Errorf("browsertest: start %s: %w", exe, err)
	}
	return ctx, nil
}

// Close stops the shared Chromium, if one was started, and removes its
// folders. A TestMain calls it after m.Run; without it, Chromium dies with
// the test binary (chromedp asks Linux to kill it) and its folders stay.
func Close() {
	if shared.close != nil {
		shared.close()
	}
	for _, f := range shared.folders {
		os.RemoveAll(f)
	}
}

// Login signs in through the login form at baseURL and waits until the home
// page shows who is signed in.
func Login(ctx context.Context, baseURL, email, password string) error {
	err := chromedp.Do(ctx,
		chromedp.Navigate(baseURL+"/login"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="email"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="email"]`), email),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), password),
		chromedp.Submit(chromedp.CSS(`form[action="/login"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#whoami`)),
	)
	if err != nil {
		return fmt.Errorf("browsertest: log in as %s: %w", email, err)
	}
	return nil
}
