package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store"
)

// The principals of the authorization matrix, in the order of its columns.
const (
	mxAnon     = iota // no session, no token
	mxCustomer        // customer@example.com, the owner of the run, with refund_access
	mxOther           // customer2@example.com: a customer, not the owner
	mxRevoked         // a customer whose refund_access was taken away, on their own run
	mxApprover        // approver@example.com
	mxSupport         // support@example.com
	mxAdmin           // admin@example.com
	mxToken           // an API bearer token of the customer's, and no session
	mxPrincipals
)

var mxNames = [mxPrincipals]string{"anonymous", "customer", "other-customer", "revoked-customer",
	"approver", "support", "admin", "customer-token"}

// mxWant is one row of expectations, one per principal (column order
// above). Each is "<status> [detail…]" or "sse <what is delivered>":
//
//	303 /login, 303 /, 303 /admin/users: a redirect there
//	303 run:     a redirect to the run's page; 303 new-run: to a new run's page
//	200 full:    the run with its narration and timeline
//	200 status:  the run's status only: no narration, no timeline
//	200 support: support's view of the run: narration and reason
//	sse full:    the stream replays the narration and the timeline
//	sse status:  the stream sends status only, no narration, no timeline
//	sse denied, sse signed-out: the close event, nothing of the run, the end
//	+:           the request changes state although it redirects to /login
//
// A state-changing row's change must happen exactly when the request
// succeeds (2xx, or a 303 anywhere but /login, or +), and never otherwise.
type mxWant [mxPrincipals]string

// mxRow is one route of handlers' route table.
type mxRow struct {
	method, route string
	// fresh: the request changes the session, so it gets a client of its
	// own, signed in as the principal, instead of the shared one.
	fresh bool
	cell  mxCellFunc
	want  mxWant
}

// mxCellFunc builds the request of row for who, made with client c.
type mxCellFunc func(t *testing.T, m *mxApp, row mxRow, who int, c *http.Client) *mxCell

// mxRows is the matrix: every route of DESIGN.md (and every other route the
// server registers) × every principal → what they get.
func mxRows() []mxRow {
	const L = "303 /login"
	return append([]mxRow{
		// mxWant columns: anonymous, customer (owner), other-customer, revoked-customer (owner), approver, support, admin, customer-token.
		{"GET", "/healthz", false, mxPath("/healthz"), mxWant{"200", "200", "200", "200", "200", "200", "200", "200"}},
		{"GET", "/readyz", false, mxPath("/readyz"), mxWant{"200", "200", "200", "200", "200", "200", "200", "200"}},
		// Served by peer address, not by role: the matrix calls from loopback
		// (TestMetrics_LoopbackOnly checks that any other address gets 403).
		{"GET", "/metrics", false, mxPath("/metrics"), mxWant{"200", "200", "200", "200", "200", "200", "200", "200"}},
		{"GET", "/debug/pprof/*", false, mxPath("/debug/pprof/"), mxWant{"200", "200", "200", "200", "200", "200", "200", "200"}},
		{"GET", "/static/*", false, mxPath("/static/app.css"), mxWant{"200", "200", "200", "200", "200", "200", "200", "200"}},
		{"HEAD", "/static/*", false, mxPath("/static/app.css"), mxWant{"200", "200", "200", "200", "200", "200", "200", "200"}},
		{"GET", "/api/openapi.json", false, mxPath("/api/openapi.json"), mxWant{"200", "200", "200", "200", "200", "200", "200", "200"}},

		{"GET", "/login", false, mxPath("/login"), mxWant{"200", "303 /", "303 /", "303 /", "303 /", "303 /", "303 /", "200"}},
		{"POST", "/login", true, mxLogin, mxWant{"401", "303 /", "303 /", "303 /", "303 /", "303 /", "303 /", "401"}},
		{"POST", "/logout", true, mxLogout, mxWant{L, L + " +", L + " +", L + " +", L + " +", L + " +", L + " +", L}},
		// Anyone may choose a language: saved with a signed-in user, else
		// (a visitor, a bearer token without a session) in a cookie.
		{"POST", "/language", true, mxLanguage, mxWant{"303 /", "303 /", "303 /", "303 /", "303 /", "303 /", "303 /", "303 /"}},

		{"GET", "/", false, mxPath("/"), mxWant{L, "200", "200", "200", "200", "200", "200", L}},
		{"POST", "/runs", false, mxStartForm, mxWant{L, "303 new-run", "303 new-run", "403", "403", "403", "403", L}},
		{"POST", "/runs/:id/approve", false, mxOnRun(store.EventApprovalGranted), mxWant{L, "403", "404", "403", "303 run", "403", "404", L}},
		{"POST", "/runs/:id/cancel", false, mxOnRun(store.EventCancelRequested), mxWant{L, "303 run", "404", "303 run", "303 run", "403", "404", L}},
		{"GET", "/support/runs", false, mxPath("/support/runs"), mxWant{L, "403", "403", "403", "403", "200", "403", L}},
		{"GET", "/runs/:id", false, mxOnRun(""), mxWant{L, "200 full", "404", "200 status", "200 full", "200 full", "404", L}},
		// Asking again for a run that goes on: its owner is told it still
		// goes on; only a customer who may start refunds asks at all.
		{"GET", "/runs/:id/again", false, mxOnRun(""), mxWant{L, "409", "404", "403", "403", "403", "403", L}},
		{"GET", "/runs/:id/events", false, mxOnRun(""), mxWant{"sse signed-out", "sse full", "sse denied", "sse status", "sse full", "sse full", "sse denied", "sse signed-out"}},
		{"GET", "/queue/events", false, mxPath("/queue/events?after=x"), mxWant{"sse signed-out", "sse denied", "sse denied", "sse denied", "sse queue", "sse denied", "sse denied", "sse signed-out"}},
		{"GET", "/streams", false, mxOnRun(""), mxWant{"sse signed-out", "sse full", "sse denied", "sse status", "sse full", "sse full", "sse denied", "sse signed-out"}},
		{"GET", "/runs/events", false, mxPath("/runs/events?after=x"), mxWant{"sse signed-out", "sse list", "sse list", "sse list", "sse denied", "sse denied", "sse denied", "sse signed-out"}},

		{"GET", "/support/audit", false, mxPath("/support/audit"), mxWant{L, "403", "403", "403", "403", "200", "200", L}},
		{"GET", "/support/provider", false, mxPath("/support/provider"), mxWant{L, "403", "403", "403", "403", "200", "403", L}},
		{"GET", "/support/runs/:id", false, mxOnRun(""), mxWant{L, "403", "403", "403", "403", "200 support", "404", L}},
		{"GET", "/support/runs/:id/export", false, mxOnRun(""), mxWant{L, "403", "403", "403", "403", "200 support", "404", L}},

		{"GET", "/admin/users", false, mxPath("/admin/users"), mxWant{L, "403", "403", "403", "403", "403", "200", L}},
		{"POST", "/admin/users/:id/role", false, mxOnUser, mxWant{L, "403", "403", "403", "403", "403", "303 /admin/users", L}},
		{"POST", "/admin/users/:id/grants", false, mxOnUser, mxWant{L, "403", "403", "403", "403", "403", "303 /admin/users", L}},
		{"POST", "/admin/users/:id/disable", false, mxOnUser, mxWant{L, "403", "403", "403", "403", "403", "303 /admin/users", L}},
		{"POST", "/admin/users/:id/enable", false, mxOnUser, mxWant{L, "403", "403", "403", "403", "403", "303 /admin/users", L}},
		{"POST", "/admin/users/:id/tokens", false, mxOnUser, mxWant{L, "403", "403", "403", "403", "403", "303 /admin/tokens/new", L}},
		{"GET", "/admin/tokens/new", true, mxPath("/admin/tokens/new"), mxWant{L, "403", "403", "403", "403", "403", "303 /admin/users", L}},
		{"POST", "/admin/tokens/:id/revoke", false, mxOnToken, mxWant{L, "403", "403", "403", "403", "403", "303 /admin/users", L}},

		{"GET", "/api/orders", false, mxOrders, mxWant{"401", "200", "200", "200", "200", "200", "200", "200"}},
		{"GET", "/api/runs", false, mxListRuns, mxWant{"401", "200", "200", "200", "200", "200", "200", "200"}},
		{"POST", "/api/runs", false, mxAPIStart, mxWant{"401", "201", "201", "403", "403", "403", "403", "201"}},
		{"GET", "/api/runs/:id", false, mxOnRun(""), mxWant{"401", "200 full", "404", "200 status", "200 full", "200 full", "404", "200 full"}},
		{"GET", "/api/runs/:id/events", false, mxOnRun(""), mxWant{"401", "200 full", "404", "403", "200 full", "200 full", "404", "200 full"}},
		{"GET", "/api/runs/:id/stream", false, mxOnRun(""), mxWant{"401", "sse full", "404", "sse status", "sse full", "sse full", "404", "sse full"}},
		{"POST", "/api/runs/:id/approve", false, mxOnRun(store.EventApprovalGranted), mxWant{"401", "403", "404", "403", "200", "403", "404", "403"}},
		{"POST", "/api/runs/:id/cancel", false, mxOnRun(store.EventCancelRequested), mxWant{"401", "200", "404", "200", "200", "403", "404", "200"}},
	}, mxWebhookRows()...)
}

// mxUnaskedRows are the rows of the routes on one run again, on a run that
// never asked for approval: approvers see only runs that asked for a
// decision, so to them this one cannot be read; a decision they send about
// it is a 409 that says only its state (it does not wait for one: an
// approve sent right after the start must not read as "no such run").
// Everyone else gets what they get on a run awaiting approval.
func mxUnaskedRows() []mxRow {
	const L = "303 /login"
	return []mxRow{
		// mxWant columns: anonymous, customer (owner), other-customer, revoked-customer (owner), approver, support, admin, customer-token.
		{"POST", "/runs/:id/approve", false, mxOnUnaskedRun(store.EventApprovalGranted), mxWant{L, "403", "404", "403", "409", "403", "404", L}},
		{"POST", "/runs/:id/cancel", false, mxOnUnaskedRun(store.EventCancelRequested), mxWant{L, "303 run", "404", "303 run", "409", "403", "404", L}},
		{"GET", "/runs/:id", false, mxOnUnaskedRun(""), mxWant{L, "200 full", "404", "200 status", "404", "200 full", "404", L}},
		{"GET", "/runs/:id/again", false, mxOnUnaskedRun(""), mxWant{L, "409", "404", "403", "403", "403", "403", L}},
		{"GET", "/runs/:id/events", false, mxOnUnaskedRun(""), mxWant{"sse signed-out", "sse full", "sse denied", "sse status", "sse denied", "sse full", "sse denied", "sse signed-out"}},
		{"GET", "/support/runs/:id", false, mxOnUnaskedRun(""), mxWant{L, "403", "403", "403", "403", "200 support", "404", L}},
		{"GET", "/support/runs/:id/export", false, mxOnUnaskedRun(""), mxWant{L, "403", "403", "403", "403", "200 support", "404", L}},
		{"GET", "/streams", false, mxOnUnaskedRun(""), mxWant{"sse signed-out", "sse full", "sse denied", "sse status", "sse denied", "sse full", "sse denied", "sse signed-out"}},

		{"GET", "/api/runs/:id", false, mxOnUnaskedRun(""), mxWant{"401", "200 full", "404", "200 status", "404", "200 full", "404", "200 full"}},
		{"GET", "/api/runs/:id/events", false, mxOnUnaskedRun(""), mxWant{"401", "200 full", "404", "403", "404", "200 full", "404", "200 full"}},
		{"GET", "/api/runs/:id/stream", false, mxOnUnaskedRun(""), mxWant{"401", "sse full", "404", "sse status", "404", "sse full", "404", "sse full"}},
		{"POST", "/api/runs/:id/approve", false, mxOnUnaskedRun(store.EventApprovalGranted), mxWant{"401", "403", "404", "403", "409", "403", "404", "403"}},
		{"POST", "/api/runs/:id/cancel", false, mxOnUnaskedRun(store.EventCancelRequested), mxWant{"401", "200", "404", "200", "409", "403", "404", "200"}},
	}
}

// TestMatrix is the authorization matrix of issue 6: every principal ×
// every route → the status, what is shown or streamed, and whether the
// request changed anything; the routes on one run both on a run awaiting
// approval and on one that never asked for it.
func TestMatrix(t *testing.T) {
	t.Parallel()
	m := newMxApp(t)
	rows, unasked := mxRows(), mxUnaskedRows()

	t.Run("every route has a row", func(t *testing.T) {
		registered := map[string]bool{}
		for _, r := range m.e.Routes() {
			if r.Method == echo.RouteNotFound {
				continue
			}
			registered[r.Method+" "+r.Path] = true
		}
		listed := map[string]bool{}
		for _, row := range rows {
			key := row.method + " " + row.route
			if listed[key] {
				t.Errorf("%s has two rows", key)
			}
			listed[key] = true
			if !registered[key] {
				t.Errorf("%s has a row but is not a route (renamed or removed? update the matrix)", key)
			}
		}
		for key := range registered {
			if !listed[key] {
				t.Errorf("route %s has no row in the authorization matrix: add one saying who gets what", key)
			}
		}
		again := map[string]bool{}
		for _, row := range unasked {
			key := row.method + " " + row.route
			if !listed[key] {
				t.Errorf("%s has a row for a run that never asked for approval, but none of its own", key)
			}
			again[key] = true
		}
		for key := range listed {
			if strings.Contains(key, "/runs/:id") && !again[key] {
				t.Errorf("route %s has no row for a run that never asked for approval", key)
			}
		}
	})

	for _, set := range []struct {
		name string
		rows []mxRow
	}{{"", rows}, {"never asked for approval: ", unasked}} {
		for _, row := range set.rows {
			t.Run(set.name+row.method+" "+row.route, func(t *testing.T) {
				t.Parallel()
				for who := range mxPrincipals {
					t.Run(mxNames[who], func(t *testing.T) {
						t.Parallel()
						m.check(t, row, who)
					})
				}
			})
		}
	}
}

// mxApp is the matrix's server, its principals and their clients.
type mxApp struct {
	*app
	token   string                    // the customer's API token
	users   [mxPrincipals]*store.User // nil for anonymous; the customer for the token
	clients [mxPrincipals]*http.Client
}

func newMxApp(t *testing.T) *mxApp {
	t.Helper()
	ctx := context.Background()
	m := &mxApp{app: newApp(t, handlers.Config{})}
	st := m.store
	// The revoked customer had refund_access, started a refund, then lost
	// the grant.
	revoked, err := st.CreateUser(ctx, "revoked@example.com", "Rory Revoked", store.RoleCustomer, devdb.DemoPassword, store.GrantRefundAccess)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateOrder(ctx, revoked.ID, "Umbrella", 4200, "EUR"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetGrant(ctx, revoked.ID, store.GrantRefundAccess, false); err != nil {
		t.Fatal(err)
	}

	for who, email := range [mxPrincipals]string{mxCustomer: "customer@example.com", mxOther: "customer2@example.com",
		mxRevoked: "revoked@example.com", mxApprover: "approver@example.com", mxSupport: "support@example.com", mxAdmin: "admin@example.com"} {
		if email == "" {
			continue
		}
		if m.users[who], err = st.UserByEmail(ctx, email); err != nil {
			t.Fatal(err)
		}
	}
	if m.users[mxRevoked].Has(store.GrantRefundAccess) || !m.users[mxCustomer].Has(store.GrantRefundAccess) {
		t.Fatal("the revoked customer holds refund_access, or the customer does not")
	}
	m.users[mxToken] = m.users[mxCustomer]
	if _, m.token, err = st.CreateToken(ctx, m.users[mxCustomer].ID, "matrix"); err != nil {
		t.Fatal(err)
	}
	for who := range mxPrincipals {
		m.clients[who] = m.newClient(t, who)
	}
	return m
}

// mxBearer sends every request with the bearer token and no cookie.
type mxBearer struct{ token string }

func (b mxBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// newClient is a client of who's own: signed in with a session of its own,
// or carrying the token.
func (m *mxApp) newClient(t *testing.T, who int) *http.Client {
	t.Helper()
	c := m.client(t)
	switch who {
	case mxAnon:
	case mxToken:
		c.Transport = mxBearer{m.token}
	default:
		m.login(t, c, m.users[who].Email)
	}
	return c
}

// mxCell is one request of the matrix and what to look at afterwards.
type mxCell struct {
	path    string
	form    url.Values // a form post
	json    string     // a JSON body
	hdr     map[string]string
	run     *store.Run // the run the path names, if any
	lastSeq int64      // the run's last seq when the request is made
	secrets struct{ narration, reason string }
	// changed reports whether the request's state change happened; nil
	// for requests that change nothing.
	changed func(t *testing.T) bool
	// body checks a successful answer's body further.
	body func(t *testing.T, body string)
	// timeline is the type of the run's last business event, which full
	// access delivers.
	timeline string
}

func mxPath(path string) mxCellFunc {
	return func(*testing.T, *mxApp, mxRow, int, *http.Client) *mxCell { return &mxCell{path: path} }
}

// mxOnRun makes a fresh run awaiting approval for each request (owned by
// the customer, or by the revoked customer for themselves), with narration
// and a reason no one else may see. With eventType, the request's change is
// that event being appended.
func mxOnRun(eventType string) mxCellFunc { return mxRunCell(eventType, true) }

// mxOnUnaskedRun is mxOnRun on a run that never asked for approval: it is
// planning, as every run is before its policy decides whether an approver
// is needed, and as one that needs none stays until it submits.
func mxOnUnaskedRun(eventType string) mxCellFunc { return mxRunCell(eventType, false) }

func mxRunCell(eventType string, askApproval bool) mxCellFunc {
	return func(t *testing.T, m *mxApp, row mxRow, who int, _ *http.Client) *mxCell {
		t.Helper()
		ctx := context.Background()
		owner := m.users[mxCustomer]
		if who == mxRevoked {
			owner = m.users[mxRevoked]
		}
		orders, err := m.store.OrdersByCustomer(ctx, owner.ID)
		if err != nil || len(orders) == 0 {
			t.Fatalf("orders of %s: %v (%d)", owner.Email, err, len(orders))
		}
		c := &mxCell{}
		c.secrets.reason = "mx-reason-" + uuid.NewString()
		c.secrets.narration = "mx-narration-" + uuid.NewString()
		run, _, err := m.store.StartRun(ctx, store.StartRequest{OwnerID: owner.ID, ClientRequestID: uuid.NewString(),
			OrderID: orders[0].ID, Amount: 1, Reason: c.secrets.reason})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.store.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{Text: c.secrets.narration + " "})); err != nil {
			t.Fatal(err)
		}
		// The last event is a business one, so status-only streams reach it.
		if askApproval {
			c.timeline = store.EventApprovalRequested
			run, err = m.store.RequestApproval(ctx, run.ID, proposalFor(run))
		} else {
			c.timeline = store.EventRunPlanning
			run, err = m.store.Transition(ctx, run.ID, store.StateCreated, store.StatePlanning, store.EventOf(store.RunPlanning{}))
		}
		if err != nil {
			t.Fatal(err)
		}
		c.run, c.lastSeq = run, run.LastSeq
		c.path = strings.Replace(row.route, ":id", run.ID.String(), 1)
		switch {
		case row.route == "/streams":
			c.path += "?run=" + run.ID.String() + ":0" // the run pages' shared stream (tabs.js)
		case strings.HasSuffix(row.route, "/events") || strings.HasSuffix(row.route, "/stream"):
			c.path += "?after=0" // whatever cursor they hold
		}
		if eventType != "" {
			c.changed = func(t *testing.T) bool {
				return m.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = $2`, run.ID, eventType) > 0
			}
		}
		return c
	}
}

// mxLogin posts the principal's own credentials (a wrong password for
// those without an account), from a client already signed in as them.
func mxLogin(t *testing.T, m *mxApp, _ mxRow, who int, client *http.Client) *mxCell {
	email, password := "customer@example.com", "not the password"
	if u := m.users[who]; u != nil && who != mxToken {
		email, password = u.Email, devdb.DemoPassword
	}
	return &mxCell{path: "/login", form: url.Values{"email": {email}, "password": {password}},
		changed: func(t *testing.T) bool { return m.get(t, client, "/").status == http.StatusOK }}
}

// mxLanguage chooses English explicitly: with the user when a session
// names one, else in the client's lang cookie.
func mxLanguage(t *testing.T, m *mxApp, _ mxRow, who int, client *http.Client) *mxCell {
	return &mxCell{path: "/language", form: url.Values{"lang": {"en"}, "back": {"/"}}, changed: func(t *testing.T) bool {
		if u := m.users[who]; u != nil && who != mxToken {
			var lang string
			if err := m.db.Get(&lang, `SELECT language FROM users WHERE id = $1`, u.ID); err != nil {
				t.Fatal(err)
			}
			return lang == "en"
		}
		for _, ck := range client.Jar.Cookies(mustURL(t, m.srv.URL)) {
			if ck.Name == "lang" && ck.Value == "en" {
				return true
			}
		}
		return false
	}}
}

// mxLogout's change is that the session the client held no longer works,
// even for a copy of its cookie.
func mxLogout(t *testing.T, m *mxApp, _ mxRow, who int, client *http.Client) *mxCell {
	var held *http.Cookie
	for _, ck := range client.Jar.Cookies(mustURL(t, m.srv.URL)) {
		if strings.Contains(ck.Name, "refundd_session") {
			held = ck
		}
	}
	return &mxCell{path: "/logout", changed: func(t *testing.T) bool {
		if held == nil {
			return false
		}
		copied := m.client(t)
		copied.Jar.SetCookies(mustURL(t, m.srv.URL), []*http.Cookie{{Name: held.Name, Value: held.Value}})
		return m.get(t, copied, "/").status != http.StatusOK
	}}
}

// mxOrderOf is an order of who's own, or the customer's for those without.
func (m *mxApp) mxOrderOf(t *testing.T, who int) int64 {
	t.Helper()
	for _, u := range []*store.User{m.users[who], m.users[mxCustomer]} {
		if u == nil {
			continue
		}
		orders, err := m.store.OrdersByCustomer(context.Background(), u.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(orders) > 0 {
			return orders[0].ID
		}
	}
	t.Fatal("no order")
	return 0
}

func mxStarted(m *mxApp, requestID string) func(t *testing.T) bool {
	return func(t *testing.T) bool {
		return m.count(t, `SELECT count(*) FROM runs WHERE client_request_id = $1`, requestID) > 0
	}
}

func mxStartForm(t *testing.T, m *mxApp, _ mxRow, who int, _ *http.Client) *mxCell {
	rid := uuid.NewString()
	return &mxCell{path: "/runs", form: url.Values{"request_id": {rid}, "order_id": {strconv.FormatInt(m.mxOrderOf(t, who), 10)},
		"amount": {"0.01"}, "reason": {"matrix"}}, changed: mxStarted(m, rid)}
}

func mxAPIStart(t *testing.T, m *mxApp, _ mxRow, who int, _ *http.Client) *mxCell {
	rid := uuid.NewString()
	return &mxCell{path: "/api/runs", json: fmt.Sprintf(`{"order_id":%d,"amount":1,"reason":"matrix"}`, m.mxOrderOf(t, who)),
		hdr: map[string]string{"Idempotency-Key": rid}, changed: mxStarted(m, rid)}
}

// mxOrders: whoever may call it sees their own orders and no one else's.
func mxOrders(t *testing.T, m *mxApp, _ mxRow, who int, _ *http.Client) *mxCell {
	return &mxCell{path: "/api/orders", body: func(t *testing.T, body string) {
		var got []struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("orders are not a JSON list: %v\n%s", err, body)
		}
		orders, err := m.store.OrdersByCustomer(context.Background(), m.users[who].ID)
		if err != nil {
			t.Fatal(err)
		}
		var ids, want []int64
		for _, o := range got {
			ids = append(ids, o.ID)
		}
		for _, o := range orders {
			want = append(want, o.ID)
		}
		slices.Sort(ids)
		slices.Sort(want)
		if !slices.Equal(ids, want) {
			t.Errorf("order IDs = %v, want the caller's own %v", ids, want)
		}
	}}
}

// mxListRuns: GET /api/runs never names a run the caller cannot open, and
// lists a run status-only exactly when its snapshot is status-only.
func mxListRuns(t *testing.T, m *mxApp, _ mxRow, who int, c *http.Client) *mxCell {
	return &mxCell{path: "/api/runs?limit=100", body: func(t *testing.T, body string) {
		var page struct{ Runs []map[string]any }
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatalf("not a page of runs: %v\n%s", err, body)
		}
		for _, run := range page.Runs {
			r := m.get(t, c, fmt.Sprintf("/api/runs/%v", run["id"]))
			if r.status != http.StatusOK {
				t.Errorf("%s lists run %v but gets %d opening it", mxNames[who], run["id"], r.status)
				continue
			}
			if statusOnly := len(run) == 2; statusOnly != strings.Contains(r.body, `"access":"status"`) {
				t.Errorf("%s: run %v listed as %v, but its snapshot is %.80s", mxNames[who], run["id"], run, r.body)
			}
		}
	}}
}

// mxTarget is a fresh customer for an admin request to act on, so that no
// two requests change the same user.
func (m *mxApp) mxTarget(t *testing.T) int64 {
	t.Helper()
	var id int64
	if err := m.db.Get(&id, `INSERT INTO users (email, name, role, password_hash) VALUES ($1, 'Target', 'customer', 'x') RETURNING id`,
		"target-"+uuid.NewString()+"@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.db.Exec(`INSERT INTO grants (user_id, name) VALUES ($1, $2)`, id, store.GrantRefundAccess); err != nil {
		t.Fatal(err)
	}
	return id
}

// mxOnUser is an admin request on a fresh user; its change is the one the
// route names.
func mxOnUser(t *testing.T, m *mxApp, row mxRow, _ int, _ *http.Client) *mxCell {
	id := m.mxTarget(t)
	route := row.route
	op := route[strings.LastIndex(route, "/")+1:]
	c := &mxCell{path: fmt.Sprintf("/admin/users/%d/%s", id, op)}
	query := map[string]string{
		"role":    `SELECT count(*) FROM users WHERE id = $1 AND role = 'approver'`,
		"grants":  `SELECT count(*) FROM users WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM grants WHERE user_id = $1)`,
		"disable": `SELECT count(*) FROM users WHERE id = $1 AND disabled_at IS NOT NULL`,
		"enable":  `SELECT count(*) FROM users WHERE id = $1 AND disabled_at IS NULL`,
		"tokens":  `SELECT count(*) FROM api_tokens WHERE user_id = $1`,
	}[op]
	if query == "" {
		t.Fatalf("no state change known for %s", route)
	}
	switch op {
	case "role":
		c.form = url.Values{"role": {store.RoleApprover}}
	case "grants":
		c.form = url.Values{"grant": {store.GrantRefundAccess}, "on": {"false"}}
	case "enable":
		if _, err := m.db.Exec(`UPDATE users SET disabled_at = now() WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
	case "tokens":
		c.form = url.Values{"name": {"matrix"}}
	}
	c.changed = func(t *testing.T) bool { return m.count(t, query, id) > 0 }
	return c
}

func mxOnToken(t *testing.T, m *mxApp, _ mxRow, _ int, _ *http.Client) *mxCell {
	tok, _, err := m.store.CreateToken(context.Background(), m.mxTarget(t), "matrix")
	if err != nil {
		t.Fatal(err)
	}
	return &mxCell{path: fmt.Sprintf("/admin/tokens/%d/revoke", tok.ID), changed: func(t *testing.T) bool {
		return m.count(t, `SELECT count(*) FROM api_tokens WHERE id = $1 AND revoked_at IS NOT NULL`, tok.ID) > 0
	}}
}

// check makes the row's request as who and compares what comes back with
// the matrix.
func (m *mxApp) check(t *testing.T, row mxRow, who int) {
	want := strings.Fields(row.want[who])
	if len(want) == 0 {
		t.Fatalf("the matrix says nothing about %s on %s %s", mxNames[who], row.method, row.route)
	}
	client := m.clients[who]
	if row.fresh {
		client = m.newClient(t, who)
	}
	cell := row.cell(t, m, row, who, client)
	if want[0] == "sse" {
		m.checkStream(t, client, cell, want[1])
		return
	}
	code, err := strconv.Atoi(want[0])
	if err != nil {
		t.Fatalf("bad expectation %q", row.want[who])
	}
	detail := strings.Join(want[1:], " ")

	// Generous: logins hash passwords, slowly under -race.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := m.request(t, ctx, row, cell)
	r := do(t, client, req)
	if r.status != code {
		t.Errorf("%s %s as %s = %d, want %d; body:\n%.600s", row.method, cell.path, mxNames[who], r.status, code, r.body)
	}

	location := ""
	for _, d := range want[1:] {
		switch d {
		case "run":
			location = "/runs/" + cell.run.ID.String()
		case "new-run":
			if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "/runs/") || uuid.Validate(strings.TrimPrefix(loc, "/runs/")) != nil {
				t.Errorf("Location = %q, want a new run's page", loc)
			}
		case "full", "status", "support", "+":
		default:
			location = d
		}
	}
	// A login redirect may carry the page to return to (?next=, tested in
	// login_next_test.go); the matrix checks where it sends the browser.
	if got, _, _ := strings.Cut(r.header.Get("Location"), "?next="); location != "" && got != location {
		t.Errorf("Location = %q, want %q", r.header.Get("Location"), location)
	}

	m.checkShown(t, row, cell, detail, code >= 400, r.body)
	if r.status == code && code/100 == 2 && cell.body != nil {
		cell.body(t, r.body)
	}
	if cell.changed != nil {
		succeeds := code/100 == 2 || (code == http.StatusSeeOther && location != "/login") || slices.Contains(want, "+")
		if got := cell.changed(t); got != succeeds {
			t.Errorf("%s %s as %s: state changed = %v, want %v", row.method, cell.path, mxNames[who], got, succeeds)
		}
	}
}

// checkShown checks how much of the run a response shows: all of it (full),
// its status only, or, when refused, nothing.
func (m *mxApp) checkShown(t *testing.T, row mxRow, cell *mxCell, detail string, refused bool, body string) {
	if cell.run == nil {
		return
	}
	narration, reason := cell.secrets.narration, cell.secrets.reason
	api := strings.HasPrefix(cell.path, "/api/")
	switch {
	case detail == "full" && row.route == "/api/runs/:id":
		// The snapshot holds no narration: the run itself, in full.
		if !strings.Contains(body, `"access":"full"`) || !strings.Contains(body, reason) {
			t.Errorf("full access, but the snapshot is not the full one:\n%.800s", body)
		}
	case detail == "support":
		// Support's own view of the run: everything, the reason too.
		if !strings.Contains(body, narration) || !strings.Contains(body, reason) {
			t.Errorf("support's view lacks the narration or the reason:\n%.800s", body)
		}
	case detail == "full":
		if !strings.Contains(body, narration) {
			t.Errorf("full access, but the narration is not in the answer:\n%.800s", body)
		}
		if !api && !strings.Contains(body, `id="timeline"`) {
			t.Errorf("full access, but the page has no timeline")
		}
	case detail == "status":
		if strings.Contains(body, narration) || strings.Contains(body, `id="timeline"`) || strings.Contains(body, `id="narration"`) {
			t.Errorf("status-only access, but the answer has the narration or the timeline:\n%.800s", body)
		}
		if !api && !strings.Contains(body, `id="status-only"`) {
			t.Errorf("status-only page does not say so")
		}
		if api && !strings.Contains(body, `"access":"status"`) {
			t.Errorf("status-only snapshot = %.400s, want access status", body)
		}
	default:
		if strings.Contains(body, narration) {
			t.Errorf("the narration leaked into an answer that is not full access:\n%.600s", body)
		}
		if refused && strings.Contains(body, reason) {
			t.Errorf("a refusal shows the run's reason:\n%.600s", body)
		}
	}
}

// checkStream opens a stream as client with cursor 0 and reads it until
// the run's last event (or the end), then checks what was delivered.
func (m *mxApp) checkStream(t *testing.T, client *http.Client, cell *mxCell, what string) {
	t.Helper()
	stopAt := int64(-1)
	if what == "full" || what == "status" {
		stopAt = cell.lastSeq
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := m.openStream(t, ctx, client, cell.path)
	defer res.Body.Close()

	frames, reached, ended := readStreamUntil(ctx, res.Body, stopAt)
	if stopAt >= 0 && !reached {
		t.Fatalf("the stream did not deliver up to seq %d (ended=%v); got %d frames: %+v", stopAt, ended, len(frames), frames)
	}

	api := strings.HasPrefix(cell.path, "/api/")
	switch what {
	case "full":
		checkFullStream(t, cell, api, frames)
	case "status":
		checkStatusOnlyStream(t, cell, api, frames)
	case "queue":
		if len(frames) == 0 || frames[0].Event != "reset" || frames[0].ID == "" || !strings.Contains(frames[0].Data, `id="queue-body"`) {
			t.Errorf("got %+v, want the queue's reset first", frames)
		}
	case "list":
		if len(frames) == 0 || frames[0].Event != "reset" || frames[0].ID == "" || !strings.Contains(frames[0].Data, `id="runs-body"`) {
			t.Errorf("got %+v, want the run list's reset first", frames)
		}
	case "denied", "signed-out":
		checkRefusedStream(t, cell, what, frames, ended)
	default:
		t.Fatalf("bad stream expectation %q", what)
	}
}

// openStream requests path as client, asking for an event stream, and
// fails the test unless the answer is one.
func (m *mxApp) openStream(t *testing.T, ctx context.Context, client *http.Client, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("status %d (%s), want a stream; body:\n%.600s", res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	return res
}

// readStreamUntil reads the stream's frames (comments left out) until one
// carries seq stopAt (reached), or, when stopAt is negative, until the
// first frame that is not a close event. ended says the server ended the
// stream before either, with no error and before ctx ran out.
func readStreamUntil(ctx context.Context, body io.Reader, stopAt int64) (frames []testkit.SSEEvent, reached, ended bool) {
	early := false
	var readErr error
	for f, err := range testkit.SSE(body) {
		if err != nil {
			readErr = err
			break
		}
		if f.Comment != "" {
			continue
		}
		frames = append(frames, f)
		// /streams names the run before the seq: RUN:SEQ.
		if _, seq, _ := strings.Cut(f.ID, ":"); stopAt >= 0 && (f.ID == strconv.FormatInt(stopAt, 10) || seq == strconv.FormatInt(stopAt, 10)) {
			reached = true
			break
		}
		if stopAt < 0 && f.Event != "close" {
			early = true
			break // a refused stream that goes on: fail now
		}
	}
	if !reached && !early {
		ended = ctx.Err() == nil && readErr == nil
	}
	return frames, reached, ended
}

// checkFullStream checks that a stream with full access delivered the
// run's narration and a timeline event, and no close or status event.
func checkFullStream(t *testing.T, cell *mxCell, api bool, frames []testkit.SSEEvent) {
	t.Helper()
	narration := cell.secrets.narration
	sawNarration, sawTimeline := false, false
	for _, f := range frames {
		if f.Event == "close" || f.Event == "status" {
			t.Errorf("full access got %s event: %.400s", f.Event, f.Data)
		}
		if api {
			var ev struct {
				Type    string          `json:"type"`
				Seq     int64           `json:"seq"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal([]byte(f.Data), &ev); err != nil || ev.Type == "" {
				t.Errorf("frame %+v is not the event JSON", f)
			}
			sawNarration = sawNarration || (ev.Type == store.EventNarrationDelta && strings.Contains(string(ev.Payload), narration))
			sawTimeline = sawTimeline || ev.Type == cell.timeline
		} else {
			sawNarration = sawNarration || strings.Contains(f.Data, narration)
			sawTimeline = sawTimeline || strings.Contains(f.Data, "beforeend:#timeline")
		}
	}
	if !sawNarration || !sawTimeline {
		t.Errorf("full access: narration delivered = %v, timeline delivered = %v, want both; frames: %+v", sawNarration, sawTimeline, frames)
	}
}

// checkStatusOnlyStream checks that a status-only stream sent the run's
// state and nothing of its narration or timeline.
func checkStatusOnlyStream(t *testing.T, cell *mxCell, api bool, frames []testkit.SSEEvent) {
	t.Helper()
	all := framesData(frames)
	if strings.Contains(all, cell.secrets.narration) || strings.Contains(all, "#timeline") || strings.Contains(all, "#narration") {
		t.Errorf("status-only stream delivered narration or timeline: %+v", frames)
	}
	for _, f := range frames {
		if api && (f.Event != "status" || !strings.Contains(f.Data, `"access":"status"`) || strings.Contains(f.Data, `"type"`)) {
			t.Errorf("status-only JSON stream sent %+v, want event status with the run's state only", f)
		}
		if !api && f.Event == "" && !strings.Contains(f.Data, `id="run-status"`) {
			t.Errorf("status-only HTML stream sent %+v, want the status panel", f)
		}
	}
	if len(frames) == 0 {
		t.Error("status-only stream sent nothing")
	}
}

// checkRefusedStream checks that a refused stream (what is "denied" or
// "signed-out") sent one close event saying why, then ended, and leaked
// nothing of the run.
func checkRefusedStream(t *testing.T, cell *mxCell, what string, frames []testkit.SSEEvent, ended bool) {
	t.Helper()
	says := map[string]string{"denied": "not available to you", "signed-out": "Log in again"}[what]
	if len(frames) == 0 || frames[0].Event != "close" || !strings.Contains(frames[0].Data, says) {
		t.Errorf("got %+v, want first the close event saying %q", frames, says)
	}
	if len(frames) != 1 || !ended {
		t.Errorf("got %d frames (ended=%v), want the close event and the end", len(frames), ended)
	}
	for _, f := range frames {
		// /streams names the run the request named, and no seq.
		if f.ID != "" && f.ID != cell.run.ID.String()+":" {
			t.Errorf("a refused stream sent an event with id %s", f.ID)
		}
	}
	all := framesData(frames)
	if cell.run != nil && (strings.Contains(all, cell.secrets.narration) || strings.Contains(all, cell.secrets.reason)) {
		t.Errorf("a refused stream leaked the run: %+v", frames)
	}
}

// framesData is every frame's data, one line each.
func framesData(frames []testkit.SSEEvent) string {
	var all strings.Builder
	for _, f := range frames {
		all.WriteString(f.Data + "\n")
	}
	return all.String()
}

// request is the cell's request: its method, path, body and headers.
func (m *mxApp) request(t *testing.T, ctx context.Context, row mxRow, cell *mxCell) *http.Request {
	t.Helper()
	var body io.Reader
	switch {
	case cell.form != nil:
		body = strings.NewReader(cell.form.Encode())
	case cell.json != "":
		body = strings.NewReader(cell.json)
	}
	req, err := http.NewRequestWithContext(ctx, row.method, m.srv.URL+cell.path, body)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case cell.form != nil:
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	case cell.json != "":
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range cell.hdr {
		req.Header.Set(k, v)
	}
	return req
}
