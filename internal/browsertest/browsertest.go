// Package browsertest gives tests a real, headless Chromium driven through
// chromedp: one fresh browser per test, with its own profile and temporary
// folder. A missing Chromium fails the test; browser tests are never skipped.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
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

// New starts a headless Chromium for this test and returns a context whose
// chromedp actions run in its first tab. The browser is closed, and its
// folders removed, when the test ends; the context expires after Timeout.
func New(tb testing.TB) context.Context {
	tb.Helper()
	return NewWithTimeout(tb, Timeout)
}

// NewWithTimeout is New with a session bound other than Timeout, for a
// test that visits many pages on a machine that may be busy.
func NewWithTimeout(tb testing.TB, timeout time.Duration) context.Context {
	tb.Helper()
	exe, err := ExecPath()
	if err != nil {
		tb.Fatal(err)
	}
	// Created before the cleanups below are registered, so they are removed
	// after the browser has exited.
	profile := tb.TempDir()
	// Not tb.TempDir(): Chromium puts its singleton socket in TMPDIR, and a
	// socket's path must stay under ~107 bytes. Under a long test name
	// (tb.TempDir() takes up to 64 bytes of it) Chromium starts without
	// DevTools and chromedp reports only "chrome failed to start".
	tmp, err := os.MkdirTemp("", "cr")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(tmp) })

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
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	tb.Cleanup(func() {
		cancelTimeout()
		cancelBrowser() // closes the browser and waits for it
		cancelAlloc()
	})
	// Start the browser now, so a broken install fails here, clearly.
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("browsertest: start %s: %v", exe, err)
	}
	return ctx
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
