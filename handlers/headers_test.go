package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/static"
)

const wantCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'"

// TestHeaders_EveryRouteEveryPrincipal walks the authorization matrix's
// rows (every route of the table) as every principal: every answer carries
// the Content-Security-Policy, and every answer but a static file or an
// event stream is no-store, so that no page or API answer of a signed-in
// person stays in a cache after they log out.
func TestHeaders_EveryRouteEveryPrincipal(t *testing.T) {
	t.Parallel()
	m := newMxApp(t)
	for _, row := range mxRows() {
		t.Run(row.method+" "+row.route, func(t *testing.T) {
			t.Parallel()
			for who := range mxPrincipals {
				t.Run(mxNames[who], func(t *testing.T) {
					t.Parallel()
					hdr, status := m.headersOf(t, row, who)
					if got := hdr.Get("Content-Security-Policy"); got != wantCSP {
						t.Errorf("Content-Security-Policy = %q, want %q", got, wantCSP)
					}
					want := "no-store"
					switch {
					case row.route == "/static/*":
						want = "no-cache" // unversioned URL: revalidated (TestStatic checks versioned ones)
					case strings.HasPrefix(row.want[who], "sse"):
						want = "no-cache"
					}
					if got := hdr.Get("Cache-Control"); got != want {
						t.Errorf("status %d: Cache-Control = %q, want %q", status, got, want)
					}
				})
			}
		})
	}
}

// headersOf makes row's request as who and returns the answer's headers
// without waiting for a stream to end.
func (m *mxApp) headersOf(t *testing.T, row mxRow, who int) (http.Header, int) {
	t.Helper()
	client := m.clients[who]
	if row.fresh {
		client = m.newClient(t, who)
	}
	cell := row.cell(t, m, row, who, client)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := m.request(t, ctx, row, cell)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Closing the body ends a stream (cancel follows).
	res.Body.Close()
	return res.Header, res.StatusCode
}

// TestHeaders_ErrorsAndStatic: the answers that no route table row makes
// (not found, refused) carry the policy too; versioned static files keep
// their long caching.
func TestHeaders_ErrorsAndStatic(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	for _, tc := range []struct {
		path, cache string
		status      int
	}{
		{"/no/such/page", "no-store", http.StatusNotFound},
		{"/api/no/such/thing", "no-store", http.StatusNotFound},
		{static.URL("app.css"), "public, max-age=31536000, immutable", http.StatusOK},
		{static.URL("vendor/htmx.min.js"), "public, max-age=31536000, immutable", http.StatusOK},
	} {
		r := a.get(t, c, tc.path)
		wantStatus(t, r, tc.status)
		if got := r.header.Get("Content-Security-Policy"); got != wantCSP {
			t.Errorf("GET %s: Content-Security-Policy = %q, want %q", tc.path, got, wantCSP)
		}
		if got := r.header.Get("Cache-Control"); got != tc.cache {
			t.Errorf("GET %s: Cache-Control = %q, want %q", tc.path, got, tc.cache)
		}
	}
}

// TestCSP_NoInlineScriptOrStyle: the pages need nothing the policy
// refuses: no inline script, no inline event handler, no style attribute
// or element, and htmx is told not to inject its indicator style.
func TestCSP_NoInlineScriptOrStyle(t *testing.T) {
	t.Parallel()
	s := newStreamApp(t, handlers.Config{})
	c := s.customerClient(t)
	for _, path := range []string{"/login", "/", "/runs/" + s.run.ID.String(), "/no/such/page"} {
		cl := c
		if path == "/login" {
			cl = s.client(t)
		}
		r := s.get(t, cl, path)
		doc := r.doc(t)
		doc.Find("script").Each(func(_ int, e *goquery.Selection) {
			if src, ok := e.Attr("src"); !ok || !strings.HasPrefix(src, "/static/") || strings.TrimSpace(e.Text()) != "" {
				t.Errorf("GET %s: inline or foreign script %q src=%q", path, e.Text(), src)
			}
		})
		if n := doc.Find("style, [style]").Length(); n > 0 {
			t.Errorf("GET %s: %d inline styles", path, n)
		}
		doc.Find("*").Each(func(_ int, e *goquery.Selection) {
			for _, attr := range e.Nodes[0].Attr {
				if strings.HasPrefix(attr.Key, "on") || strings.HasPrefix(attr.Key, "hx-on") || strings.Contains(attr.Val, "javascript:") {
					t.Errorf("GET %s: <%s %s=%q> needs inline script", path, e.Nodes[0].Data, attr.Key, attr.Val)
				}
			}
		})
		cfg, _ := doc.Find(`meta[name="htmx-config"]`).Attr("content")
		if !strings.Contains(cfg, `"includeIndicatorStyles":false`) {
			t.Errorf("GET %s: htmx-config = %q, want includeIndicatorStyles false", path, cfg)
		}
	}
}

// TestHosts_AllowList: a request addressed to a host that is not ours (a
// DNS-rebinding page's) is refused in words before any handler, even the
// login page that lists the demo passwords; health checks answer any host.
func TestHosts_AllowList(t *testing.T) {
	t.Parallel()
	def := newApp(t, handlers.Config{DemoLogins: true})
	set := newApp(t, handlers.Config{DemoLogins: true, AllowedHosts: []string{"refunds.example.com", "::1"}})
	for _, tc := range []struct {
		name   string
		a      *app
		host   string
		path   string
		status int
	}{
		{"default: test server address", def, "", "/login", http.StatusOK},
		{"default: localhost", def, "localhost:8080", "/login", http.StatusOK},
		{"default: IPv6 loopback", def, "[::1]:8080", "/login", http.StatusOK},
		{"default: rebinding name", def, "attacker.example:8080", "/login", http.StatusMisdirectedRequest},
		{"default: rebinding name, API", def, "attacker.example", "/api/orders", http.StatusMisdirectedRequest},
		{"default: rebinding name, health", def, "attacker.example", "/healthz", http.StatusOK},
		{"default: rebinding name, ready", def, "attacker.example", "/readyz", http.StatusOK},
		{"set: its name", set, "Refunds.Example.com.", "/login", http.StatusOK},
		{"set: IPv6 loopback", set, "[::1]", "/login", http.StatusOK},
		{"set: loopback no longer", set, "localhost", "/login", http.StatusMisdirectedRequest},
		{"set: load balancer probe by IP", set, "10.0.0.7:8080", "/readyz", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequest(http.MethodGet, tc.a.srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			r := do(t, tc.a.client(t), req)
			wantStatus(t, r, tc.status)
			if tc.status != http.StatusMisdirectedRequest {
				return
			}
			if strings.Contains(r.body, "approver@example.com") {
				t.Error("the refusal shows the demo logins")
			}
			if tc.path == "/api/orders" {
				if !strings.Contains(r.body, `"code":"misdirected_request"`) {
					t.Errorf("API refusal = %s, want a JSON error", r.body)
				}
				return
			}
			if got := r.doc(t).Find("h1").Text(); got != "Wrong address" {
				t.Errorf("h1 = %q, want Wrong address", got)
			}
		})
	}
}
