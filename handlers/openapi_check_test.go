package handlers_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// The OpenAPI document, loaded once for checkOpenAPI.
var openAPIRouter = sync.OnceValues(func() (routers.Router, error) {
	data, err := os.ReadFile("openapi.json")
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	return gorillamux.NewRouter(doc)
})

// checkOpenAPI wraps every test server (newApp): each JSON answer of an
// /api/ route the tests get must be one the OpenAPI document lists, status
// (undocumented ones fail), headers and body. A path the document does not
// have (a 404 of the router) is not checked.
func checkOpenAPI(t testing.TB, next http.Handler) http.Handler {
	router, err := openAPIRouter()
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			next.ServeHTTP(w, r)
			return
		}
		rec := &recordedResponse{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			return
		}
		if err := validateResponse(router, r, rec); err != nil {
			body := rec.body.String()
			if len(body) > 500 {
				body = body[:500] + "…"
			}
			t.Errorf("%s %s answered %d, which openapi.json does not allow: %v\nbody: %s", r.Method, r.URL.Path, rec.status, err, body)
		}
	})
}

func validateResponse(router routers.Router, r *http.Request, rec *recordedResponse) error {
	// The router matches the document's servers ("/") by path.
	req := r.Clone(context.Background())
	req.URL.Scheme, req.URL.Host = "http", r.Host
	route, params, err := router.FindRoute(req)
	if errors.Is(err, routers.ErrPathNotFound) || errors.Is(err, routers.ErrMethodNotAllowed) {
		return nil
	}
	if err != nil {
		return err
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts},
		Status:                 rec.status,
		Header:                 rec.Header(),
		Body:                   io.NopCloser(bytes.NewReader(rec.body.Bytes())),
		Options:                opts,
	})
}

// recordedResponse passes a response on and keeps a copy to check (the
// start of it: a stream goes on). Through Unwrap a stream still flushes,
// sets deadlines and takes its connection over.
type recordedResponse struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recordedResponse) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recordedResponse) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len() < 1<<20 {
		r.body.Write(p)
	}
	return r.ResponseWriter.Write(p)
}

func (r *recordedResponse) Unwrap() http.ResponseWriter { return r.ResponseWriter }
