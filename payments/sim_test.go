package payments_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
)

func TestRefund_SameKeyReturnsSameReceipt(t *testing.T) {
	t.Parallel()
	p := mustStartProvider(t, payments.Faults{}, 0)
	body := `{"order_ref":"order-1","amount":1250,"currency":"EUR"}`

	status1, b1 := p.post(t, "op-1", body)
	status2, b2 := p.post(t, "op-1", body)
	if got, want := status1, http.StatusCreated; got != want {
		t.Errorf("first POST status = %d, want %d", got, want)
	}
	if got, want := status2, http.StatusOK; got != want {
		t.Errorf("second POST status = %d, want %d", got, want)
	}
	if string(b1) != string(b2) {
		t.Errorf("receipts differ:\nfirst  %s\nsecond %s", b1, b2)
	}

	rc, err := p.client.Refund(t.Context(), refundReq("op-1"))
	if err != nil {
		t.Fatalf("client Refund: %v", err)
	}
	var first payments.Receipt
	if err := json.Unmarshal(b1, &first); err != nil {
		t.Fatal(err)
	}
	if got, want := rc, first; got != want {
		t.Errorf("client receipt = %+v, want %+v", got, want)
	}
	if rc.Status != payments.StatusSucceeded || !strings.HasPrefix(rc.Ref, "re_") || rc.CreatedAt.IsZero() {
		t.Errorf("receipt = %+v, want a succeeded refund with a re_ reference and a time", rc)
	}
	if got, want := p.ledgerRows(t), 1; got != want {
		t.Errorf("ledger rows = %d, want %d", got, want)
	}
}

func TestRefund_KeyReusedWithOtherParams(t *testing.T) {
	t.Parallel()
	p := mustStartProvider(t, payments.Faults{}, 0)
	orig := refundReq("op-1")
	if _, err := p.client.Refund(t.Context(), orig); err != nil {
		t.Fatalf("first Refund: %v", err)
	}
	tests := []struct {
		name   string
		change func(*payments.RefundRequest)
	}{
		{"other amount", func(r *payments.RefundRequest) { r.Amount++ }},
		{"other currency", func(r *payments.RefundRequest) { r.Currency = "USD" }},
		{"other order", func(r *payments.RefundRequest) { r.OrderRef = "order-2" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := orig
			tt.change(&req)
			_, err := p.client.Refund(t.Context(), req)
			if !errors.Is(err, payments.ErrMismatch) {
				t.Fatalf("Refund error = %v, want ErrMismatch", err)
			}
			var pe *payments.Error
			if !errors.As(err, &pe) || pe.Status != http.StatusUnprocessableEntity || pe.Code != payments.CodeMismatch {
				t.Errorf("error = %#v, want HTTP 422 %s", pe, payments.CodeMismatch)
			}
			if payments.Uncertain(err) {
				t.Errorf("Uncertain(%v) = true, want false", err)
			}
		})
	}
	if got, want := p.ledgerRows(t), 1; got != want {
		t.Errorf("ledger rows = %d, want %d", got, want)
	}
}

func TestRefund_SameKeyInFlight(t *testing.T) {
	t.Parallel()
	// The first request stays in flight until its caller gives up.
	p := mustStartProvider(t, payments.Faults{Latency: time.Hour}, 0)
	ctx, giveUp := context.WithCancel(t.Context())
	firstErr := make(chan error, 1)
	go func() {
		_, err := p.client.Refund(ctx, refundReq("op-1"))
		firstErr <- err
	}()
	testkit.WaitUntil(t, "the first refund to be in flight", 10*time.Second, func() bool {
		_, err := p.client.Lookup(t.Context(), "op-1")
		return errors.Is(err, payments.ErrInFlight)
	})

	_, err := p.client.Refund(t.Context(), refundReq("op-1"))
	if !errors.Is(err, payments.ErrInFlight) {
		t.Fatalf("second Refund error = %v, want ErrInFlight", err)
	}
	if !payments.Uncertain(err) {
		t.Errorf("Uncertain(%v) = false, want true: the first request may still commit", err)
	}

	giveUp()
	if err := <-firstErr; !payments.Uncertain(err) {
		t.Errorf("abandoned Refund error = %v, want an uncertain error", err)
	}
	// The abandoned request rolls back: the key becomes free, never committed.
	testkit.WaitUntil(t, "the abandoned refund to roll back", 10*time.Second, func() bool {
		_, err := p.client.Lookup(t.Context(), "op-1")
		return errors.Is(err, payments.ErrNotFound)
	})
	if got, want := p.ledgerRows(t), 0; got != want {
		t.Errorf("ledger rows = %d, want %d", got, want)
	}
}

func TestRefund_ConcurrentSameKeyCommitsOnce(t *testing.T) {
	t.Parallel()
	p := mustStartProvider(t, payments.Faults{}, 0)
	const n = 50
	body := `{"order_ref":"order-1","amount":1250,"currency":"EUR"}`
	type result struct {
		status int
		body   []byte
		err    error
	}
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			status, b, err := p.tryPost("op-race", body)
			results[i] = result{status, b, err}
		})
	}
	close(start)
	wg.Wait()

	created, replayed, inFlight := 0, 0, 0
	var receipts []string
	for i, r := range results {
		if r.err != nil {
			t.Errorf("request %d: %v", i, r.err)
			continue
		}
		switch r.status {
		case http.StatusCreated:
			created++
			receipts = append(receipts, string(r.body))
		case http.StatusOK:
			replayed++
			receipts = append(receipts, string(r.body))
		case http.StatusConflict:
			inFlight++
			if got, want := errorCode(t, r.body), payments.CodeInFlight; got != want {
				t.Errorf("request %d: 409 code = %q, want %q", i, got, want)
			}
		default:
			t.Errorf("request %d: status %d (%s), want 201, 200 or 409", i, r.status, r.body)
		}
	}
	t.Logf("201: %d, 200: %d, 409: %d", created, replayed, inFlight)
	if got, want := created, 1; got != want {
		t.Errorf("201 answers = %d, want %d", got, want)
	}
	for _, rc := range receipts[1:] {
		if rc != receipts[0] {
			t.Errorf("receipt %s differs from %s", rc, receipts[0])
		}
	}
	if got, want := p.ledgerRows(t), 1; got != want {
		t.Errorf("ledger rows = %d, want %d", got, want)
	}
}

func TestLookup_BeforeAndAfterCommit(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, key string }{
		{"plain key", "op-1"},
		{"uuid key", "018f3c1e-7b2a-7cde-8f00-1234567890ab"},
		{"key with slash, space and percent", "op/1 x%2F"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustStartProvider(t, payments.Faults{}, 0)

			_, err := p.client.Lookup(t.Context(), tt.key)
			if !errors.Is(err, payments.ErrNotFound) {
				t.Fatalf("Lookup before = %v, want ErrNotFound", err)
			}
			if payments.Uncertain(err) {
				t.Errorf("Uncertain(%v) = true, want false", err)
			}

			want, err := p.client.Refund(t.Context(), refundReq(tt.key))
			if err != nil {
				t.Fatalf("Refund: %v", err)
			}
			got, err := p.client.Lookup(t.Context(), tt.key)
			if err != nil {
				t.Fatalf("Lookup after: %v", err)
			}
			if got != want {
				t.Errorf("Lookup = %+v, want %+v", got, want)
			}

			ledger, err := p.client.Ledger(t.Context())
			if err != nil {
				t.Fatalf("Ledger: %v", err)
			}
			if len(ledger) != 1 || ledger[0] != want {
				t.Errorf("Ledger = %+v, want [%+v]", ledger, want)
			}
		})
	}
}

func TestRefund_FailBeforeCommit(t *testing.T) {
	t.Parallel()
	p := mustStartProvider(t, payments.Faults{FailBeforeCommit: true}, 0)

	_, err := p.client.Refund(t.Context(), refundReq("op-1"))
	if !errors.Is(err, payments.ErrUnavailable) {
		t.Fatalf("Refund error = %v, want ErrUnavailable", err)
	}
	if payments.Uncertain(err) {
		t.Errorf("Uncertain(%v) = true, want false: nothing was committed", err)
	}
	if got, want := p.ledgerRows(t), 0; got != want {
		t.Errorf("ledger rows = %d, want %d", got, want)
	}
	if _, err := p.client.Lookup(t.Context(), "op-1"); !errors.Is(err, payments.ErrNotFound) {
		t.Errorf("Lookup = %v, want ErrNotFound", err)
	}

	// Once the provider recovers, the same key goes through.
	if err := p.sim.SetFaults(payments.Faults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.client.Refund(t.Context(), refundReq("op-1")); err != nil {
		t.Fatalf("Refund after recovery: %v", err)
	}
	if got, want := p.ledgerRows(t), 1; got != want {
		t.Errorf("ledger rows = %d, want %d", got, want)
	}
}

func TestRefund_CommitThenDrop(t *testing.T) {
	t.Parallel()
	// The client's timeout must outlast the commit, or the provider sees
	// the caller gone first and commits nothing (a loaded machine took
	// more than 300 ms): the first case waits it out, the second never.
	tests := []struct {
		name      string
		dropAfter time.Duration
		timeout   time.Duration
		wantErr   error // besides being uncertain
	}{
		{"held until the client times out", 0, 2 * time.Second, context.DeadlineExceeded},
		{"connection closed without an answer", time.Millisecond, time.Minute, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustStartProvider(t, payments.Faults{CommitThenDrop: true, DropAfter: tt.dropAfter}, tt.timeout)

			_, err := p.client.Refund(t.Context(), refundReq("op-1"))
			if err == nil {
				t.Fatal("Refund succeeded, want an error")
			}
			if !payments.Uncertain(err) {
				t.Errorf("Uncertain(%v) = false, want true: the refund committed", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Refund error = %v, want it to match %v", err, tt.wantErr)
			}

			// Reconciliation finds what really happened.
			rc, err := p.client.Lookup(t.Context(), "op-1")
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			if rc.Status != payments.StatusSucceeded || rc.Amount != 1250 || rc.Currency != "EUR" {
				t.Errorf("Lookup = %+v, want the succeeded 1250 EUR refund", rc)
			}
			if got, want := p.ledgerRows(t), 1; got != want {
				t.Errorf("ledger rows = %d, want %d", got, want)
			}
		})
	}
}

func TestRefund_HoldAfterCommit(t *testing.T) {
	t.Parallel()
	p := mustStartProvider(t, payments.Faults{HoldAfterCommit: true}, 0)
	type answer struct {
		rc  payments.Receipt
		err error
	}
	done := make(chan answer, 1)
	go func() {
		rc, err := p.client.Refund(t.Context(), refundReq("op-1"))
		done <- answer{rc, err}
	}()

	var committed payments.Receipt
	testkit.WaitUntil(t, "the held refund to commit", 10*time.Second, func() bool {
		rc, err := p.client.Lookup(t.Context(), "op-1")
		committed = rc
		return err == nil
	})
	select {
	case a := <-done:
		t.Fatalf("Refund answered while held: %+v, %v", a.rc, a.err)
	default:
	}

	p.sim.Release()
	a := <-done
	if a.err != nil {
		t.Fatalf("Refund after release: %v", a.err)
	}
	if got, want := a.rc, committed; got != want {
		t.Errorf("receipt = %+v, want the committed %+v", got, want)
	}
}

func TestRefund_Error5xx(t *testing.T) {
	t.Parallel()
	t.Run("next N", func(t *testing.T) {
		t.Parallel()
		p := mustStartProvider(t, payments.Faults{Error5xxNext: 2}, 0)
		for i := range 2 {
			_, err := p.client.Refund(t.Context(), refundReq("op-1"))
			if !errors.Is(err, payments.ErrUnavailable) || payments.Uncertain(err) {
				t.Fatalf("attempt %d: error = %v, want a certain ErrUnavailable", i+1, err)
			}
		}
		if got, want := p.sim.Faults().Error5xxNext, 0; got != want {
			t.Errorf("Error5xxNext after two failures = %d, want %d", got, want)
		}
		if _, err := p.client.Refund(t.Context(), refundReq("op-1")); err != nil {
			t.Fatalf("third attempt: %v", err)
		}
		if got, want := p.ledgerRows(t), 1; got != want {
			t.Errorf("ledger rows = %d, want %d", got, want)
		}
	})
	t.Run("rate 1", func(t *testing.T) {
		t.Parallel()
		p := mustStartProvider(t, payments.Faults{Error5xxRate: 1}, 0)
		for i := range 3 {
			status, body := p.post(t, fmt.Sprintf("op-%d", i), `{"order_ref":"o","amount":1,"currency":"EUR"}`)
			if status != http.StatusServiceUnavailable || errorCode(t, body) != payments.CodeUnavailable {
				t.Errorf("POST %d = %d %s, want 503 %s", i, status, body, payments.CodeUnavailable)
			}
		}
		if got, want := p.ledgerRows(t), 0; got != want {
			t.Errorf("ledger rows = %d, want %d", got, want)
		}
	})
	t.Run("lookup next N", func(t *testing.T) {
		t.Parallel()
		p := mustStartProvider(t, payments.Faults{LookupError5xxNext: 1}, 0)
		if _, err := p.client.Lookup(t.Context(), "op-1"); !errors.Is(err, payments.ErrUnavailable) {
			t.Errorf("first Lookup = %v, want ErrUnavailable", err)
		}
		if _, err := p.client.Lookup(t.Context(), "op-1"); !errors.Is(err, payments.ErrNotFound) {
			t.Errorf("second Lookup = %v, want ErrNotFound", err)
		}
	})
}

func TestRefund_Declined(t *testing.T) {
	t.Parallel()
	p := mustStartProvider(t, payments.Faults{DeclineNext: 1}, 0)

	rc, err := p.client.Refund(t.Context(), refundReq("op-1"))
	if err != nil {
		t.Fatalf("Refund: %v", err)
	}
	if rc.Status != payments.StatusFailed || rc.FailureReason == "" {
		t.Errorf("receipt = %+v, want a failed refund with a reason", rc)
	}
	again, err := p.client.Refund(t.Context(), refundReq("op-1"))
	if err != nil || again != rc {
		t.Errorf("replay = %+v, %v; want the same declined receipt %+v", again, err, rc)
	}
	next, err := p.client.Refund(t.Context(), refundReq("op-2"))
	if err != nil || next.Status != payments.StatusSucceeded {
		t.Errorf("next refund = %+v, %v; want succeeded", next, err)
	}
}

func TestRefund_BadInput(t *testing.T) {
	t.Parallel()
	p := mustStartProvider(t, payments.Faults{}, 0)
	tests := []struct {
		name     string
		key      string
		body     string
		wantCode string
	}{
		{"missing key", "", `{"order_ref":"o","amount":1,"currency":"EUR"}`, payments.CodeMissingKey},
		{"key too long", strings.Repeat("k", payments.MaxKeyLen+1), `{"order_ref":"o","amount":1,"currency":"EUR"}`, payments.CodeInvalidKey},
		{"not JSON", "k1", `order_ref=o`, payments.CodeInvalidJSON},
		{"two objects", "k2", `{"order_ref":"o","amount":1,"currency":"EUR"}{}`, payments.CodeInvalidJSON},
		{"unknown field", "k3", `{"order_ref":"o","amount":1,"currency":"EUR","tip":5}`, payments.CodeInvalidJSON},
		{"amount as string", "k4", `{"order_ref":"o","amount":"1","currency":"EUR"}`, payments.CodeInvalidJSON},
		{"fractional amount", "k5", `{"order_ref":"o","amount":1.5,"currency":"EUR"}`, payments.CodeInvalidJSON},
		{"zero amount", "k6", `{"order_ref":"o","amount":0,"currency":"EUR"}`, payments.CodeInvalidAmount},
		{"negative amount", "k7", `{"order_ref":"o","amount":-5,"currency":"EUR"}`, payments.CodeInvalidAmount},
		{"lower-case currency", "k8", `{"order_ref":"o","amount":1,"currency":"eur"}`, payments.CodeInvalidCurrency},
		{"missing currency", "k9", `{"order_ref":"o","amount":1}`, payments.CodeInvalidCurrency},
		{"missing order", "k10", `{"amount":1,"currency":"EUR"}`, payments.CodeInvalidOrderRef},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, body := p.post(t, tt.key, tt.body)
			if got, want := status, http.StatusBadRequest; got != want {
				t.Fatalf("status = %d (%s), want %d", got, body, want)
			}
			if got, want := errorCode(t, body), tt.wantCode; got != want {
				t.Errorf("code = %q, want %q", got, want)
			}
		})
	}
	t.Run("through the client", func(t *testing.T) {
		t.Parallel()
		req := refundReq("k-client")
		req.Amount = 0
		_, err := p.client.Refund(t.Context(), req)
		if !errors.Is(err, payments.ErrInvalid) || payments.Uncertain(err) {
			t.Errorf("Refund error = %v, want a certain ErrInvalid", err)
		}
	})
	t.Cleanup(func() {
		if got, want := p.ledgerRows(t), 0; got != want {
			t.Errorf("ledger rows = %d, want %d", got, want)
		}
	})
}

func TestAdminFaults(t *testing.T) {
	t.Parallel()
	p := mustStartProvider(t, payments.Faults{}, 0)

	want := payments.Faults{Latency: 250 * time.Millisecond, Error5xxNext: 3, CommitThenDrop: true, DropAfter: time.Second}
	if err := p.client.SetFaults(t.Context(), want); err != nil {
		t.Fatalf("SetFaults: %v", err)
	}
	if got := p.sim.Faults(); got != want {
		t.Errorf("Sim.Faults = %+v, want %+v", got, want)
	}
	req, _ := http.NewRequest(http.MethodGet, p.url+"/admin/faults", nil)
	status, body := do(t, req)
	if status != http.StatusOK || !strings.Contains(string(body), `"latency":"250ms"`) {
		t.Errorf("GET /admin/faults = %d %s, want 200 with \"latency\":\"250ms\"", status, body)
	}

	bad := []struct{ name, body string }{
		{"negative latency", `{"latency":"-1s"}`},
		{"not a duration", `{"latency":"soon"}`},
		{"misspelt setting", `{"fail_befor_commit":true}`},
		{"rate above one", `{"error_5xx_rate":2}`},
		{"drop and hold", `{"commit_then_drop":true,"hold_after_commit":true}`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPut, p.url+"/admin/faults", strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+p.sim.Secret())
			status, body := do(t, req)
			if status != http.StatusBadRequest || errorCode(t, body) != payments.CodeInvalidFaults {
				t.Errorf("PUT %s = %d %s, want 400 %s", tt.body, status, body, payments.CodeInvalidFaults)
			}
		})
	}
	if got := p.sim.Faults(); got != want {
		t.Errorf("after bad PUTs Sim.Faults = %+v, want unchanged %+v", got, want)
	}
}

func TestServer_StopEndsHeldAnswers(t *testing.T) {
	t.Parallel()
	p := mustStartProvider(t, payments.Faults{}, 0) // for its database
	sim, err := payments.NewSim(p.db, payments.Faults{HoldAfterCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := payments.NewServer("127.0.0.1:0", sim)
	if err := srv.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(srv.Stop)
	c := payments.NewClient(srv.URL(), 0).WithSecret(sim.Secret())
	t.Cleanup(c.Close)

	done := make(chan error, 1)
	go func() {
		_, err := c.Refund(t.Context(), refundReq("op-1"))
		done <- err
	}()
	testkit.WaitUntil(t, "the held refund to commit", 10*time.Second, func() bool {
		select {
		case err := <-done:
			t.Fatalf("Refund returned while held: %v", err)
		default:
		}
		_, err := c.Lookup(t.Context(), "op-1")
		return err == nil
	})
	stopped := make(chan struct{})
	go func() {
		srv.Stop()
		srv.Stop() // safe twice
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return with an answer held")
	}
	<-done // answered (released) or dropped; either way it returned

	if _, err := c.Lookup(t.Context(), "op-1"); !errors.Is(err, payments.ErrUnavailable) {
		t.Errorf("Lookup after Stop = %v, want ErrUnavailable (connection refused)", err)
	}
}

// A reconciler polling Lookup while a refund is being submitted must not
// make that submission fail as "in flight".
func TestRefund_LookupsDuringSubmitDoNotConflict(t *testing.T) {
	t.Parallel()
	p := mustStartProvider(t, payments.Faults{}, 0)
	for i := range 20 {
		key := fmt.Sprintf("op-%d", i)
		submitted := make(chan struct{})
		polled := make(chan error, 1)
		go func() {
			for {
				select {
				case <-submitted:
					polled <- nil
					return
				default:
				}
				if _, err := p.client.Lookup(t.Context(), key); err != nil &&
					!errors.Is(err, payments.ErrNotFound) && !errors.Is(err, payments.ErrInFlight) {
					polled <- err
					return
				}
			}
		}()
		_, err := p.client.Refund(t.Context(), refundReq(key))
		close(submitted)
		if err != nil {
			t.Errorf("Refund %s while polled: %v", key, err)
		}
		if err := <-polled; err != nil {
			t.Errorf("Lookup %s: %v", key, err)
		}
	}
	if got, want := p.ledgerRows(t), 20; got != want {
		t.Errorf("ledger rows = %d, want %d", got, want)
	}
}

// TestSim_HostAndSecret: a page on another site that points its name at
// the provider (DNS rebinding) is refused by Host, and a write or a fault
// switch without the shared secret is refused: nothing is recorded or
// switched. Reads stay open on our own Host.
func TestSim_HostAndSecret(t *testing.T) {
	t.Parallel()
	p := mustStartProvider(t, payments.Faults{}, 0)
	body := `{"order_ref":"o1","amount":100,"currency":"EUR"}`
	for _, tc := range []struct {
		name, method, path, host, auth, body string
		status                               int
	}{
		{"refund from a rebinding page", http.MethodPost, "/refunds", "evil.example", "Bearer " + p.sim.Secret(), body, http.StatusMisdirectedRequest},
		{"faults from a rebinding page", http.MethodPut, "/admin/faults", "evil.example:8081", "", `{"error_5xx_next":5}`, http.StatusMisdirectedRequest},
		{"ledger from a rebinding page", http.MethodGet, "/refunds", "evil.example", "", "", http.StatusMisdirectedRequest},
		{"refund without the secret", http.MethodPost, "/refunds", "", "", body, http.StatusUnauthorized},
		{"refund with another secret", http.MethodPost, "/refunds", "", "Bearer not-the-secret-at-all", body, http.StatusUnauthorized},
		{"faults without the secret", http.MethodPut, "/admin/faults", "", "", `{"error_5xx_next":5}`, http.StatusUnauthorized},
		{"release without the secret", http.MethodPost, "/admin/release", "", "", "", http.StatusUnauthorized},
		{"ledger on our Host", http.MethodGet, "/refunds", "", "", "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, p.url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Idempotency-Key", "rebound")
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if status, b := do(t, req); status != tc.status {
				t.Errorf("%s %s (Host %q) = %d %s, want %d", tc.method, tc.path, tc.host, status, b, tc.status)
			}
		})
	}
	t.Cleanup(func() {
		if got := p.ledgerRows(t); got != 0 {
			t.Errorf("ledger rows = %d, want none", got)
		}
		if got := p.sim.Faults(); got != (payments.Faults{}) {
			t.Errorf("faults = %+v, want none switched on", got)
		}
	})
}
