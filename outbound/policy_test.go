package outbound_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// serve's policy: https only, no loopback, private, link-local or
// metadata address, whatever name leads there.
func servePolicy() outbound.Policy {
	return outbound.Policy{LookupIP: func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "internal.example":
			return []netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil
		case "hooks.example":
			return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
		}
		return nil, errors.New("no such host")
	}}
}

func TestPolicy_Check(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1/hook", false},
		{"https://127.0.0.1/hook", false},
		{"https://169.254.169.254/latest/meta-data", false},
		{"https://[::1]/hook", false},
		{"https://internal.example/hook", false}, // resolves to 10.0.0.1
		{"https://[fd00:ec2::254]/", false},
		{"https://192.168.1.10/", false},
		{"https://user:pw@hooks.example/", false},
		{"ftp://hooks.example/", false},
		{"https://nowhere.example/", false},
		{"https://hooks.example/hook", true}, // a public address
		{"https://93.184.215.14:8443/hook", true},
	} {
		t.Run(c.url, func(t *testing.T) {
			err := servePolicy().Check(context.Background(), c.url)
			if (err == nil) != c.ok {
				t.Errorf("Check: %v, want ok %v", err, c.ok)
			}
			if err != nil && !errors.Is(err, outbound.ErrRefusedURL) {
				t.Errorf("Check: %v, want ErrRefusedURL", err)
			}
		})
	}
}

// TestPolicy_AllowHostsAndLoopback: WEBHOOK_ALLOW_HOSTS names a host
// allowed whatever it resolves to; dev allows loopback and http.
func TestPolicy_AllowHostsAndLoopback(t *testing.T) {
	t.Parallel()
	p := servePolicy()
	p.AllowHosts = []string{"internal.example"}
	if err := p.Check(context.Background(), "https://internal.example/hook"); err != nil {
		t.Errorf("an allowed host: %v", err)
	}
	if err := loopback.Check(context.Background(), "http://127.0.0.1:8080/hook"); err != nil {
		t.Errorf("dev's loopback: %v", err)
	}
}

// TestPolicy_DialerRefusesAtConnectTime: the dialer checks the address it
// connects to, after DNS: a loopback address is refused when not allowed
// (a name that rebinds to it after registration gets no further).
func TestPolicy_DialerRefusesAtConnectTime(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx := context.Background()
	conn, err := servePolicy().Dialer(time.Second)(ctx, "tcp", ln.Addr().String())
	if !errors.Is(err, outbound.ErrRefusedURL) {
		t.Errorf("dial loopback under serve's policy: %v, want ErrRefusedURL", err)
	}
	if conn != nil {
		conn.Close()
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if _, err := servePolicy().Dialer(time.Second)(ctx, "tcp", net.JoinHostPort("localhost", port)); !errors.Is(err, outbound.ErrRefusedURL) {
		t.Errorf("dial a name that resolves to loopback: %v, want ErrRefusedURL", err)
	}
	conn, err = loopback.Dialer(time.Second)(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial loopback when allowed: %v", err)
	}
	conn.Close()
}

// TestEngine_RefusedAddressNotSent: an endpoint whose address the
// policy refuses at connect time gets nothing; the attempt is recorded
// as a failure (retried: the allowlist may change) and counted refused.
func TestEngine_RefusedAddressNotSent(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	rcv := newReceiver(t)
	ep, _ := mustEndpoint(t, st, rcv.URL(), store.EventRunCreated)
	before := testutil.ToFloat64(metrics.WebhookDeliveries.WithLabelValues("refused"))
	e := outbound.New(outbound.Config{Policy: outbound.Policy{AllowHTTP: true}, Poll: 20 * time.Millisecond,
		Schedule: []time.Duration{time.Hour}}, st, newLogger(t.Output()))
	e.Start(context.Background())
	t.Cleanup(e.Stop)
	newRunMaker(t, st).single(t)
	waitFor(t, 10*time.Second, "an attempt recorded", func() bool { return len(attemptsOf(t, st, ep.ID)) > 0 })
	if r := attemptsOf(t, st, ep.ID)[0]; r.Status != nil || r.Error == nil || !strings.Contains(*r.Error, "loopback") {
		t.Errorf("attempt: status %v error %v, want no status and the refusal", r.Status, r.Error)
	}
	if rcv.count() != 0 {
		t.Errorf("the receiver got %d POSTs, want 0", rcv.count())
	}
	// The count follows the attempt's record by a moment.
	waitFor(t, 5*time.Second, "the refused delivery counted", func() bool {
		return testutil.ToFloat64(metrics.WebhookDeliveries.WithLabelValues("refused")) > before
	})
}
