package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
)

// formFields are the names of every form field and query parameter the
// handlers read.
var formFields = []string{"action", "after", "amount", "before", "email", "grant", "limit", "name", "next", "on",
	"order_id", "page", "password", "q", "queue_after", "reason", "request_id", "role", "run", "start", "state", "v"}

// FuzzClientText sends one text in every form field (urlencoded,
// multipart, and urlencoded past what url.ParseQuery reads), query
// parameter and JSON field (the API's bodies' and their decision reason,
// also as text/plain): the body gate passes it unchanged exactly when store.ValidText accepts it, and refuses
// it otherwise with a 422 naming the field. Spliced raw into JSON, it is
// never decoded into a rewritten text (U+FFFD in place of bad bytes or a
// lone surrogate).
func FuzzClientText(f *testing.F) {
	for _, s := range []string{"plain", "a\x00b", "caf\xff", "\x1b[31m", "line\nnext\ttab", "\\ud800", "\\ud83d\\ude00",
		"\\u0000", "\ufffd", "\\\\ud800", "x\r\ny", "\u0085"} {
		f.Add(s)
	}
	jsonFields := append(jsonFields(reflect.TypeFor[apiStartBody]()), "refunds[0].order_id", "refunds[0].amount")
	f.Fuzz(func(t *testing.T, s string) {
		valid := store.ValidText(s, true) == nil
		for _, field := range formFields {
			got, err := passForm(field, s, true)
			checkPassed(t, "form field "+field, field, s, got, err, valid)
			got, err = passForm(field, s, false)
			checkPassed(t, "query parameter "+field, field, s, got, err, valid)
			got, err = passMultipart(field, s)
			checkPassed(t, "multipart field "+field, field, s, got, err, valid)
			// A form url.ParseQuery cannot read is refused whole, never
			// read in part.
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(url.Values{field: {s}}.Encode()+"&z=1;2"))
			req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationForm)
			if got, err := passRequest(req, bodyForm, field); err == nil || bodyCode(err) != codeInvalidForm {
				t.Errorf("malformed form with %s=%q passed as %q (%v); want the whole body refused", field, s, got, err)
			}
		}
		for _, field := range jsonFields {
			body := jsonBody(field, strconv.Quote(s))
			if utf8.ValidString(s) {
				// strconv.Quote is JSON for valid UTF-8 but for \x escapes.
				b, _ := json.Marshal(s)
				body = jsonBody(field, string(b))
			}
			if _, err := passJSONAs(body, field, "text/plain"); bodyCode(err) != codeUnsupportedMedia {
				t.Errorf("JSON sent as text/plain answered %v; want %s", err, codeUnsupportedMedia)
			}
			got, err := passJSON(body, field)
			if utf8.ValidString(s) {
				checkPassed(t, "JSON field "+field, field, s, got, err, valid)
			}
			// s spliced raw: whatever it decodes to passes only as itself.
			raw := jsonBody(field, `"`+s+`"`)
			if got, err := passJSON(raw, field); err == nil && json.Valid([]byte(raw)) {
				if !utf8.ValidString(raw) || store.ValidText(got, true) != nil ||
					strings.Count(got, "\ufffd") > strings.Count(s, "\ufffd")+strings.Count(strings.ToLower(s), `\ufffd`) {
					t.Errorf("JSON %q passed as %q: rewritten or not text", raw, got)
				}
			}
		}
	})
}

// checkPassed checks one field's fate: passed unchanged when valid, else a
// 422 naming it.
func checkPassed(t *testing.T, what, field, sent, got string, err error, valid bool) {
	t.Helper()
	switch {
	case valid && err != nil:
		t.Errorf("%s %q refused: %v", what, sent, err)
	case valid && got != sent:
		t.Errorf("%s %q reached the handler as %q", what, sent, got)
	case !valid && err == nil:
		t.Errorf("%s %q passed; want a 422", what, sent)
	case !valid && (store.ErrorCode(err) != store.CodeInvalid || !strings.Contains(err.Error(), strconv.Quote(field))):
		t.Errorf("%s %q refused with %v; want the 422 naming %q", what, sent, err, field)
	}
}

// testGate is the body gate of a route "/" taking kind when posted.
func testGate(kind bodyKind) echo.MiddlewareFunc {
	g := &bodyGate{maxBytes: DefaultMaxBodyBytes, maxDepth: DefaultMaxJSONDepth, timeout: time.Second,
		kinds: map[string]bodyKind{"POST ": kind, "GET ": bodyNone}}
	return g.readBody
}

// passForm runs the gate over s in field, as a form (or query) value, and
// returns what the handler then reads.
func passForm(field, s string, form bool) (string, error) {
	v := url.Values{field: {s}}.Encode()
	req := httptest.NewRequest(http.MethodGet, "/?"+v, nil)
	if form {
		req = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(v))
		req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationForm)
	}
	return passRequest(req, bodyForm, field)
}

// passMultipart runs the gate over s in field of a multipart form.
func passMultipart(field, s string) (string, error) {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	_ = w.WriteField(field, s)
	_ = w.Close()
	req := httptest.NewRequest(http.MethodPost, "/", &body)
	req.Header.Set(echo.HeaderContentType, w.FormDataContentType())
	return passRequest(req, bodyForm, field)
}

// passRequest runs the gate of a route taking kind over req and returns
// the form value field as the handler then reads it.
func passRequest(req *http.Request, kind bodyKind, field string) (string, error) {
	var got string
	err := testGate(kind)(func(c echo.Context) error {
		got = c.FormValue(field)
		return nil
	})(echo.New().NewContext(req, httptest.NewRecorder()))
	return got, err
}

// passJSON runs the gate over a JSON body and returns the string the
// handler decodes at path ("a" or "refunds[0].a").
func passJSON(body, path string) (string, error) {
	return passJSONAs(body, path, echo.MIMEApplicationJSON)
}

// passJSONAs is passJSON with the body sent as media.
func passJSONAs(body, path, media string) (string, error) {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set(echo.HeaderContentType, media)
	var got string
	err := testGate(bodyJSON)(func(c echo.Context) error {
		data, _ := io.ReadAll(c.Request().Body)
		var doc map[string]any
		if json.Unmarshal(data, &doc) != nil {
			return nil
		}
		outer, inner, nested := strings.Cut(path, "[0].")
		if !nested {
			got, _ = doc[outer].(string)
			return nil
		}
		if list, _ := doc[outer].([]any); len(list) > 0 {
			m, _ := list[0].(map[string]any)
			got, _ = m[inner].(string)
		}
		return nil
	})(echo.New().NewContext(req, httptest.NewRecorder()))
	return got, err
}

// bodyCode is the code of the gate's refusal err, or "".
func bodyCode(err error) string {
	var bb *badBody
	if errors.As(err, &bb) {
		return bb.code
	}
	return ""
}

// jsonBody is a JSON object holding value (JSON text) at path.
func jsonBody(path, value string) string {
	outer, inner, nested := strings.Cut(path, "[0].")
	if nested {
		return `{"` + outer + `":[{"` + inner + `":` + value + `}]}`
	}
	return `{"` + path + `":` + value + `}`
}
