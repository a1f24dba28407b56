package handlers_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/refundd/refundd/handlers"
)

// TestAPIStart_BadBytesRefused: NUL and invalid UTF-8 in the JSON reason
// or the Idempotency-Key used to reach PostgreSQL and come back as a 500.
// They are the client's mistake: refused in words, and no run is started.
func TestAPIStart_BadBytesRefused(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	for _, tc := range []struct {
		name, key, body string
		status          int
		code, says      string
	}{
		{"NUL escape in reason", "k1", `{"order_id":` + itoa(shoes.ID) + `,"amount":100,"reason":"torn\u0000sole"}`,
			http.StatusUnprocessableEntity, "invalid", "NUL"},
		{"control escape in reason", "k2", `{"order_id":` + itoa(shoes.ID) + `,"amount":100,"reason":"torn\u001b[2Jsole"}`,
			http.StatusUnprocessableEntity, "invalid", "control character"},
		// encoding/json would quietly turn the bad byte into U+FFFD.
		{"invalid UTF-8 in body", "k3", `{"order_id":` + itoa(shoes.ID) + `,"amount":100,"reason":"torn ` + "\xff" + ` sole"}`,
			http.StatusUnprocessableEntity, "invalid", "UTF-8"},
		{"lone surrogate in reason", "k5", `{"order_id":` + itoa(shoes.ID) + `,"amount":100,"reason":"torn \ud800 sole"}`,
			http.StatusUnprocessableEntity, "invalid", "surrogate"},
		{"invalid UTF-8 in Idempotency-Key", "k\xff4", startBody(shoes.ID, 100, "torn"),
			http.StatusUnprocessableEntity, "invalid", "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wantAPIError(t, a.apiStart(t, c, tc.key, tc.body), tc.status, tc.code)
			if !strings.Contains(e.Error.Message, tc.says) || strings.Contains(e.Error.Message, "pq:") {
				t.Errorf("message = %q, want words about %q and no database detail", e.Error.Message, tc.says)
			}
		})
	}
	if n := a.runsOf(t, "customer@example.com"); n != 0 {
		t.Errorf("runs = %d, want none", n)
	}
}

// TestStart_BadBytesRefused: the same through the form, in the reason and
// in the hidden request ID: a 422 page naming the field.
func TestStart_BadBytesRefused(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	for _, tc := range []struct {
		name string
		edit func(url.Values)
		says string
	}{
		{"NUL in reason", func(f url.Values) { f.Set("reason", "torn\x00sole") }, `"reason" contains a NUL`},
		{"invalid UTF-8 in reason", func(f url.Values) { f.Set("reason", "torn \xff sole") }, `"reason" is not valid UTF-8`},
		{"NUL in request ID", func(f url.Values) { f.Set("request_id", f.Get("request_id")+"\x00") }, `"request_id" contains a NUL`},
		{"invalid UTF-8 in request ID", func(f url.Values) { f.Set("request_id", f.Get("request_id")+"\xc3") }, `"request_id" is not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := a.startForm(t, c, shoes.ID, "1.00", "torn")
			tc.edit(form)
			r := a.post(t, c, "/runs", form)
			wantStatus(t, r, http.StatusUnprocessableEntity)
			if got := r.doc(t).Find("main").Text(); !strings.Contains(got, tc.says) {
				t.Errorf("page says %q, want it to say %q", got, tc.says)
			}
		})
	}
	if n := a.runsOf(t, "customer@example.com"); n != 0 {
		t.Errorf("runs = %d, want none", n)
	}
}

// TestSupportRuns_BadBytesRefused: a search for NUL or invalid UTF-8 is
// a 422 page naming the search, not a 500.
func TestSupportRuns_BadBytesRefused(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "support@example.com")
	for name, q := range map[string]string{"NUL": "cust\x00", "invalid UTF-8": "cust\xff"} {
		t.Run(name, func(t *testing.T) {
			r := a.get(t, c, "/support/runs?"+url.Values{"q": {q}}.Encode())
			wantStatus(t, r, http.StatusUnprocessableEntity)
			if got := r.doc(t).Find("main").Text(); !strings.Contains(got, `"q"`) {
				t.Errorf("page says %q, want it to name the search field q", got)
			}
		})
	}
}

// TestAPIStart_AmbiguousJSONRefused: encoding/json matches keys ignoring
// case and lets the last duplicate win, so {"AMOUNT":1,"Amount":2} used to
// start a run of 2. A body that could mean two things is refused.
func TestAPIStart_AmbiguousJSONRefused(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	order := `"order_id":` + itoa(a.order(t, "customer@example.com", "Trail running shoes").ID)
	for _, tc := range []struct{ name, body, says string }{
		{"case-folded duplicates", `{` + order + `,"AMOUNT":1,"Amount":2,"reason":"x"}`, `"AMOUNT"`},
		{"duplicate", `{` + order + `,"amount":1,"amount":2,"reason":"x"}`, `"amount"`},
		{"case-folded key", `{` + order + `,"Amount":1,"reason":"x"}`, `"Amount"`},
		{"unknown key", `{` + order + `,"amount":1,"reason":"x","note":"y"}`, `"note"`},
		{"not an object", `[1]`, "JSON object"},
		{"two objects", startBody(1, 1, "x") + startBody(1, 1, "x"), "more than one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wantAPIError(t, a.apiStart(t, c, "k-"+tc.name, tc.body), http.StatusBadRequest, "invalid_json")
			if !strings.Contains(e.Error.Message, tc.says) {
				t.Errorf("message = %q, want it to say %s", e.Error.Message, tc.says)
			}
		})
	}
	if n := a.runsOf(t, "customer@example.com"); n != 0 {
		t.Errorf("runs = %d, want none", n)
	}
}

// chunked is a body of unknown length, so the client sends it chunked and
// the server learns its size only by reading it.
type chunked struct{ io.Reader }

func postChunked(t *testing.T, a *app, c *http.Client, path, contentType, prefix string) response {
	t.Helper()
	body := io.MultiReader(strings.NewReader(prefix), strings.NewReader(strings.Repeat("x", 1<<20+1)))
	req, err := http.NewRequest(http.MethodPost, a.srv.URL+path, chunked{body})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Idempotency-Key", "chunked")
	return do(t, c, req)
}

// TestStart_ChunkedBodyTooLarge: a body over the limit without a
// Content-Length used to get 400 invalid_json (or an empty form); it gets
// 413, like one that declares its length.
func TestStart_ChunkedBodyTooLarge(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")

	t.Run("API", func(t *testing.T) {
		r := postChunked(t, a, c, "/api/runs", "application/json", `{"order_id":1,"amount":1,"reason":"`)
		wantAPIError(t, r, http.StatusRequestEntityTooLarge, "body_too_large")
	})
	t.Run("form", func(t *testing.T) {
		form := a.startForm(t, c, 1, "1.00", "")
		r := postChunked(t, a, c, "/runs", "application/x-www-form-urlencoded", form.Encode())
		wantStatus(t, r, http.StatusRequestEntityTooLarge)
		if got := r.doc(t).Find("main").Text(); !strings.Contains(got, "too large") {
			t.Errorf("page = %q, want it to say the request was too large", got)
		}
	})
	if n := a.runsOf(t, "customer@example.com"); n != 0 {
		t.Errorf("runs = %d, want none", n)
	}
}
