package payments

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
)

// FuzzReadReceipt holds the client's reading of the provider's answers to
// a refund or a lookup to the rule the executor stakes money on: an answer
// is either a receipt for our key with an outcome and a reference, or an
// *Error; and Uncertain is true exactly for the answers that cannot tell
// whether the refund committed: any 2xx we cannot read in full, a 408, a
// 409 (another request may commit), a 5xx other than 503, anything
// outside 2xx–5xx, and a lookup's 404 that is not the provider's own
// not_found. Only those may turn a run "verifying" rather than "failed".
func FuzzReadReceipt(f *testing.F) {
	for _, s := range receiptSeeds {
		f.Add(s.lookup, s.status, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, lookup bool, status uint16, body []byte) {
		op, key := "refund", "op-1"
		if lookup {
			op = "lookup"
		}
		code := int(status)
		if code < 100 || code > 999 {
			code = 100 + code%900 // a status line has three digits
		}
		rc, err := readReceipt(op, key, code, body)

		if err == nil {
			checkReceiptAsSent(t, op, key, code, body, rc)
			return
		}

		var e *Error
		if !errors.As(err, &e) || e.Op != op || e.Key != key || e.Status != code {
			t.Fatalf("%s %d %q = %v; want an *Error naming the op, the key and the status", op, code, body, err)
		}
		if rc != (Receipt{}) {
			t.Errorf("%s %d %q = %+v with an error; want no receipt", op, code, body, rc)
		}
		var eb struct {
			Error struct{ Code, Message string }
		}
		provider := json.Unmarshal(body, &eb) == nil
		wantKind := receiptErrorKind(code, lookup, provider && eb.Error.Code == CodeNotFound)
		if !errors.Is(err, wantKind) {
			t.Errorf("%s %d %q = %v; want kind %v", op, code, body, err, wantKind)
		}
		mayHaveCommitted := wantKind == ErrUncertain || wantKind == ErrInFlight
		if got := Uncertain(err); got != mayHaveCommitted {
			t.Errorf("Uncertain(%s %d %q) = %v, want %v", op, code, body, got, mayHaveCommitted)
		}
		if code/100 != 2 && provider && (e.Code != eb.Error.Code || e.Message != eb.Error.Message) {
			t.Errorf("%s %d %q: code %q, message %q; want the provider's %q, %q", op, code, body, e.Code, e.Message, eb.Error.Code, eb.Error.Message)
		}
	})
}

// receiptSeeds are the fuzz's seed answers: a refund's or a lookup's
// status and body.
var receiptSeeds = []struct {
	lookup bool
	status uint16
	body   string
}{
	{false, 201, seedReceipt},
	{true, 200, seedReceipt},
	{true, 200, `{"key":"op-1","ref":"re_y","status":"failed","failure_reason":"declined by the card issuer"}`},
	{false, 200, `{"key":`},
	{false, 200, `{"key":"op-2","ref":"re_x","status":"succeeded"}`},
	{false, 200, `{"key":"op-1","ref":"re_x","status":"succeeded","amount":"12.50"}`},
	{false, 200, `null`},
	{false, 204, ``},
	{false, 200, `{"error":{"code":"internal","message":"m"}}`},
	{false, 400, `{"error":{"code":"invalid_amount","message":"m"}}`},
	{false, 404, `404 page not found`},
	{false, 404, `{"error":{"code":"not_found","message":"m"}}`},
	{true, 404, `{"error":{"code":"not_found","message":"m"}}`},
	{true, 404, `404 page not found`},
	{true, 404, `{"error":{"code":"NOT_FOUND"}}`},
	{false, 408, ``},
	{true, 409, `{"error":{"code":"in_flight","message":"m"}}`},
	{false, 422, `{"error":{"code":"idempotency_mismatch","message":"m"}}`},
	{false, 429, ``},
	{false, 500, `{"error":{"code":"internal","message":"m"}}`},
	{false, 502, `<html>bad gateway</html>`},
	{true, 503, `{"error":{"code":"unavailable","message":"m"}}`},
	{false, 504, ``},
	{false, 302, ``},
	{true, 100, seedReceipt},
	{false, 999, seedReceipt},
}

// seedReceipt is a provider's receipt for the key op-1.
const seedReceipt = `{"key":"op-1","ref":"re_x","status":"succeeded","order_ref":"order-1","amount":1250,"currency":"EUR","created_at":"2026-01-01T00:00:00Z"}`

// checkReceiptAsSent holds a receipt read without error to the rule: a 2xx
// with a receipt for key, with an outcome and a reference, read as sent.
func checkReceiptAsSent(t *testing.T, op, key string, code int, body []byte, rc Receipt) {
	t.Helper()
	if code/100 != 2 || rc.Key != key || (rc.Status != StatusSucceeded && rc.Status != StatusFailed) || rc.Ref == "" {
		t.Fatalf("%s %d %q = %+v, nil; want an error unless it is a 2xx with a receipt for %q with an outcome and a reference", op, code, body, rc, key)
	}
	var want Receipt
	if json.Unmarshal(body, &want) != nil || !want.CreatedAt.Equal(rc.CreatedAt) {
		t.Fatalf("%s %d %q = %+v; want the receipt as sent, %+v", op, code, body, rc, want)
	}
	// Times from one offset carry distinct *Location values.
	want.CreatedAt = rc.CreatedAt
	if want != rc {
		t.Fatalf("%s %d %q = %+v; want the receipt as sent, %+v", op, code, body, rc, want)
	}
}

// receiptErrorKind is the kind of error an answer with status code that is
// not a readable receipt must give: providerNotFound says its body is the
// provider's own not_found error.
func receiptErrorKind(code int, lookup, providerNotFound bool) error {
	switch {
	case code/100 == 2:
		// Committed, perhaps: a receipt we cannot read says not what.
		return ErrUncertain
	case code == http.StatusNotFound && lookup && providerNotFound:
		return ErrNotFound
	case code == http.StatusNotFound && !lookup:
		return ErrInvalid
	case code == http.StatusNotFound:
		// A lookup's 404 from a proxy or a wrong URL says nothing.
		return ErrUncertain
	case code == http.StatusConflict:
		return ErrInFlight
	case code == http.StatusUnprocessableEntity:
		return ErrMismatch
	case code == http.StatusServiceUnavailable, code == http.StatusTooManyRequests:
		return ErrUnavailable
	case code == http.StatusUnauthorized, code == http.StatusMisdirectedRequest:
		// The provider refused us (secret, Host), not the refund.
		return ErrUnavailable
	case code == http.StatusRequestTimeout:
		return ErrUncertain
	case code/100 == 4:
		return ErrInvalid
	}
	return ErrUncertain
}
