package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/static"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
	"github.com/refundd/refundd/views"
)

func TestMain(m *testing.M) {
	code := storetest.Main(m)
	browsertest.Close()
	os.Exit(code)
}

const testSessionKey = "test-session-key-0123456789abcdef"

// app is one test's server over its own seeded database.
type app struct {
	srv   *httptest.Server
	conns *connTracker // every connection the server accepted and has not closed
	e     *echo.Echo
	store *store.Store
	db    *sqlx.DB      // the test's own pool, for rows read or changed directly
	sim   *payments.Sim // with withExecutor
}

// appOption is one change to the server newApp builds.
type appOption func(*appSetup)

type appSetup struct {
	storeOpts []store.Option
	listener  bool
	executor  *executorSetup
	wrap      func(http.Handler) http.Handler
	server    func(*httptest.Server)
}

type executorSetup struct {
	narrator agent.Narrator
	faults   payments.Faults
}

// withStoreOptions opens the server's store with opts.
func withStoreOptions(opts ...store.Option) appOption {
	return func(s *appSetup) { s.storeOpts = opts }
}

// withListener gives the server a real Listener, so streams wake on NOTIFY
// instead of polling.
func withListener() appOption { return func(s *appSetup) { s.listener = true } }

// withExecutor runs the real executor at test speed, narrating with
// narrator, against a simulated provider with faults; it shares the
// server's Listener.
func withExecutor(narrator agent.Narrator, faults payments.Faults) appOption {
	return func(s *appSetup) { s.listener, s.executor = true, &executorSetup{narrator, faults} }
}

// wrapHandler puts wrap in front of the handlers, to watch or refuse
// requests before they reach them.
func wrapHandler(wrap func(http.Handler) http.Handler) appOption {
	return func(s *appSetup) { s.wrap = wrap }
}

// configureServer changes the test server before it starts: its network
// listener, its connection hooks.
func configureServer(f func(*httptest.Server)) appOption {
	return func(s *appSetup) { s.server = f }
}

// newApp builds the handlers with cfg (and the test session key) over a
// fresh seeded database and serves them until the test ends.
func newApp(t testing.TB, cfg handlers.Config, opts ...appOption) *app {
	t.Helper()
	var setup appSetup
	for _, o := range opts {
		o(&setup)
	}
	ctx := context.Background()
	var st *store.Store
	if setup.storeOpts == nil {
		st = storetest.MustOpen(t)
	} else {
		var err error
		if st, err = store.Open(ctx, storetest.URL(t), append(setup.storeOpts, store.WithAnswers(views.Answers{}))...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
	}
	if err := devdb.SeedDemo(ctx, st); err != nil {
		t.Fatal(err)
	}
	a := &app{store: st, db: storetest.DB(t, st)}
	log := slog.New(slog.DiscardHandler)
	if setup.listener {
		l := store.NewListener(st.URL(), log)
		if err := l.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Stop)
		st.WakeLocal(l) // as the process wires it
		cfg.Listener = l
	}
	if x := setup.executor; x != nil {
		// The test releases a held answer itself: a refund it holds stays
		// submitting until then, however loaded the machine, not
		// reconciling once the provider's client (10 s) or the executor
		// (5 s) gives up waiting.
		wait, ac := 10*time.Second, agent.Config{ChunkEvery: time.Millisecond}
		if x.faults.HoldAfterCommit {
			wait, ac.ProviderTimeout = time.Minute, time.Minute
		}
		p := testkit.StartProvider(t, a.db, x.faults, wait)
		testkit.StartExecutor(t, st, cfg.Listener, p.Client, x.narrator, ac)
		a.sim = p.Sim
	}
	cfg.SessionKey = testSessionKey
	e, err := handlers.New(cfg, st, log)
	if err != nil {
		t.Fatal(err)
	}
	a.e = e
	var h http.Handler = e
	if setup.wrap != nil {
		h = setup.wrap(e)
	}
	h = checkOpenAPI(t, h)
	a.srv = httptest.NewUnstartedServer(h)
	if setup.server != nil {
		setup.server(a.srv)
	}
	a.conns = &connTracker{Listener: a.srv.Listener, open: map[*trackedConn]struct{}{}}
	a.srv.Listener = a.conns
	a.srv.Start()
	t.Cleanup(a.srv.Close)
	// Runs before srv.Close (cleanups run last first): end open streams,
	// as a graceful shutdown does, so Close need not wait for them.
	t.Cleanup(func() { shutdown(t, a.e) })
	return a
}

// shutdown runs the handlers' shutdown hooks, as serve's graceful shutdown
// does.
func shutdown(t testing.TB, e *echo.Echo) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Server.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// client is a browser-like client with cookies that does not follow
// redirects, so tests see them.
func (a *app) client(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type response struct {
	status int
	header http.Header
	body   string
}

func (r response) doc(t *testing.T) *goquery.Document {
	t.Helper()
	d, err := goquery.NewDocumentFromReader(strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func do(t testing.TB, c *http.Client, req *http.Request) response {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: string(b)}
}

func (a *app) get(t testing.TB, c *http.Client, path string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, c, req)
}

func (a *app) post(t testing.TB, c *http.Client, path string, form url.Values) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, a.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return do(t, c, req)
}

func (a *app) login(t testing.TB, c *http.Client, email string) {
	t.Helper()
	r := a.post(t, c, "/login", url.Values{"email": {email}, "password": {devdb.DemoPassword}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("login as %s: status %d, want 303", email, r.status)
	}
}

func wantStatus(t testing.TB, r response, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status = %d, want %d; body:\n%s", r.status, want, r.body)
	}
}

func wantRedirect(t testing.TB, r response, to string) {
	t.Helper()
	wantStatus(t, r, http.StatusSeeOther)
	if got := r.header.Get("Location"); got != to {
		t.Errorf("Location = %q, want %q", got, to)
	}
}

func sessionCookie(r response) *http.Cookie {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if strings.Contains(c.Name, "refundd_session") {
			return c
		}
	}
	return nil
}

func TestLogin(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)

	r := a.post(t, c, "/login", url.Values{"email": {"customer@example.com"}, "password": {"demo"}})
	wantRedirect(t, r, "/")
	cookie := sessionCookie(r)
	if cookie == nil {
		t.Fatal("no session cookie after login")
	}
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Secure || cookie.Path != "/" {
		t.Errorf("cookie = %+v, want HttpOnly, SameSite=Lax, not Secure, Path=/", cookie)
	}

	home := a.get(t, c, "/")
	wantStatus(t, home, http.StatusOK)
	if got := home.doc(t).Find("#whoami").Text(); !strings.Contains(got, "customer@example.com") {
		t.Errorf("#whoami = %q, want the user's email", got)
	}

	t.Run("login page sends a signed-in user home", func(t *testing.T) {
		wantRedirect(t, a.get(t, c, "/login"), "/")
	})
}

func TestLogin_SecureCookie(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{CookieSecure: true})
	r := a.post(t, a.client(t), "/login", url.Values{"email": {"customer@example.com"}, "password": {"demo"}})
	wantRedirect(t, r, "/")
	cookie := sessionCookie(r)
	if cookie == nil || !cookie.Secure || cookie.Name != "__Host-refundd_session" {
		t.Errorf("cookie = %+v, want a Secure __Host- cookie", cookie)
	}
}

func TestLogin_Refused(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	for _, tc := range []struct {
		name, email, password string
		status                int
		says                  string
	}{
		{"wrong password", "customer@example.com", "nope", http.StatusUnauthorized, "wrong email or password"},
		{"unknown email", "nobody@example.com", "demo", http.StatusUnauthorized, "wrong email or password"},
		{"empty password", "customer@example.com", "", http.StatusUnprocessableEntity, "Enter your email and password"},
		{"empty email", "  ", "demo", http.StatusUnprocessableEntity, "Enter your email and password"},
		{"too long", strings.Repeat("a", 300) + "@example.com", "demo", http.StatusUnprocessableEntity, "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := a.client(t)
			r := a.post(t, c, "/login", url.Values{"email": {tc.email}, "password": {tc.password}})
			wantStatus(t, r, tc.status)
			doc := r.doc(t)
			if got := doc.Find("#login-error").Text(); !strings.Contains(got, tc.says) {
				t.Errorf("#login-error = %q, want it to say %q", got, tc.says)
			}
			if got, _ := doc.Find(`input[name="email"]`).Attr("value"); got != strings.TrimSpace(tc.email) {
				t.Errorf("email field = %q, want the typed %q", got, tc.email)
			}
			if sessionCookie(r) != nil {
				t.Error("a refused login set a session cookie")
			}
			wantRedirect(t, a.get(t, c, "/"), "/login")
		})
	}
}

func TestLogin_DemoLoginsOnlyInDev(t *testing.T) {
	t.Parallel()
	for _, demo := range []bool{false, true} {
		a := newApp(t, handlers.Config{DemoLogins: demo})
		r := a.get(t, a.client(t), "/login")
		wantStatus(t, r, http.StatusOK)
		if got := strings.Contains(r.body, "approver@example.com"); got != demo {
			t.Errorf("DemoLogins=%v: page lists demo logins = %v", demo, got)
		}
	}
}

func TestLogout(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")

	r := a.post(t, c, "/logout", nil)
	wantRedirect(t, r, "/login")
	if cookie := sessionCookie(r); cookie == nil || cookie.MaxAge >= 0 {
		t.Errorf("logout cookie = %+v, want one that deletes the session", cookie)
	}
	wantRedirect(t, a.get(t, c, "/"), "/login")
}

func TestHome_RequiresLogin(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	wantRedirect(t, a.get(t, a.client(t), "/"), "/login")
}

func TestHome_ByRole(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	for _, tc := range []struct {
		email, role string
		orders      []string // amounts the page must show
		section     string   // text only this role sees
	}{
		{"customer@example.com", store.RoleCustomer, []string{"€129.99", "€89.50", "€15.99"}, "Your orders"},
		{"customer2@example.com", store.RoleCustomer, []string{"$349.00", "$24.50"}, "Your orders"},
		{"approver@example.com", store.RoleApprover, nil, "Approvals"},
		{"support@example.com", store.RoleSupport, nil, "Search runs"},
		{"admin@example.com", store.RoleAdmin, nil, "Manage users"},
	} {
		t.Run(tc.email, func(t *testing.T) {
			t.Parallel()
			c := a.client(t)
			a.login(t, c, tc.email)
			r := a.get(t, c, "/")
			wantStatus(t, r, http.StatusOK)
			doc := r.doc(t)
			who := doc.Find("#whoami").Text()
			if !strings.Contains(who, tc.email) || !strings.Contains(who, tc.role) {
				t.Errorf("#whoami = %q, want email %q and role %q", who, tc.email, tc.role)
			}
			if !strings.Contains(doc.Find("main").Text(), tc.section) {
				t.Errorf("home page lacks %q", tc.section)
			}
			amounts := doc.Find("#orders td.amount").Map(func(_ int, s *goquery.Selection) string { return s.Text() })
			for _, want := range tc.orders {
				if !strings.Contains(strings.Join(amounts, " "), want) {
					t.Errorf("order amounts = %v, want %s among them", amounts, want)
				}
			}
			if len(tc.orders) == 0 && doc.Find("#orders").Length() > 0 {
				t.Errorf("a %s sees an orders list", tc.role)
			}
		})
	}
}

// TestSession_DisabledUserIsLoggedOut: the user is reloaded on every
// request, so disabling an account ends its sessions at once.
func TestSession_DisabledUserIsLoggedOut(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	wantStatus(t, a.get(t, c, "/"), http.StatusOK)

	if _, err := a.db.Exec(`UPDATE users SET disabled_at = now() WHERE email = 'customer@example.com'`); err != nil {
		t.Fatal(err)
	}
	r := a.get(t, c, "/")
	wantRedirect(t, r, "/login")
	if cookie := sessionCookie(r); cookie == nil || cookie.MaxAge >= 0 {
		t.Errorf("cookie = %+v, want the session deleted", cookie)
	}
}

func TestSession_TamperedCookieIsIgnored(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	req, _ := http.NewRequest(http.MethodGet, a.srv.URL+"/", nil)
	req.AddCookie(&http.Cookie{Name: "refundd_session", Value: "MTcxfGZvcmdlZHxzaWduYXR1cmU="})
	wantRedirect(t, do(t, a.client(t), req), "/login")
}

func TestCrossOriginPostIsRefused(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/login",
		strings.NewReader(url.Values{"email": {"customer@example.com"}, "password": {"demo"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	r := do(t, a.client(t), req)
	wantStatus(t, r, http.StatusForbidden)
	if sessionCookie(r) != nil {
		t.Error("a cross-site login set a session cookie")
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	r := a.get(t, a.client(t), "/healthz")
	wantStatus(t, r, http.StatusOK)
	if r.body != "ok" {
		t.Errorf("body = %q, want ok", r.body)
	}
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	wantStatus(t, a.get(t, a.client(t), "/readyz"), http.StatusOK)

	t.Run("database gone", func(t *testing.T) {
		a.store.Close()
		// The check before answers probes for up to a second.
		testkit.WaitUntil(t, "/readyz to say 503", 5*time.Second, func() bool {
			return a.get(t, a.client(t), "/readyz").status == http.StatusServiceUnavailable
		})
	})
}

func TestErrors_NotFound(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)

	page := a.get(t, c, "/no/such/page")
	wantStatus(t, page, http.StatusNotFound)
	if ct := page.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("Content-Type = %q, want HTML", ct)
	}
	if got := page.doc(t).Find("h1").Text(); got != "Not found" {
		t.Errorf("h1 = %q, want Not found", got)
	}

	api := a.get(t, c, "/api/no/such/thing")
	wantStatus(t, api, http.StatusNotFound)
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(api.body), &body); err != nil {
		t.Fatalf("API error is not JSON: %v\n%s", err, api.body)
	}
	if body.Error.Code != store.CodeNotFound || body.Error.Message == "" {
		t.Errorf("API error = %+v, want code %q and a message", body.Error, store.CodeNotFound)
	}

	wantStatus(t, a.post(t, c, "/healthz", nil), http.StatusMethodNotAllowed)
}

func TestStatic(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)

	r := a.get(t, c, static.URL("app.css"))
	wantStatus(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/css") {
		t.Errorf("Content-Type = %q, want text/css", ct)
	}
	if cc := r.header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
		t.Errorf("versioned Cache-Control = %q, want immutable", cc)
	}
	if cc := a.get(t, c, "/static/app.css").header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("unversioned Cache-Control = %q, want no-cache", cc)
	}
	for _, hidden := range []string{"/static/static.go", "/static/", "/static/../main.go"} {
		if got := a.get(t, c, hidden).status; got != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", hidden, got)
		}
	}
}

// connTracker knows every connection the server accepted until it is
// closed, whoever closes it: the HTTP server, or a stream that detached
// its connection from the server (which httptest.Server no longer sees).
type connTracker struct {
	net.Listener
	mu      sync.Mutex
	open    map[*trackedConn]struct{}
	onClose func(net.Conn)
}

type trackedConn struct {
	net.Conn
	l    *connTracker
	once sync.Once
}

func (l *connTracker) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	l.open[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.open, c)
		f := c.l.onClose
		c.l.mu.Unlock()
		if f != nil {
			f(c)
		}
	})
	return err
}

// closeAll drops every open connection, streams included, as a network
// failure would (httptest's CloseClientConnections misses detached ones).
// closedAddrs reports the remote address of each connection closed from
// now on (the first 256 not yet taken; later ones are dropped), for
// waitConnClosed.
func (l *connTracker) closedAddrs() <-chan string {
	closed := make(chan string, 256)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onClose = func(c net.Conn) {
		select {
		case closed <- c.RemoteAddr().String():
		default:
		}
	}
	return closed
}

func (l *connTracker) closeAll() {
	l.mu.Lock()
	conns := make([]*trackedConn, 0, len(l.open))
	for c := range l.open {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// count is the number of connections open now.
func (l *connTracker) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

// countOpen serves a request with next and counts it in n for as long as
// it is open: until the handler returns or, for a stream that detached its
// connection (Hijack), until that connection is closed.
func countOpen(n *atomic.Int64, next http.Handler, w http.ResponseWriter, r *http.Request) {
	n.Add(1)
	hw := &hijackWatch{ResponseWriter: w, onClose: func() { n.Add(-1) }}
	next.ServeHTTP(hw, r)
	if !hw.hijacked {
		n.Add(-1)
	}
}

type hijackWatch struct {
	http.ResponseWriter
	onClose  func()
	hijacked bool
}

func (w *hijackWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *hijackWatch) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.hijacked = true
	return &closeHook{Conn: c, f: w.onClose}, brw, nil
}

type closeHook struct {
	net.Conn
	once sync.Once
	f    func()
}

func (c *closeHook) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.f)
	return err
}
