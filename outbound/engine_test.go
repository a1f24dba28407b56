package outbound_test

import (
	"testing"
	"time"

	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/store/storetest"
)

// TestEngine_ReceiverKilledMidDelivery: a receiver whose listener and
// connections are closed while deliveries are in flight, then started
// again on the same address, gets every business event of 20 runs (a
// family among them), per run in seq order, each once after dedup by
// webhook-id, nothing skipped; PostgreSQL records every one delivered.
func TestEngine_ReceiverKilledMidDelivery(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	runs := newRunMaker(t, st).many(t, 20)
	want := businessEvents(t, st, runs)
	rcv := newReceiver(t)
	// Slow answers keep several deliveries in flight when it dies, some
	// of them already processed by the receiver.
	rcv.slow = 20 * time.Millisecond
	ep, secret := mustEndpoint(t, st, rcv.URL())
	rcv.secrets = []string{secret}
	// The endpoint came after the runs: fan them out to it as if it came first.
	if _, err := storetest.DB(t, st).Exec(`UPDATE webhook_endpoints SET created_at = '2000-01-01'`); err != nil {
		t.Fatal(err)
	}
	startEngine(t, st, outbound.Config{Workers: 16, PerEndpoint: 8})
	waitFor(t, 20*time.Second, "some deliveries", func() bool { return rcv.count() >= total(want)/3 })
	rcv.kill()
	waitFor(t, 10*time.Second, "failed attempts recorded while the receiver is down", func() bool {
		var n int
		_ = storetest.DB(t, st).Get(&n, `SELECT count(*) FROM webhook_attempts WHERE status IS NULL`)
		return n > 0
	})
	rcv.restart()
	allDelivered(t, st, ep.ID, total(want), 30*time.Second)
	rcv.wantAll(t, want)
	wantVerified(t, st)
	if got := rcv.count(); got <= total(want) {
		t.Errorf("the receiver got %d POSTs for %d events: want some sent again after the kill", got, total(want))
	}
}
