package handlers_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/handlers"
)

// openAPIDoc fetches GET /api/openapi.json with no session (the document
// is public) from the server whose routes it is checked against.
func openAPIDoc(t *testing.T) (map[string]any, *echo.Echo) {
	t.Helper()
	e, err := handlers.New(handlers.Config{SessionKey: testSessionKey}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/api/openapi.json", nil)
	req.Host = "127.0.0.1"
	e.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/openapi.json: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	return doc, e
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// TestOpenAPI_MatchesRoutes: every /api/ route the server registers is
// documented with its method, and nothing is documented that is not routed.
func TestOpenAPI_MatchesRoutes(t *testing.T) {
	t.Parallel()
	doc, e := openAPIDoc(t)
	if v := doc["openapi"]; v != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", v)
	}
	// echo's :id is OpenAPI's {id}.
	param := regexp.MustCompile(`:([A-Za-z_]+)`)
	var routed []string
	for _, r := range e.Routes() {
		if strings.HasPrefix(r.Path, "/api/") {
			routed = append(routed, strings.ToLower(r.Method)+" "+param.ReplaceAllString(r.Path, "{$1}"))
		}
	}
	var documented []string
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		ops, _ := item.(map[string]any)
		for key, op := range ops {
			if !slices.Contains(httpMethods, key) {
				continue
			}
			documented = append(documented, key+" "+path)
			if o, _ := op.(map[string]any); o["responses"] == nil || o["summary"] == nil {
				t.Errorf("%s %s has no summary or no responses", key, path)
			}
		}
	}
	slices.Sort(routed)
	slices.Sort(documented)
	for _, r := range routed {
		if !slices.Contains(documented, r) {
			t.Errorf("routed but not documented: %s", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routed, d) {
			t.Errorf("documented but not routed: %s", d)
		}
	}
	if len(routed) < 9 {
		t.Errorf("only %d /api/ routes found: %v", len(routed), routed)
	}
}

// TestOpenAPI_RefsResolve: every $ref in the document names a component
// that exists, so tools that read it do not stop halfway.
func TestOpenAPI_RefsResolve(t *testing.T) {
	t.Parallel()
	doc, _ := openAPIDoc(t)
	var refs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "$ref" {
					refs = append(refs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	if len(refs) == 0 {
		t.Fatal("no $ref found")
	}
	for _, ref := range refs {
		var node any = doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			m, _ := node.(map[string]any)
			node = m[part]
		}
		if !strings.HasPrefix(ref, "#/") || node == nil {
			t.Errorf("$ref %q names nothing in the document", ref)
		}
	}
}
