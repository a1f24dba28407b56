package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
)

// signedIn returns a client logged in as email.
func (a *app) signedIn(t testing.TB, email string) *http.Client {
	t.Helper()
	c := a.client(t)
	a.login(t, c, email)
	return c
}

// TestLogin_RateLimitedPerAccount: one address guessing one account is
// held back for that account (TestLogin_GuessesFromManyAddressesBounded
// has many addresses guessing it).
func TestLogin_RateLimitedPerAccount(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	for i := range store.LoginAttemptsPerAccountAddress {
		r := a.post(t, a.client(t), "/login", url.Values{"email": {"approver@example.com"}, "password": {fmt.Sprint("guess", i)}})
		wantStatus(t, r, http.StatusUnauthorized)
	}
	r := a.post(t, a.client(t), "/login", url.Values{"email": {"approver@example.com"}, "password": {devdb.DemoPassword}})
	wantStatus(t, r, http.StatusTooManyRequests)
	if got := r.doc(t).Find("#login-error").Text(); !strings.Contains(got, "Too many attempts; wait a minute") {
		t.Errorf("#login-error = %q, want it to say to wait a minute", got)
	}
	if r.header.Get("Retry-After") == "" {
		t.Error("no Retry-After on a 429")
	}
	if sessionCookie(r) != nil {
		t.Error("a throttled login set a session cookie")
	}
	// The refused attempt never reached the password check.
	if got := a.count(t, `SELECT count(*) FROM audit_log WHERE action = 'login_failed'`); got != store.LoginAttemptsPerAccountAddress {
		t.Errorf("checked passwords = %d, want %d", got, store.LoginAttemptsPerAccountAddress)
	}
	// Another account from the same address is not held up.
	a.login(t, a.client(t), "support@example.com")
}

func TestLogin_RateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	for i := range store.LoginAttemptsPerAddress {
		r := a.post(t, a.client(t), "/login", url.Values{"email": {fmt.Sprintf("nobody%d@example.com", i)}, "password": {"guess"}})
		wantStatus(t, r, http.StatusUnauthorized)
		if got := r.doc(t).Find("#login-error").Text(); !strings.Contains(got, "wrong email or password") {
			t.Fatalf("#login-error = %q, want only 'wrong email or password'", got)
		}
	}
	r := a.post(t, a.client(t), "/login", url.Values{"email": {"customer@example.com"}, "password": {devdb.DemoPassword}})
	wantStatus(t, r, http.StatusTooManyRequests)
	if !strings.Contains(r.body, "Too many attempts; wait a minute") {
		t.Errorf("429 page does not say to wait a minute:\n%s", r.body)
	}
}

// TestLogin_RenewsSession: login replaces whatever session the browser
// held, so a session planted before login is never the one that signs in.
func TestLogin_RenewsSession(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	first := a.post(t, c, "/login", url.Values{"email": {"customer@example.com"}, "password": {"demo"}})
	wantRedirect(t, first, "/")
	second := a.post(t, c, "/login", url.Values{"email": {"approver@example.com"}, "password": {"demo"}})
	wantRedirect(t, second, "/")
	c1, c2 := sessionCookie(first), sessionCookie(second)
	if c1 == nil || c2 == nil || c1.Value == c2.Value {
		t.Fatalf("session cookies %v and %v, want two different ones", c1, c2)
	}
	for _, flag := range []bool{c2.HttpOnly, c2.SameSite == http.SameSiteLaxMode, !c2.Secure} {
		if !flag {
			t.Errorf("cookie = %+v, want HttpOnly, SameSite=Lax, not Secure without COOKIE_SECURE", c2)
		}
	}
	if got := a.get(t, c, "/").doc(t).Find("#whoami").Text(); !strings.Contains(got, "approver@example.com") {
		t.Errorf("#whoami = %q, want the second login", got)
	}
	// The session the browser held before the second login is over.
	wantRedirect(t, a.withCookie(t, c1, "/"), "/login")
	if got := a.count(t, `SELECT count(*) FROM sessions`); got != 1 {
		t.Errorf("sessions = %d, want 1", got)
	}
}

// withCookie GETs path with nothing but the given session cookie, as
// someone who copied it would.
func (a *app) withCookie(t *testing.T, cookie *http.Cookie, path string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
	return do(t, a.client(t), req)
}

// TestLogout_CopiedCookieIsWorthless: logging out ends the session on the
// server, not only in the browser that logged out.
func TestLogout_CopiedCookieIsWorthless(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	r := a.post(t, c, "/login", url.Values{"email": {"customer@example.com"}, "password": {"demo"}})
	wantRedirect(t, r, "/")
	copied := sessionCookie(r)
	wantStatus(t, a.withCookie(t, copied, "/"), http.StatusOK)

	wantRedirect(t, a.post(t, c, "/logout", nil), "/login")
	wantRedirect(t, a.withCookie(t, copied, "/"), "/login")
	if got := a.count(t, `SELECT count(*) FROM sessions`); got != 0 {
		t.Errorf("sessions after logout = %d, want 0", got)
	}
}

// pendingRun is a small run of customer@example.com's that asks for a
// decision.
func (a *app) pendingRun(t *testing.T) *store.Run {
	t.Helper()
	started := a.startRun(t, "customer@example.com", 100)
	run, err := a.store.RequestApproval(context.Background(), started.ID, proposalFor(started))
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// forge sends a state-changing request as a browser would from another
// site: cookies attached, with the cross-site headers given.
func (a *app) forge(t *testing.T, c *http.Client, path string, form url.Values, hdr map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, a.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return do(t, c, req)
}

func TestCrossOrigin_ForgedPostsChangeNothing(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	customer, admin := a.signedIn(t, "customer@example.com"), a.signedIn(t, "admin@example.com")
	cust := a.user(t, "customer@example.com")
	orders, err := a.store.OrdersByCustomer(context.Background(), cust.ID)
	if err != nil {
		t.Fatal(err)
	}
	run := a.pendingRun(t)
	uid := fmt.Sprint(cust.ID)

	// snapshot is what a forged request must not change.
	snapshot := func() string {
		var s string
		if err := a.db.Get(&s, `SELECT concat_ws('|',
            (SELECT count(*) FROM runs), (SELECT count(*) FROM api_tokens), (SELECT count(*) FROM grants),
            (SELECT count(*) FROM users WHERE disabled_at IS NOT NULL), (SELECT string_agg(role, ',' ORDER BY id) FROM users),
            (SELECT count(*) FROM runs WHERE cancel_requested_at IS NOT NULL), (SELECT count(*) FROM audit_log WHERE action <> 'login'))`); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := snapshot()
	for _, hdr := range []map[string]string{
		{"Origin": "https://evil.example"},
		{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site", "HX-Request": "true"},
	} {
		for _, tc := range []struct {
			path   string
			client *http.Client
			form   url.Values
		}{
			{"/logout", customer, nil},
			{"/runs", customer, url.Values{"request_id": {"x"}, "order_id": {fmt.Sprint(orders[0].ID)}, "amount": {"1.00"}, "reason": {"forged"}}},
			{"/runs/" + run.ID.String() + "/cancel", customer, nil},
			{"/admin/users/" + uid + "/disable", admin, nil},
			{"/admin/users/" + uid + "/grants", admin, url.Values{"grant": {store.GrantRefundAccess}, "on": {"false"}}},
			{"/admin/users/" + uid + "/role", admin, url.Values{"role": {store.RoleAdmin}}},
			{"/admin/users/" + uid + "/tokens", admin, url.Values{"name": {"stolen"}}},
		} {
			t.Run(fmt.Sprint(tc.path, hdr), func(t *testing.T) {
				wantStatus(t, a.forge(t, tc.client, tc.path, tc.form, hdr), http.StatusForbidden)
			})
		}
	}
	if after := snapshot(); after != before {
		t.Errorf("forged requests changed the database: %s, was %s", after, before)
	}
	// Still signed in: the forged logout did nothing.
	wantStatus(t, a.get(t, customer, "/"), http.StatusOK)

	t.Run("htmx same-origin post is accepted", func(t *testing.T) {
		r := a.forge(t, customer, "/runs/"+run.ID.String()+"/cancel", nil,
			map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": a.srv.URL, "HX-Request": "true"})
		wantStatus(t, r, http.StatusOK)
		if got := a.count(t, `SELECT count(*) FROM runs WHERE id = $1 AND cancel_requested_at IS NOT NULL`, run.ID); got != 1 {
			t.Errorf("canceled runs = %d, want 1", got)
		}
		r = a.forge(t, admin, "/admin/users/"+uid+"/grants", url.Values{"grant": {store.GrantRefundAccess}, "on": {"false"}},
			map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": a.srv.URL, "HX-Request": "true"})
		wantRedirect(t, r, "/admin/users")
		if a.user(t, "customer@example.com").Has(store.GrantRefundAccess) {
			t.Error("the same-origin revoke did not take the grant away")
		}
	})
}

func TestAdmin_OnlyAdmins(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	target := fmt.Sprint(a.user(t, "customer2@example.com").ID)
	posts := []struct {
		path string
		form url.Values
	}{
		{"/admin/users/" + target + "/role", url.Values{"role": {store.RoleAdmin}}},
		{"/admin/users/" + target + "/grants", url.Values{"grant": {store.GrantRefundAccess}, "on": {"false"}}},
		{"/admin/users/" + target + "/disable", nil},
		{"/admin/users/" + target + "/enable", nil},
		{"/admin/users/" + target + "/tokens", url.Values{"name": {"x"}}},
		{"/admin/tokens/1/revoke", nil},
	}
	for _, tc := range []struct {
		who          string // "" is a visitor who is not signed in
		admin, audit int
	}{
		{"", http.StatusSeeOther, http.StatusSeeOther},
		{"customer@example.com", http.StatusForbidden, http.StatusForbidden},
		{"approver@example.com", http.StatusForbidden, http.StatusForbidden},
		{"support@example.com", http.StatusForbidden, http.StatusOK},
		{"admin@example.com", http.StatusOK, http.StatusOK},
	} {
		t.Run(cmpOr(tc.who, "anonymous"), func(t *testing.T) {
			c := a.client(t)
			if tc.who != "" {
				a.login(t, c, tc.who)
			}
			for path, want := range map[string]int{"/admin/users": tc.admin, "/support/audit": tc.audit} {
				r := a.get(t, c, path)
				wantStatus(t, r, want)
				if want == http.StatusSeeOther && !strings.HasPrefix(r.header.Get("Location"), "/login?next=") {
					t.Errorf("GET %s: Location = %q, want /login", path, r.header.Get("Location"))
				}
			}
			if tc.who == "admin@example.com" {
				return
			}
			for _, p := range posts {
				r := a.post(t, c, p.path, p.form)
				if r.status != tc.admin {
					t.Errorf("POST %s = %d, want %d", p.path, r.status, tc.admin)
				}
			}
		})
	}
	if got := a.count(t, `SELECT count(*) FROM audit_log WHERE action NOT IN ('login', 'login_failed')`); got != 0 {
		t.Errorf("refused admin posts left %d audit rows", got)
	}
	if u := a.user(t, "customer2@example.com"); u.Role != store.RoleCustomer || u.Disabled() || !u.Has(store.GrantRefundAccess) {
		t.Errorf("customer2 = %+v, want unchanged", u)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestAdmin_ManagesUsers(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	admin := a.signedIn(t, "admin@example.com")
	customer := a.signedIn(t, "customer@example.com")
	cust := a.user(t, "customer@example.com")
	uid := fmt.Sprint(cust.ID)
	me := fmt.Sprint(a.user(t, "admin@example.com").ID)

	page := a.get(t, admin, "/admin/users")
	wantStatus(t, page, http.StatusOK)
	row := page.doc(t).Find("#user-" + uid)
	if got := row.Find(".email").Text(); got != "customer@example.com" {
		t.Errorf("row email = %q", got)
	}
	if got := row.Find(".grant.held").AttrOr("data-grant", ""); got != store.GrantRefundAccess {
		t.Errorf("row grants = %q, want %s", got, store.GrantRefundAccess)
	}

	t.Run("revoke grant", func(t *testing.T) {
		wantRedirect(t, a.post(t, admin, "/admin/users/"+uid+"/grants", url.Values{"grant": {store.GrantRefundAccess}, "on": {"false"}}), "/admin/users")
		if a.user(t, "customer@example.com").Has(store.GrantRefundAccess) {
			t.Error("grant still held")
		}
		p := a.get(t, admin, "/admin/users")
		if got := p.doc(t).Find(".flash").Text(); !strings.Contains(got, "Took away permission to request refunds from Casey Customer (customer@example.com)") {
			t.Errorf("flash = %q", got)
		}
		wantStatus(t, a.post(t, admin, "/admin/users/"+uid+"/grants", url.Values{"grant": {"root"}, "on": {"true"}}), http.StatusUnprocessableEntity)
		wantRedirect(t, a.post(t, admin, "/admin/users/"+uid+"/grants", url.Values{"grant": {store.GrantRefundAccess}, "on": {"true"}}), "/admin/users")
		if !a.user(t, "customer@example.com").Has(store.GrantRefundAccess) {
			t.Error("grant not given back")
		}
	})
	t.Run("role", func(t *testing.T) {
		wantRedirect(t, a.post(t, admin, "/admin/users/"+uid+"/role", url.Values{"role": {store.RoleApprover}}), "/admin/users")
		if got := a.user(t, "customer@example.com").Role; got != store.RoleApprover {
			t.Errorf("role = %q, want approver", got)
		}
		wantStatus(t, a.post(t, admin, "/admin/users/"+uid+"/role", url.Values{"role": {"root"}}), http.StatusUnprocessableEntity)
		wantRedirect(t, a.post(t, admin, "/admin/users/"+uid+"/role", url.Values{"role": {store.RoleCustomer}}), "/admin/users")
		wantStatus(t, a.post(t, admin, "/admin/users/999999/role", url.Values{"role": {store.RoleCustomer}}), http.StatusNotFound)
		wantStatus(t, a.post(t, admin, "/admin/users/nope/role", url.Values{"role": {store.RoleCustomer}}), http.StatusNotFound)
	})
	t.Run("own role and own account are refused", func(t *testing.T) {
		r := a.post(t, admin, "/admin/users/"+me+"/role", url.Values{"role": {store.RoleCustomer}})
		wantStatus(t, r, http.StatusForbidden)
		if !strings.Contains(r.body, "You cannot change your own role") {
			t.Errorf("refusal does not say why:\n%s", r.body)
		}
		r = a.post(t, admin, "/admin/users/"+me+"/disable", nil)
		wantStatus(t, r, http.StatusForbidden)
		if !strings.Contains(r.body, "You cannot disable your own account") {
			t.Errorf("refusal does not say why:\n%s", r.body)
		}
		if u := a.user(t, "admin@example.com"); u.Role != store.RoleAdmin || u.Disabled() {
			t.Errorf("admin = %+v, want unchanged", u)
		}
	})
	t.Run("disabling logs the user out at their next request", func(t *testing.T) {
		wantStatus(t, a.get(t, customer, "/"), http.StatusOK)
		copied := customer.Jar.Cookies(mustURL(t, a.srv.URL))[0]
		wantRedirect(t, a.post(t, admin, "/admin/users/"+uid+"/disable", nil), "/admin/users")
		wantRedirect(t, a.get(t, customer, "/"), "/login")
		r := a.post(t, a.client(t), "/login", url.Values{"email": {"customer@example.com"}, "password": {"demo"}})
		wantStatus(t, r, http.StatusUnauthorized)
		if got := a.get(t, admin, "/admin/users").doc(t).Find("#user-" + uid + " .disabled").Text(); got != "disabled" {
			t.Errorf("status cell = %q, want disabled", got)
		}
		wantRedirect(t, a.post(t, admin, "/admin/users/"+uid+"/enable", nil), "/admin/users")
		// Enabling again does not bring the old sessions back.
		wantRedirect(t, a.withCookie(t, copied, "/"), "/login")
		a.login(t, a.client(t), "customer@example.com")
	})
}

func (a *app) bearer(t *testing.T, method, path, token string, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return do(t, http.DefaultClient, req)
}

func wantUnauthorized(t *testing.T, r response) {
	t.Helper()
	wantStatus(t, r, http.StatusUnauthorized)
	var e apiErr
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Error.Code != "unauthorized" {
		t.Errorf("body = %s, want {\"error\":{\"code\":\"unauthorized\"}}", r.body)
	}
}

func TestAPIToken(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	admin := a.signedIn(t, "admin@example.com")
	cust := a.user(t, "customer@example.com")
	token := a.createToken(t, admin, cust, "billing script")

	t.Run("shown once, stored hashed", func(t *testing.T) {
		a.checkTokenStoredHashed(t, admin, token, "billing script")
	})
	t.Run("used like a session", func(t *testing.T) {
		a.checkTokenUsedLikeSession(t, cust, token)
	})
	t.Run("same grants as the user", func(t *testing.T) {
		a.checkTokenHasUsersGrants(t, cust, token)
	})
	t.Run("bad tokens", func(t *testing.T) {
		wantUnauthorized(t, a.bearer(t, http.MethodGet, "/api/orders", token+"x", ""))
		wantUnauthorized(t, a.bearer(t, http.MethodGet, "/api/orders", "rfd_nope", ""))
		req, _ := http.NewRequest(http.MethodGet, a.srv.URL+"/api/orders", nil)
		req.Header.Set("Authorization", "Basic "+token)
		wantUnauthorized(t, do(t, http.DefaultClient, req))
		wantUnauthorized(t, a.bearer(t, http.MethodGet, "/api/orders", "", ""))
	})
	t.Run("a bad token is not rescued by a session", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, a.srv.URL+"/api/orders", nil)
		req.Header.Set("Authorization", "Bearer rfd_nope")
		wantUnauthorized(t, do(t, a.signedIn(t, "customer@example.com"), req))
	})
	t.Run("disabled user", func(t *testing.T) {
		wantRedirect(t, a.post(t, admin, fmt.Sprintf("/admin/users/%d/disable", cust.ID), nil), "/admin/users")
		wantUnauthorized(t, a.bearer(t, http.MethodGet, "/api/orders", token, ""))
		wantRedirect(t, a.post(t, admin, fmt.Sprintf("/admin/users/%d/enable", cust.ID), nil), "/admin/users")
		wantStatus(t, a.bearer(t, http.MethodGet, "/api/orders", token, ""), http.StatusOK)
	})
	t.Run("revoked", func(t *testing.T) {
		a.checkTokenRevoked(t, admin, token)
	})
}

// createToken has admin create a token named name for user, and returns it
// as the page shows it, once and not cached.
func (a *app) createToken(t *testing.T, admin *http.Client, user *store.User, name string) string {
	t.Helper()
	wantRedirect(t, a.post(t, admin, fmt.Sprintf("/admin/users/%d/tokens", user.ID), url.Values{"name": {name}}), "/admin/tokens/new")
	created := a.get(t, admin, "/admin/tokens/new")
	wantStatus(t, created, http.StatusOK)
	if cc := created.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
	token := strings.TrimSpace(created.doc(t).Find("#new-token").Text())
	if !strings.HasPrefix(token, store.TokenPrefix) {
		t.Fatalf("#new-token = %q, want a token", token)
	}
	return token
}

// checkTokenStoredHashed checks that the users page does not show token
// again and that the database holds only its SHA-256.
func (a *app) checkTokenStoredHashed(t *testing.T, admin *http.Client, token, name string) {
	t.Helper()
	if strings.Contains(a.get(t, admin, "/admin/users").body, token) {
		t.Error("the users page shows the token again")
	}
	var rows []string
	if err := a.db.Select(&rows, `SELECT row_to_json(t)::text FROM api_tokens t`); err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimPrefix(token, store.TokenPrefix)
	for _, r := range rows {
		if strings.Contains(r, secret) || strings.Contains(r, fmt.Sprintf("%x", token)) {
			t.Errorf("token stored in clear: %s", r)
		}
	}
	if got := a.count(t, `SELECT count(*) FROM api_tokens WHERE token_hash = sha256(convert_to($1, 'UTF8')) AND name = $2`, token, name); got != 1 {
		t.Errorf("rows with the token's SHA-256 = %d, want 1", got)
	}
}

// checkTokenUsedLikeSession reads user's orders and starts a run with token
// alone (no cookie, so no Origin needed), and checks the token's use is noted.
func (a *app) checkTokenUsedLikeSession(t *testing.T, user *store.User, token string) {
	t.Helper()
	r := a.bearer(t, http.MethodGet, "/api/orders", token, "")
	wantStatus(t, r, http.StatusOK)
	if !strings.Contains(r.body, `"currency":"EUR"`) {
		t.Errorf("orders = %s, want the customer's EUR orders", r.body)
	}
	orders, err := a.store.OrdersByCustomer(context.Background(), user.ID)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/api/runs",
		strings.NewReader(fmt.Sprintf(`{"order_id":%d,"amount":100,"reason":"by token"}`, orders[0].ID)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", uuid.NewString())
	wantStatus(t, do(t, http.DefaultClient, req), http.StatusCreated)
	if got := a.count(t, `SELECT count(*) FROM api_tokens WHERE last_used_at IS NOT NULL`); got != 1 {
		t.Errorf("tokens with a last use = %d, want 1", got)
	}
}

// checkTokenHasUsersGrants takes user's refund grant away and checks that
// a start with token is then forbidden.
func (a *app) checkTokenHasUsersGrants(t *testing.T, user *store.User, token string) {
	t.Helper()
	if err := a.store.SetGrant(context.Background(), user.ID, store.GrantRefundAccess, false); err != nil {
		t.Fatal(err)
	}
	defer a.store.SetGrant(context.Background(), user.ID, store.GrantRefundAccess, true)
	req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/api/runs", strings.NewReader(`{"order_id":1,"amount":100,"reason":"x"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", uuid.NewString())
	wantStatus(t, do(t, http.DefaultClient, req), http.StatusForbidden)
}

// checkTokenRevoked has admin revoke the app's only token and checks that
// it no longer works, that the users page says so, and that revoking an
// unknown token is a 404.
func (a *app) checkTokenRevoked(t *testing.T, admin *http.Client, token string) {
	t.Helper()
	var id int64
	if err := a.db.Get(&id, `SELECT id FROM api_tokens`); err != nil {
		t.Fatal(err)
	}
	wantRedirect(t, a.post(t, admin, fmt.Sprintf("/admin/tokens/%d/revoke", id), nil), "/admin/users")
	wantUnauthorized(t, a.bearer(t, http.MethodGet, "/api/orders", token, ""))
	if got := a.get(t, admin, "/admin/users").doc(t).Find(fmt.Sprintf("#token-%d .revoked", id)).Length(); got != 1 {
		t.Error("the users page does not show the token as revoked")
	}
	wantStatus(t, a.post(t, admin, "/admin/tokens/999999/revoke", nil), http.StatusNotFound)
}

// TestAudit_ThroughTheWeb: the actor and their address are recorded for
// logins, grant changes, approvals and cancels made through the web, and
// support can read them.
func TestAudit_ThroughTheWeb(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	wantStatus(t, a.post(t, a.client(t), "/login", url.Values{"email": {"customer@example.com"}, "password": {"nope"}}), http.StatusUnauthorized)
	customer := a.signedIn(t, "customer@example.com")
	admin := a.signedIn(t, "admin@example.com")
	approver := a.signedIn(t, "approver@example.com")
	cust := a.user(t, "customer@example.com")

	wantRedirect(t, a.post(t, admin, fmt.Sprintf("/admin/users/%d/grants", cust.ID), url.Values{"grant": {store.GrantRefundAccess}, "on": {"false"}}), "/admin/users")
	approved, canceled := a.pendingRun(t), a.pendingRun(t)
	wantRedirect(t, a.post(t, approver, "/runs/"+approved.ID.String()+"/approve", nil), "/runs/"+approved.ID.String())
	if r := a.post(t, customer, "/runs/"+canceled.ID.String()+"/cancel", nil); r.status != http.StatusSeeOther {
		t.Fatalf("cancel = %d, want 303:\n%s", r.status, r.body)
	}

	for _, tc := range []struct{ action, who, subject string }{
		{store.AuditLoginFailed, "", store.UserSubject(cust.ID)},
		{store.AuditLogin, "customer@example.com", store.UserSubject(cust.ID)},
		{store.AuditGrantRemoved, "admin@example.com", store.UserSubject(cust.ID)},
		{store.AuditRunApproved, "approver@example.com", store.RunSubject(approved.ID)},
		{store.AuditRunCancelRequested, "customer@example.com", store.RunSubject(canceled.ID)},
	} {
		want := int64(0)
		if tc.who != "" {
			want = a.user(t, tc.who).ID
		}
		if got := a.count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND subject = $2
            AND coalesce(actor_id, 0) = $3 AND actor_ip = '127.0.0.1' AND at > now() - interval '1 minute'`,
			tc.action, tc.subject, want); got != 1 {
			t.Errorf("audit rows for %s on %s by %q from 127.0.0.1 = %d, want 1", tc.action, tc.subject, tc.who, got)
		}
	}

	support := a.signedIn(t, "support@example.com")
	page := a.get(t, support, "/support/audit?action="+store.AuditRunApproved)
	wantStatus(t, page, http.StatusOK)
	rows := page.doc(t).Find("#audit > li")
	if rows.Length() != 1 || rows.Find(".actor").Text() != "Avery Approver (approver)" || rows.Find(".ip").Text() != "127.0.0.1" {
		t.Errorf("filtered audit page rows = %d (%q), want the one approval by approver@example.com", rows.Length(), rows.Text())
	}
	all := a.get(t, support, "/support/audit").doc(t).Find("#audit > li .action")
	if all.Length() < 6 || all.First().Text() != store.AuditLogin {
		// support's own login is the newest entry
		t.Errorf("audit page actions = %q, want newest first starting with support's login", all.Text())
	}
}

// TestRunPage_StatusOnlyCustomerToldWhyAndMayCancel: a customer whose
// refund access was withdrawn reads why they see the status only, and
// may still cancel their own unfinished run on the page, as the API lets
// them (it moves no money). They used to lose the button, with no reason.
func TestRunPage_StatusOnlyCustomerToldWhyAndMayCancel(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.awaitingApproval(t, "customer@example.com")
	if err := a.store.SetGrant(context.Background(), run.OwnerID, store.GrantRefundAccess, false); err != nil {
		t.Fatal(err)
	}
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	doc := a.get(t, c, "/runs/"+run.ID.String()).doc(t)
	if got := doc.Find("#status-only").Text(); !strings.Contains(got, "withdrawn") {
		t.Errorf("#status-only = %q, want it to say access was withdrawn", got)
	}
	if doc.Find("#cancel").Length() != 1 {
		t.Fatal("the status-only owner is not offered Cancel")
	}
	r := a.post(t, c, "/runs/"+run.ID.String()+"/cancel", url.Values{})
	if r.status != http.StatusSeeOther && r.status != http.StatusOK {
		t.Fatalf("cancel = %d, want it taken", r.status)
	}
	if n := a.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'cancel.requested'`, run.ID); n != 1 {
		t.Errorf("cancels recorded = %d, want 1", n)
	}
}
