package handlers_test

import (
	"bufio"
	"bytes"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/handlers"
)

// nestedBody is a JSON body of exactly size bytes whose one field nests
// arrays as deep as the size allows: {"email":[[[…1…]]]}.
func nestedBody(size int) []byte {
	depth := (size - len(`{"email":1}`)) / 2
	var b bytes.Buffer
	b.WriteString(`{"email":`)
	b.WriteString(strings.Repeat("[", depth))
	b.WriteString("1")
	b.WriteString(strings.Repeat("]", depth))
	b.WriteString("}")
	for b.Len() < size {
		b.WriteByte(' ')
	}
	return b.Bytes()
}

// allocatedBy is how many bytes the process allocated while f ran.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileBody_NestedMegabyteToEveryRoute: a body of MAX_BODY_BYTES
// nested as deep as it goes, sent to every route before login as JSON, as
// text/plain and as a form, costs the process at most a small multiple of
// the body: the text validator's walk kept a path per open level, so such
// a body of 20 KB took 160 MB and one of 400 KB took 23 GB. Everything it
// allocates is counted (runtime.MemStats.TotalAlloc), an upper bound on
// what the heap can grow by. Not parallel: nothing else allocates meanwhile.
func TestHostileBody_NestedMegabyteToEveryRoute(t *testing.T) {
	a := newApp(t, handlers.Config{})
	body := nestedBody(handlers.DefaultMaxBodyBytes)
	formBody := append([]byte("email="), body[:len(body)-len("email=")]...)
	const bound = 3 * handlers.DefaultMaxBodyBytes
	var worst uint64
	for _, r := range a.e.Routes() {
		path := strings.NewReplacer(":id", "00000000-0000-0000-0000-000000000001", "*", "x").Replace(r.Path)
		for _, tc := range []struct {
			media string
			body  []byte
		}{
			{"application/json", body},
			{"text/plain", body},
			{"application/x-www-form-urlencoded", formBody},
		} {
			req := httptest.NewRequest(r.Method, path, bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.media)
			req.Host = "127.0.0.1"
			rec := httptest.NewRecorder()
			n := allocatedBy(func() { a.e.ServeHTTP(rec, req) })
			worst = max(worst, n)
			if n > bound {
				t.Errorf("%s %s as %s: allocated %d bytes for a body of %d (status %d); want at most %d",
					r.Method, r.Path, tc.media, n, len(tc.body), rec.Code, bound)
			}
			if rec.Code >= 500 {
				t.Errorf("%s %s as %s: status %d", r.Method, r.Path, tc.media, rec.Code)
			}
		}
	}
	t.Logf("most allocated by one request: %d bytes for a body of %d (%.2f× the body)", worst, len(body), float64(worst)/float64(len(body)))
}

// TestHostileBody_Refusals: what the gate answers each kind of hostile or
// malformed body, in words and with a code, changing nothing.
func TestHostileBody_Refusals(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.awaitingApproval(t, "customer@example.com")
	approve := "/api/runs/" + run.ID.String() + "/approve"
	approver := a.client(t)
	a.login(t, approver, "approver@example.com")
	customer := a.client(t)
	a.login(t, customer, "customer@example.com")
	jsonType := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "hostile"}
	deep := func(depth int) string {
		return `{"reason":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
	}
	var mp bytes.Buffer
	w := multipart.NewWriter(&mp)
	_ = w.WriteField("reason", "\x1b[2J\x1b[31mRED\a")
	_ = w.Close()
	for _, tc := range []struct {
		name         string
		c            *http.Client
		method, path string
		hdr          map[string]string
		body         string
		status       int
		code, words  string
	}{
		{"a body on GET", customer, http.MethodGet, "/api/runs", jsonType, `{}`, 400, "body_not_allowed", "carries no body"},
		{"a body on the health check", customer, http.MethodGet, "/healthz", jsonType, `{}`, 400, "", "carries no body"},
		{"JSON as text/plain", customer, http.MethodPost, "/api/runs", map[string]string{"Content-Type": "text/plain", "Idempotency-Key": "k"},
			`{"order_id":1,"amount":1,"reason":"a\ud800b"}`, 415, "unsupported_media_type", "application/json"},
		{"JSON without a type", customer, http.MethodPost, "/api/runs", map[string]string{"Idempotency-Key": "k"},
			`{"order_id":1,"amount":1,"reason":"x"}`, 415, "unsupported_media_type", "application/json"},
		{"a form too deep", customer, http.MethodPost, "/api/runs", jsonType, deep(64), 400, "invalid_json", "deeper than 64 levels"},
		{"no JSON", customer, http.MethodPost, "/api/runs", jsonType, `{"reason":`, 400, "invalid_json", "not a valid JSON document"},
		{"a form url.ParseQuery refuses", approver, http.MethodPost, approve, map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			"reason=x%00&z=1;2", 400, "invalid_form", "not valid URL encoding"},
		{"control characters in a multipart reason", approver, http.MethodPost, approve, map[string]string{"Content-Type": w.FormDataContentType()},
			mp.String(), 422, "invalid", `\"reason\"`},
		{"a multipart file", approver, http.MethodPost, "/runs/" + run.ID.String() + "/approve",
			map[string]string{"Content-Type": "multipart/form-data; boundary=b"},
			"--b\r\nContent-Disposition: form-data; name=\"reason\"; filename=\"x.txt\"\r\n\r\nhi\r\n--b--\r\n", 422, "", "no files"},
		{"control characters in a JSON reason", approver, http.MethodPost, approve, jsonType, `{"reason":"\u001b[2J"}`, 422, "invalid", `\"reason\"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.send(t, tc.c, tc.method, tc.path, tc.hdr, tc.body)
			wantStatus(t, r, tc.status)
			if tc.code != "" && !strings.Contains(r.body, `"code":"`+tc.code+`"`) {
				t.Errorf("the answer has no code %q:\n%s", tc.code, r.body)
			}
			if !strings.Contains(r.body, tc.words) {
				t.Errorf("the answer does not say %q:\n%s", tc.words, r.body)
			}
		})
	}
	t.Run("nothing changed", func(t *testing.T) {
		if n := a.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'approval.granted'`, run.ID); n != 0 {
			t.Errorf("%d approvals recorded, want none", n)
		}
		if n := a.count(t, `SELECT count(*) FROM runs`); n != 1 {
			t.Errorf("%d runs, want the one that was there", n)
		}
	})
	t.Run("64 levels pass the gate", func(t *testing.T) {
		r := a.send(t, customer, http.MethodPost, "/api/runs", jsonType, deep(63)) // and the object
		wantStatus(t, r, http.StatusBadRequest)
		if !strings.Contains(r.body, "wrong type") {
			t.Errorf("a body 64 levels deep was not read by the handler:\n%s", r.body)
		}
	})
	t.Run("a JSON reason is the reason", func(t *testing.T) {
		r := a.send(t, approver, http.MethodPost, approve, map[string]string{"Content-Type": "application/json"}, `{"reason":"checked the receipt"}`)
		wantStatus(t, r, http.StatusOK)
		if n := a.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'approval.granted' AND payload->>'reason' = 'checked the receipt'`, run.ID); n != 1 {
			t.Errorf("%d approvals with the JSON reason, want 1", n)
		}
	})
}

// TestHostileBody_SlowBodyCutAtTheRequestDeadline: a client that sends its
// headers and then its body slowly is answered 408 at REQUEST_TIMEOUT, not
// held for the server's ReadTimeout (30 s).
func TestHostileBody_SlowBodyCutAtTheRequestDeadline(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{RequestTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(a.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = conn.Write([]byte("POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nemail="))
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a body that never arrived: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status = %d, want 408", res.StatusCode)
	}
}
