package handlers_test

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
	"github.com/refundd/refundd/views"
)

// stallProxy stands between a Store and PostgreSQL. It forwards until
// stall is called; from then on it forwards nothing, in either direction,
// and accepts new connections without answering them: a database that
// stopped (SIGSTOP, a partition) while the kernel still takes connections.
// lib/pq's cancel requests go through it too, and stall as well.
type stallProxy struct {
	ln      net.Listener
	dial    func() (net.Conn, error)
	stalled chan struct{} // closed by stall
	sent    atomic.Int64  // bytes forwarded to the database
	closed  chan struct{} // closed by close
	once    sync.Once
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

// newStallProxy proxies the database at databaseURL (a unix socket or a
// TCP address) and returns the URL that goes through the proxy.
func newStallProxy(t *testing.T, databaseURL string) (*stallProxy, string) {
	t.Helper()
	u, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	host, port := cmp.Or(q.Get("host"), u.Hostname()), cmp.Or(q.Get("port"), u.Port(), "5432")
	network, addr := "tcp", net.JoinHostPort(host, port)
	if strings.HasPrefix(host, "/") {
		network, addr = "unix", filepath.Join(host, ".s.PGSQL."+port)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, stalled: make(chan struct{}), closed: make(chan struct{}),
		dial: func() (net.Conn, error) { return net.Dial(network, addr) }}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	q.Set("host", "127.0.0.1")
	q.Set("port", fmt.Sprint(ln.Addr().(*net.TCPAddr).Port))
	u.RawQuery = q.Encode()
	return p, u.String()
}

func (p *stallProxy) stall() { p.once.Do(func() { close(p.stalled) }) }

// close lets go of everything: every connection is closed, so a query
// stuck on one fails at once.
func (p *stallProxy) close() {
	p.stall()
	select {
	case <-p.closed:
		return
	default:
	}
	close(p.closed)
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *stallProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
		c.Close()
		return false
	default:
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *stallProxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			return
		}
		select {
		case <-p.stalled:
			continue // accepted, never answered
		default:
		}
		server, err := p.dial()
		if err != nil || !p.track(server) {
			client.Close()
			continue
		}
		p.wg.Add(2)
		go p.pipe(server, client, &p.sent)
		go p.pipe(client, server, nil)
	}
}

// pipe copies from src to dst until stalled; what arrives after that is
// held back until the proxy closes. sent, if not nil, counts the bytes.
func (p *stallProxy) pipe(dst, src net.Conn, sent *atomic.Int64) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			select {
			case <-p.stalled:
				<-p.closed
				return
			default:
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if sent != nil {
				sent.Add(int64(n))
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// stalledApp is a server whose Store reaches a fresh, seeded database
// through a stallProxy. login is a second server over the same Store with
// the default deadline, for signing in: hashing a password under a loaded
// test run can outlast a deadline short enough to test with.
type stalledApp struct {
	srv   *httptest.Server
	login *httptest.Server
	proxy *stallProxy
	store *store.Store
}

func newStalledApp(t *testing.T, cfg handlers.Config) *stalledApp {
	t.Helper()
	ctx := context.Background()
	direct := storetest.MustOpen(t)
	if err := devdb.SeedDemo(ctx, direct); err != nil {
		t.Fatal(err)
	}
	proxy, proxied := newStallProxy(t, direct.URL())
	st, err := store.Open(ctx, proxied, store.WithAnswers(views.Answers{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := &stalledApp{proxy: proxy, store: st}
	for _, srv := range []struct {
		to  **httptest.Server
		cfg handlers.Config
	}{{&s.srv, cfg}, {&s.login, handlers.Config{}}} {
		srv.cfg.SessionKey = testSessionKey
		e, err := handlers.New(srv.cfg, st, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		*srv.to = httptest.NewServer(checkOpenAPI(t, e))
		t.Cleanup((*srv.to).Close)
	}
	// Cleanups run last first: the proxy lets go of stuck queries before
	// the servers close, which waits for the requests that hold them.
	t.Cleanup(proxy.close)
	return s
}

// timedGet is a GET that gives up after limit, so a hanging answer fails
// the test instead of stalling it.
func (s *stalledApp) timedGet(t *testing.T, c *http.Client, path string, limit time.Duration, hdr map[string]string) (response, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	start := time.Now()
	res, err := c.Do(req)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GET %s: no answer within %s", path, limit)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: string(b)}, time.Since(start)
}

// TestReadyz_StalledDatabase: with PostgreSQL stalled, /readyz says 503
// within its 2 s timeout (it took 10 s, or for ever), and so does every
// later check, which finds the pool's connection still stuck.
func TestReadyz_StalledDatabase(t *testing.T) {
	t.Parallel()
	s := newStalledApp(t, handlers.Config{})
	c := &http.Client{}
	r, _ := s.timedGet(t, c, "/readyz", 10*time.Second, nil)
	wantStatus(t, r, http.StatusOK)

	s.proxy.stall()
	// The check before the stall answers for up to a second; the checks
	// after it meet the stalled database. A probe that ran one waited for
	// it; the others got its answer at once.
	checks := 0
	testkit.WaitUntil(t, "two checks of the stalled database", 20*time.Second, func() bool {
		r, took := s.timedGet(t, c, "/readyz", 5*time.Second, nil)
		if took > 3*time.Second { // 2 s, and slack for a loaded machine
			t.Fatalf("/readyz answered after %s, want within its 2s timeout", took)
		}
		if took < time.Second { // answered from a check already made
			return false
		}
		checks++
		wantStatus(t, r, http.StatusServiceUnavailable)
		return checks == 2
	})
}

// TestReadyz_FloodCostsOneCheckASecond: probes from many clients at once
// (a load balancer's, during a reconnect wave) share one readiness check
// a second instead of sending the database a query each.
func TestReadyz_FloodCostsOneCheckASecond(t *testing.T) {
	t.Parallel()
	s := newStalledApp(t, handlers.Config{})
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	r, _ := s.timedGet(t, c, "/readyz", 10*time.Second, nil)
	wantStatus(t, r, http.StatusOK)
	// What one check sends the database, on a connection already open:
	// the first probe that sends anything ran a check.
	var perCheck int64
	testkit.WaitUntil(t, "a second check", 10*time.Second, func() bool {
		before := s.proxy.sent.Load()
		r, _ := s.timedGet(t, c, "/readyz", 10*time.Second, nil)
		wantStatus(t, r, http.StatusOK)
		perCheck = s.proxy.sent.Load() - before
		return perCheck > 0
	})

	const flood = 2 * time.Second
	before, start := s.proxy.sent.Load(), time.Now()
	var probes atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for time.Since(start) < flood {
				req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/readyz", nil)
				res, err := c.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					t.Errorf("/readyz = %d during the flood, want 200", res.StatusCode)
					return
				}
				probes.Add(1)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	// A check starts only once the last one's answer is a second old.
	maxChecks := int64(took/time.Second) + 1
	if got, most := s.proxy.sent.Load()-before, perCheck*maxChecks; got > most {
		t.Errorf("%d probes in %s sent the database %d bytes, want at most %d (%d checks of %d bytes)",
			probes.Load(), took.Round(time.Millisecond), got, most, maxChecks, perCheck)
	}
	if probes.Load() < 100 {
		t.Logf("only %d probes in %s: a loaded machine", probes.Load(), took)
	}
}

// TestDeadline_StalledDatabase: with PostgreSQL stalled mid-session, a
// page and an API call answer 503 in words (HTML, or the API's JSON error)
// with Retry-After once the request deadline passes, instead of hanging.
func TestDeadline_StalledDatabase(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	s := newStalledApp(t, handlers.Config{RequestTimeout: timeout})
	// The cookie is the test server's: both listen on 127.0.0.1.
	c := (&app{srv: s.login}).client(t)
	(&app{srv: s.login}).login(t, c, "customer@example.com")
	// Polled: on a loaded test machine one call may well outlast 300 ms.
	testkit.WaitUntil(t, "the home page", 10*time.Second, func() bool {
		r, _ := s.timedGet(t, c, "/", 10*time.Second, nil)
		return r.status == http.StatusOK
	})

	s.proxy.stall()
	t.Run("page", func(t *testing.T) {
		r, took := s.timedGet(t, c, "/", 5*time.Second, nil)
		wantStatus(t, r, http.StatusServiceUnavailable)
		if took > timeout+time.Second {
			t.Errorf("answered after %s, want about %s", took, timeout)
		}
		if got := r.header.Get("Retry-After"); got == "" {
			t.Error("no Retry-After")
		}
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("Content-Type = %q, want a page", ct)
		}
		doc := r.doc(t)
		if got := doc.Find("h1").Text(); got != "Unavailable" {
			t.Errorf("h1 = %q, want Unavailable", got)
		}
		if got := doc.Find("main").Text(); !strings.Contains(got, "Try again in a few seconds") {
			t.Errorf("page says %q, want it to say to try again", got)
		}
	})
	t.Run("API", func(t *testing.T) {
		r, took := s.timedGet(t, c, "/api/orders", 5*time.Second, nil)
		wantStatus(t, r, http.StatusServiceUnavailable)
		if took > timeout+time.Second {
			t.Errorf("answered after %s, want about %s", took, timeout)
		}
		if got := r.header.Get("Retry-After"); got == "" {
			t.Error("no Retry-After")
		}
		var body struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(r.body), &body); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, r.body)
		}
		if body.Error.Code != "unavailable" || body.Error.Message == "" {
			t.Errorf("error = %+v, want code unavailable and a message", body.Error)
		}
	})
	t.Run("health stays up", func(t *testing.T) {
		r, _ := s.timedGet(t, c, "/healthz", 5*time.Second, nil)
		wantStatus(t, r, http.StatusOK)
	})
}

// TestDeadline_LockedTable: PostgreSQL answers, but the query waits on a
// lock past the request deadline. The API call answers 503 unavailable on
// time (lib/pq's cancel is answered here, and the server's "canceling
// statement" error is reported as the deadline it is), and once the lock is
// gone the same pool serves again.
func TestDeadline_LockedTable(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	a := newApp(t, handlers.Config{RequestTimeout: timeout})
	_, token, err := a.store.CreateToken(context.Background(), a.user(t, "customer@example.com").ID, "deadline")
	if err != nil {
		t.Fatal(err)
	}
	bearer := map[string]string{"Authorization": "Bearer " + token}
	s := &stalledApp{srv: a.srv}
	c := &http.Client{}

	tx := lockTable(t, a.db, "orders")
	for i := range 3 {
		r, took := s.timedGet(t, c, "/api/orders", 5*time.Second, bearer)
		wantStatus(t, r, http.StatusServiceUnavailable)
		if !strings.Contains(r.body, `"code":"unavailable"`) || r.header.Get("Retry-After") == "" {
			t.Errorf("call %d: %s (Retry-After %q), want the unavailable error and a Retry-After", i+1, r.body, r.header.Get("Retry-After"))
		}
		if took > timeout+time.Second {
			t.Errorf("call %d answered after %s, want about %s", i+1, took, timeout)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// Polled: on a loaded test machine one call may well outlast 300 ms.
	testkit.WaitUntil(t, "the API to serve again", 10*time.Second, func() bool {
		r, _ := s.timedGet(t, c, "/api/orders", 10*time.Second, bearer)
		return r.status == http.StatusOK
	})
}

// TestUnavailable_DatabaseDown: with PostgreSQL gone (connections refused
// and cut), pages and the API say 503 with Retry-After, not 500: nothing
// was decided and the same request may be sent again.
func TestUnavailable_DatabaseDown(t *testing.T) {
	t.Parallel()
	s := newStalledApp(t, handlers.Config{})
	c := (&app{srv: s.login}).client(t)
	(&app{srv: s.login}).login(t, c, "customer@example.com")
	s.proxy.close()
	for _, path := range []string{"/", "/api/orders"} {
		t.Run(path, func(t *testing.T) {
			r, _ := s.timedGet(t, c, path, 10*time.Second, nil)
			wantStatus(t, r, http.StatusServiceUnavailable)
			if got := r.header.Get("Retry-After"); got == "" {
				t.Error("no Retry-After")
			}
		})
	}
}

// TestStream_StalledDatabase: with PostgreSQL stalled, a stream being
// opened answers 503 with Retry-After once the request deadline passes,
// as other requests do, instead of hanging without headers for the stall.
func TestStream_StalledDatabase(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	s := newStalledApp(t, handlers.Config{RequestTimeout: timeout})
	c := (&app{srv: s.login}).client(t)
	(&app{srv: s.login}).login(t, c, "customer@example.com")
	runID := uuid.NewString()
	s.proxy.stall()
	for _, path := range []string{"/runs/" + runID + "/events?after=0", "/api/runs/" + runID + "/stream", "/runs/events"} {
		t.Run(path, func(t *testing.T) {
			// The limit only keeps a hang from stalling the test.
			r, _ := s.timedGet(t, c, path, 30*time.Second, map[string]string{"Accept": "text/event-stream"})
			wantStatus(t, r, http.StatusServiceUnavailable)
			if got := r.header.Get("Retry-After"); got == "" {
				t.Error("no Retry-After")
			}
		})
	}
}

// TestDeadline_LockedTableInATransaction: a run page's snapshot is one
// transaction, and one of its reads waits on a lock past the request
// deadline. The page answers 503 on time, and the waiting read is
// cancelled then, while the lock is still held (lib/pq watches the
// transaction's context: its statements run without a watch of their own),
// so no connection stays behind the lock; once it is gone the page serves.
func TestDeadline_LockedTableInATransaction(t *testing.T) {
	t.Parallel()
	// Long enough for the sign-in's password check on a loaded machine
	// (the deadline bounds it too); the lock outlasts it anyway.
	const timeout = 2 * time.Second
	a := newApp(t, handlers.Config{RequestTimeout: timeout})
	run := a.startRun(t, "customer@example.com", 1)
	c := a.signedIn(t, "customer@example.com")
	s := &stalledApp{srv: a.srv}
	path := "/runs/" + run.ID.String()

	tx := lockTable(t, a.db, "final_messages") // read only inside the page's snapshot transaction
	r, took := s.timedGet(t, c, path, 5*time.Second, nil)
	wantStatus(t, r, http.StatusServiceUnavailable)
	if took > timeout+time.Second {
		t.Errorf("answered after %s, want about %s", took, timeout)
	}
	testkit.WaitUntil(t, "the page's read behind the lock to be cancelled", 5*time.Second, func() bool {
		var waiting int
		err := a.db.QueryRow(`SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%final_messages%'`).Scan(&waiting)
		return err == nil && waiting == 0
	})
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the page to serve again", 10*time.Second, func() bool {
		r, _ := s.timedGet(t, c, path, 10*time.Second, nil)
		return r.status == http.StatusOK
	})
}

// lockTable locks table against every other transaction until the
// returned one ends (at the latest when the test does).
func lockTable(t *testing.T, db *sqlx.DB, table string) *sql.Tx {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.Exec(`LOCK TABLE ` + table + ` IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return tx
}
