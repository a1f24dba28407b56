package payments_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/refundd/refundd/payments"
)

// TestClient_Classification checks what each provider answer tells the
// executor: only answers that promise nothing was committed are certain.
func TestClient_Classification(t *testing.T) {
	t.Parallel()
	receipt := func(key string) string {
		return fmt.Sprintf(`{"key":%q,"ref":"re_x","status":"succeeded","order_ref":"order-1","amount":1250,"currency":"EUR","created_at":"2026-01-01T00:00:00Z"}`, key)
	}
	tests := []struct {
		name          string
		op            string // "refund" or "lookup"
		status        int
		body          string
		wantKind      error // nil: success
		wantUncertain bool
	}{
		{"refund 201", "refund", 201, receipt("op-1"), nil, false},
		{"refund 200 replay", "refund", 200, receipt("op-1"), nil, false},
		{"refund 200 unreadable", "refund", 200, `{"key":`, payments.ErrUncertain, true},
		{"refund 200 for another key", "refund", 200, receipt("op-2"), payments.ErrUncertain, true},
		{"refund 400", "refund", 400, `{"error":{"code":"invalid_amount","message":"m"}}`, payments.ErrInvalid, false},
		{"refund 401 without the secret", "refund", 401, `{"error":{"code":"unauthorized","message":"m"}}`, payments.ErrUnavailable, false},
		{"refund 421 wrong Host", "refund", 421, `{"error":{"code":"wrong_host","message":"m"}}`, payments.ErrUnavailable, false},
		{"refund 404 wrong URL", "refund", 404, `404 page not found`, payments.ErrInvalid, false},
		{"refund 408", "refund", 408, ``, payments.ErrUncertain, true},
		{"refund 409", "refund", 409, `{"error":{"code":"in_flight","message":"m"}}`, payments.ErrInFlight, true},
		{"refund 422", "refund", 422, `{"error":{"code":"idempotency_mismatch","message":"m"}}`, payments.ErrMismatch, false},
		{"refund 429", "refund", 429, ``, payments.ErrUnavailable, false},
		{"refund 500", "refund", 500, `{"error":{"code":"internal","message":"m"}}`, payments.ErrUncertain, true},
		{"refund 502 from a proxy", "refund", 502, `<html>bad gateway</html>`, payments.ErrUncertain, true},
		{"refund 503", "refund", 503, `{"error":{"code":"unavailable","message":"m"}}`, payments.ErrUnavailable, false},
		{"refund 504", "refund", 504, ``, payments.ErrUncertain, true},
		{"lookup 200", "lookup", 200, receipt("op-1"), nil, false},
		{"lookup 404 from the provider", "lookup", 404, `{"error":{"code":"not_found","message":"m"}}`, payments.ErrNotFound, false},
		{"lookup 404 from elsewhere", "lookup", 404, `404 page not found`, payments.ErrUncertain, true},
		{"lookup 409", "lookup", 409, `{"error":{"code":"in_flight","message":"m"}}`, payments.ErrInFlight, true},
		{"lookup 503", "lookup", 503, ``, payments.ErrUnavailable, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			t.Cleanup(ts.Close)
			c := payments.NewClient(ts.URL, 0)
			t.Cleanup(c.Close)

			var err error
			if tt.op == "lookup" {
				_, err = c.Lookup(t.Context(), "op-1")
			} else {
				_, err = c.Refund(t.Context(), refundReq("op-1"))
			}
			if tt.wantKind == nil {
				if err != nil {
					t.Fatalf("error = %v, want none", err)
				}
				return
			}
			if !errors.Is(err, tt.wantKind) {
				t.Errorf("error = %v, want kind %v", err, tt.wantKind)
			}
			if got, want := payments.Uncertain(err), tt.wantUncertain; got != want {
				t.Errorf("Uncertain(%v) = %v, want %v", err, got, want)
			}
		})
	}
}

func TestClient_ProviderUnreachable(t *testing.T) {
	t.Parallel()
	// A port that was just free: the dial is refused, nothing was sent.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	c := payments.NewClient("http://"+addr, 0)
	_, err = c.Refund(t.Context(), refundReq("op-1"))
	if !errors.Is(err, payments.ErrUnavailable) {
		t.Errorf("Refund error = %v, want ErrUnavailable", err)
	}
	if payments.Uncertain(err) {
		t.Errorf("Uncertain(%v) = true, want false: the request never left", err)
	}
}

func TestUncertain_ForeignErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"an error from elsewhere", errors.New("boom"), true},
		{"wrapped certain error", fmt.Errorf("executor: %w", &payments.Error{Kind: payments.ErrUnavailable}), false},
		{"wrapped uncertain error", fmt.Errorf("executor: %w", &payments.Error{Kind: payments.ErrUncertain}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := payments.Uncertain(tt.err); got != tt.want {
				t.Errorf("Uncertain(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
