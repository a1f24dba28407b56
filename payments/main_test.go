package payments_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"

	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// provider is a simulated provider on loopback over a fresh database.
type provider struct {
	sim    *payments.Sim
	url    string
	db     *sqlx.DB
	client *payments.Client
}

// mustStartProvider starts a Sim with faults behind an httptest server and a
// Client for it with the given per-request timeout (0: the default).
func mustStartProvider(tb testing.TB, faults payments.Faults, timeout time.Duration) *provider {
	tb.Helper()
	db, err := sqlx.Open("postgres", storetest.URL(tb))
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	db.SetMaxOpenConns(8)
	tb.Cleanup(func() { db.Close() })
	p := testkit.StartProvider(tb, db, faults, timeout)
	return &provider{sim: p.Sim, url: p.URL, db: db, client: p.Client}
}

// ledgerRows counts the provider's committed refunds straight from its table.
func (p *provider) ledgerRows(tb testing.TB) int {
	tb.Helper()
	var n int
	if err := p.db.Get(&n, `SELECT count(*) FROM provider_refunds`); err != nil {
		tb.Fatalf("count provider_refunds: %v", err)
	}
	return n
}

// post sends a raw POST /refunds and returns the status and body.
func (p *provider) post(tb testing.TB, key, body string) (int, []byte) {
	tb.Helper()
	status, b, err := p.tryPost(key, body)
	if err != nil {
		tb.Fatal(err)
	}
	return status, b
}

// tryPost is post for goroutines other than the test's own.
func (p *provider) tryPost(key, body string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, p.url+"/refunds", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.sim.Secret())
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func do(tb testing.TB, req *http.Request) (int, []byte) {
	tb.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, b
}

// errorCode extracts the code of a {"error":{"code","message"}} body.
func errorCode(tb testing.TB, body []byte) string {
	tb.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		tb.Fatalf("error body %q is not JSON: %v", body, err)
	}
	if e.Error.Message == "" {
		tb.Errorf("error body %q has no message", body)
	}
	return e.Error.Code
}

func refundReq(key string) payments.RefundRequest {
	return payments.RefundRequest{Key: key, OrderRef: "order-1", Amount: 1250, Currency: "EUR"}
}
