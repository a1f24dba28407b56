package handlers

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// BenchmarkBodyGate reads bodies of MAX_BODY_BYTES through the gate: what
// it allocates per input byte (B/op over the body's size) is what a
// hostile body can cost. The
// nested bodies are refused at MAX_JSON_DEPTH; the others pass.
func BenchmarkBodyGate(b *testing.B) {
	const size = DefaultMaxBodyBytes
	nested := `{"email":` + strings.Repeat("[", (size-11)/2) + "1" + strings.Repeat("]", (size-11)/2) + "}"
	var many strings.Builder
	many.WriteString(`{"refunds":[`)
	for many.Len() < size-200 {
		many.WriteString(`{"order_id":1,"amount":100,"note":"caf\u00e9 \ud83d\ude00 refund"},`)
	}
	many.WriteString(`{}],"reason":"x"}`)
	form := url.Values{"reason": {strings.Repeat("refund please ", size/16)}}.Encode()
	for _, tc := range []struct {
		name, media, body string
		kind              bodyKind
	}{
		{"nested JSON", echo.MIMEApplicationJSON, nested, bodyJSON},
		{"many JSON strings", echo.MIMEApplicationJSON, many.String(), bodyJSON},
		{"nested as a form", echo.MIMEApplicationForm, "reason=" + nested[:len(nested)-7], bodyForm},
		{"form", echo.MIMEApplicationForm, form, bodyForm},
	} {
		b.Run(tc.name, func(b *testing.B) {
			gate := testGate(tc.kind)(func(echo.Context) error { return nil })
			e := echo.New()
			data := []byte(tc.body)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(data))
				req.Header.Set(echo.HeaderContentType, tc.media)
				_ = gate(e.NewContext(req, httptest.NewRecorder()))
			}
		})
	}
}
