package handlers_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
)

// clientFrom is a browser-like client (cookies, redirects not followed)
// whose connections leave from ip, a loopback address, so the server sees
// it as a different client address.
func (a *app) clientFrom(t testing.TB, ip string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Jar:           jar,
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func loginForm(email, password string) url.Values {
	return url.Values{"email": {email}, "password": {password}}
}

// TestLogin_OtherAddressCannotLockOutOwner: an attacker's wrong passwords
// from one address never keep the owner's right password from another
// address out; the attacker's own address is what gets throttled.
func TestLogin_OtherAddressCannotLockOutOwner(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	attacker := a.clientFrom(t, "127.0.0.3")
	checked := 0
	for i := range 50 {
		r := a.post(t, attacker, "/login", loginForm("customer@example.com", fmt.Sprint("guess", i)))
		switch r.status {
		case http.StatusUnauthorized:
			checked++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("guess %d: status = %d, want 401 or 429", i, r.status)
		}
	}
	if got, want := checked, store.LoginAttemptsPerAccountAddress; got != want {
		t.Errorf("guesses checked from one address = %d, want %d", got, want)
	}
	owner := a.clientFrom(t, "127.0.0.2")
	wantRedirect(t, a.post(t, owner, "/login", loginForm("customer@example.com", devdb.DemoPassword)), "/")
	if got := a.get(t, owner, "/").doc(t).Find("#whoami").Text(); !strings.Contains(got, "customer@example.com") {
		t.Errorf("#whoami = %q, want the owner signed in", got)
	}
	// The attacker's address is still held for that account.
	wantStatus(t, a.post(t, attacker, "/login", loginForm("customer@example.com", devdb.DemoPassword)), http.StatusTooManyRequests)
}

// TestLogin_GuessesFromManyAddressesBounded: one wrong guess each from
// many addresses is checked only up to the account's budget; beyond it
// every guess gets 429 without a password check, while the owner signs in
// from an address they have signed in from before.
func TestLogin_GuessesFromManyAddressesBounded(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	owner := a.clientFrom(t, "127.0.0.2")
	wantRedirect(t, a.post(t, owner, "/login", loginForm("customer@example.com", devdb.DemoPassword)), "/")
	wantRedirect(t, a.post(t, owner, "/logout", nil), "/login")

	checked, refused := 0, 0
	for i := range 3 * store.LoginAttemptsPerAccount {
		c := a.clientFrom(t, fmt.Sprintf("127.0.1.%d", i+1))
		r := a.post(t, c, "/login", loginForm("customer@example.com", fmt.Sprint("guess", i)))
		switch r.status {
		case http.StatusUnauthorized:
			checked++
		case http.StatusTooManyRequests:
			refused++
			if !strings.Contains(r.body, "Too many attempts") {
				t.Errorf("429 page does not say so:\n%s", r.body)
			}
		default:
			t.Fatalf("guess %d: status = %d, want 401 or 429", i, r.status)
		}
	}
	if checked != store.LoginAttemptsPerAccount || refused != 2*store.LoginAttemptsPerAccount {
		t.Errorf("checked %d, refused %d; want %d checked and the rest refused", checked, refused, store.LoginAttemptsPerAccount)
	}
	if got := a.count(t, `SELECT count(*) FROM audit_log WHERE action = 'login_failed'`); got != store.LoginAttemptsPerAccount {
		t.Errorf("passwords checked (audited failures) = %d, want %d", got, store.LoginAttemptsPerAccount)
	}
	// Even the right password from a new address is not checked now: a
	// check is a guess, and the budget is spent.
	fresh := a.clientFrom(t, "127.0.2.1")
	wantStatus(t, a.post(t, fresh, "/login", loginForm("customer@example.com", devdb.DemoPassword)), http.StatusTooManyRequests)
	// The owner's known address is not held up by anyone else's failures.
	wantRedirect(t, a.post(t, owner, "/login", loginForm("customer@example.com", devdb.DemoPassword)), "/")
}

// TestLogin_BadBytesInEmail: a NUL byte or invalid UTF-8 in the email is
// refused in words, never a 500 from the database.
func TestLogin_BadBytesInEmail(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	for _, tc := range []struct{ name, email string }{
		{"NUL byte", "customer\x00@example.com"},
		{"invalid UTF-8", "customer\xff@example.com"},
		{"lone continuation byte", "\x80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := a.post(t, a.client(t), "/login", loginForm(tc.email, devdb.DemoPassword))
			wantStatus(t, r, http.StatusUnprocessableEntity)
			if got := r.doc(t).Find("main").Text(); !strings.Contains(got, `"email"`) {
				t.Errorf("page says %q, want it to say what is wrong with the email", got)
			}
			if strings.ContainsAny(r.body, "\x00\xff\x80") {
				t.Error("the page echoes the bad bytes")
			}
		})
	}
}
