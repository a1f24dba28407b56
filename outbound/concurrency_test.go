package outbound_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// TestEngine_HangingReceiverHoldsNoRun: an endpoint that never answers
// (longer than Timeout) holds no run and no other endpoint: runs go on
// appending and ending at their own pace, and a healthy endpoint gets
// everything while the hanging one's deliveries wait.
func TestEngine_HangingReceiverHoldsNoRun(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	hang, healthy := newReceiver(t), newReceiver(t)
	hang.behave = func(_ http.ResponseWriter, r *http.Request, _ int) bool {
		select { // 30 s, or until the engine gives up on it
		case <-time.After(30 * time.Second):
		case <-r.Context().Done():
		}
		return true
	}
	hep, _ := mustEndpoint(t, st, hang.URL())
	ep, _ := mustEndpoint(t, st, healthy.URL())
	startEngine(t, st, outbound.Config{Timeout: time.Second, Workers: 8, PerEndpoint: 4})
	m := newRunMaker(t, st)
	m.single(t) // the hanging endpoint's first deliveries are stuck from here on
	waitFor(t, 5*time.Second, "the hanging endpoint to be sent to", func() bool { return hang.count() > 0 })
	runs := m.many(t, 20) // neither waits for the other: no time is asserted, only what ended
	for _, id := range runs {
		if r, err := st.RunByID(context.Background(), id); err != nil || !store.Terminal(r.State) {
			t.Fatalf("run %s: %v, %v; want it ended", id, r, err)
		}
	}
	want := businessEvents(t, st, runs)
	allDelivered(t, st, ep.ID, total(want)+4, 20*time.Second)
	if s := deliveryStates(t, st, hep.ID); s["delivered"] != 0 || s["pending"] != total(want)+4 {
		t.Errorf("the hanging endpoint's deliveries: %v, want all pending", s)
	}
	waitFor(t, 5*time.Second, "the hanging endpoint's attempts timed out", func() bool { return len(attemptsOf(t, st, hep.ID)) > 0 })
	rows := attemptsOf(t, st, hep.ID)
	if rows[0].Error == nil || rows[0].Status != nil || !strings.Contains(*rows[0].Error, "no answer within 1s") {
		t.Fatalf("the hanging endpoint's attempts: %+v, want failures without a status", rows)
	}
}

// TestEngine_PerRunOrderAcrossEngines: two engines on one database (two
// worker processes, each its own pool) deliver many runs' events, made
// while they run, to two endpoints: each event once, per run in seq order.
func TestEngine_PerRunOrderAcrossEngines(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	other, err := store.Open(context.Background(), st.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	a, b := newReceiver(t), newReceiver(t)
	epA, secretA := mustEndpoint(t, st, a.URL())
	epB, secretB := mustEndpoint(t, st, b.URL())
	a.secrets, b.secrets = []string{secretA}, []string{secretB}
	for _, s := range []*store.Store{st, other} {
		startEngine(t, s, outbound.Config{Workers: 8, PerEndpoint: 3})
	}
	m := newRunMaker(t, st)
	var (
		mu   sync.Mutex
		runs []uuid.UUID
		wg   sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			ids := m.many(t, 15)
			mu.Lock()
			runs = append(runs, ids...)
			mu.Unlock()
		})
	}
	wg.Wait()
	want := businessEvents(t, st, runs)
	for _, c := range []struct {
		rcv *receiver
		id  uuid.UUID
	}{{a, epA.ID}, {b, epB.ID}} {
		allDelivered(t, st, c.id, total(want), 30*time.Second)
		c.rcv.wantAll(t, want)
		if got := c.rcv.count(); got != total(want) {
			t.Errorf("receiver got %d POSTs for %d events, want each once", got, total(want))
		}
	}
	wantVerified(t, st)
}
