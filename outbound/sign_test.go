package outbound_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// TestSign_SpecificationVector is the Standard Webhooks specification's
// test vector.
func TestSign_SpecificationVector(t *testing.T) {
	t.Parallel()
	got, err := outbound.Sign([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "msg_p5jXN8AQM9LWM0D4loKWxJek",
		time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign: got %q, want %q", got, want)
	}
}

// TestSign_ReferenceLibraryVerifies: what Sign makes, the reference
// library verifies, with one secret and with two (each alone), and a
// tampered body or another secret fails.
func TestSign_ReferenceLibraryVerifies(t *testing.T) {
	t.Parallel()
	s1, _ := outbound.NewSecret()
	s2, _ := outbound.NewSecret()
	s3, _ := outbound.NewSecret()
	body := []byte(`{"type":"run.completed"}`)
	now := time.Now()
	sig, err := outbound.Sign([]string{s1, s2}, "01a23efc-0000-7000-8000-000000000000", now, body)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(sig)); n != 2 {
		t.Fatalf("signature %q: %d signatures, want 2", sig, n)
	}
	h := http.Header{}
	h.Set("webhook-id", "01a23efc-0000-7000-8000-000000000000")
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", sig)
	for name, c := range map[string]struct {
		secret string
		body   string
		ok     bool
	}{"current": {s1, string(body), true}, "previous": {s2, string(body), true},
		"other secret": {s3, string(body), false}, "tampered": {s1, `{"type":"run.failed"}`, false}} {
		t.Run(name, func(t *testing.T) {
			wh, err := standardwebhooks.NewWebhook(c.secret)
			if err != nil {
				t.Fatal(err)
			}
			if err := wh.Verify([]byte(c.body), h); (err == nil) != c.ok {
				t.Errorf("Verify: %v, want ok %v", err, c.ok)
			}
		})
	}
	if _, err := outbound.Sign([]string{"whsec_not base64!"}, "id", now, body); err == nil {
		t.Error("Sign with a malformed secret: no error")
	}
}

// TestWebhook_RotationSignsWithBoth: after a rotation, deliveries carry two
// signatures and a receiver holding either secret alone verifies them.
func TestWebhook_RotationSignsWithBoth(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	rcv := newReceiver(t)
	ep, old := mustEndpoint(t, st, rcv.URL())
	secret, _ := outbound.NewSecret()
	if _, err := st.RotateWebhook(context.Background(), ep.ID, secret, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	rcv.secrets = []string{old, secret} // each verified alone
	var sigs []string
	rcv.behave = func(_ http.ResponseWriter, r *http.Request, _ int) bool {
		rcv.mu.Lock()
		sigs = append(sigs, r.Header.Get("webhook-signature"))
		rcv.mu.Unlock()
		return false
	}
	startEngine(t, st, outbound.Config{})
	runs := newRunMaker(t, st).many(t, 2)
	want := businessEvents(t, st, runs)
	allDelivered(t, st, ep.ID, total(want), 10*time.Second)
	rcv.wantAll(t, want)
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, s := range sigs {
		if n := len(strings.Fields(s)); n != 2 {
			t.Errorf("webhook-signature %q: %d signatures, want 2 during the rotation", s, n)
		}
	}
}

// TestWebhook_SecretsNeverLogged: what the engine logs, a delivery's
// failures included, names no secret and no signature.
func TestWebhook_SecretsNeverLogged(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	rcv := newReceiver(t)
	rcv.behave = func(w http.ResponseWriter, _ *http.Request, _ int) bool {
		w.WriteHeader(http.StatusGone)
		return true
	}
	ep, secret := mustEndpoint(t, st, rcv.URL(), store.EventRunCreated)
	var logs strings.Builder
	e := outbound.New(outbound.Config{Policy: loopback, Poll: 20 * time.Millisecond}, st, newLogger(&logs))
	e.Start(context.Background())
	defer e.Stop()
	newRunMaker(t, st).single(t)
	waitFor(t, 10*time.Second, "the endpoint disabled", func() bool {
		got, err := st.Webhook(context.Background(), ep.ID)
		return err == nil && got.DisabledAt.Valid
	})
	e.Stop()
	key := strings.TrimPrefix(secret, "whsec_")
	if out := logs.String(); strings.Contains(out, key) || strings.Contains(out, "v1,") {
		t.Errorf("the log shows a secret or a signature:\n%s", out)
	}
	if !strings.Contains(logs.String(), "disabled") {
		t.Errorf("the log does not say the endpoint was disabled:\n%s", logs.String())
	}
}
