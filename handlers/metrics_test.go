package handlers_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/refundd/refundd/handlers"
)

// TestMetrics_LoopbackOnly: a scraper on this host reads the Prometheus
// text; any other address is refused in words.
func TestMetrics_LoopbackOnly(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	res, err := http.Get(a.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	for _, name := range []string{"refundd_streams_open", "refundd_claims_total", "go_goroutines", "process_open_fds"} {
		if !strings.Contains(string(body), name) {
			t.Errorf("no %s in /metrics", name)
		}
	}

	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.RemoteAddr = "203.0.113.7:40000"
	req.Host = "localhost"
	rec := httptest.NewRecorder()
	a.e.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "this host only") {
		t.Errorf("from 203.0.113.7: %d %q, want 403 in words", rec.Code, rec.Body.String())
	}

	// The profiles likewise: served here, refused elsewhere.
	res, err = http.Get(a.srv.URL + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Errorf("GET /debug/pprof/goroutine from loopback: %d %.80q", res.StatusCode, body)
	}
	req = httptest.NewRequest(http.MethodGet, "/debug/pprof/heap", nil)
	req.RemoteAddr = "203.0.113.7:40000"
	req.Host = "localhost"
	rec = httptest.NewRecorder()
	a.e.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "this host only") {
		t.Errorf("profile from 203.0.113.7: %d %q, want 403 in words", rec.Code, rec.Body.String())
	}
}
