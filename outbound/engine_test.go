package outbound_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

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
	// The receiver dies inside a delivery it has noted and not answered,
	// once a third of the events came: that one at least is sent again,
	// however the machine schedules this test (a kill from the test's own
	// goroutine could come after the last delivery on a loaded machine).
	killed := make(chan struct{})
	var dying sync.Once
	rcv.behave = func(w http.ResponseWriter, r *http.Request, n int) bool {
		if rcv.count() < total(want)/3 {
			return false
		}
		this := false
		dying.Do(func() {
			this = true
			rcv.kill()
			close(killed)
		})
		if !this {
			return false
		}
		select { // the kill closed its connection
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return true
	}
	startEngine(t, st, outbound.Config{Workers: 16, PerEndpoint: 8})
	select {
	case <-killed:
	case <-time.After(20 * time.Second):
		t.Fatal("waited 20s for a third of the deliveries")
	}
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

// TestEngine_LaneFailsInTheMiddle: runs are sent in lanes (a run's due
// events one after the other under one lease); when an event in the
// middle of a lane fails, nothing after it is sent until it is
// acknowledged. Every POST is logged with its answer: no event of a run is
// ever posted before each earlier one got a 2xx, each ends delivered, and
// PostgreSQL counts exactly the attempts made (none for the unsent).
func TestEngine_LaneFailsInTheMiddle(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	runs := newRunMaker(t, st).many(t, 6)
	want := businessEvents(t, st, runs)
	type post struct {
		run    uuid.UUID
		seq    int64
		status int
	}
	var (
		mu    sync.Mutex
		posts []post
		tries = map[string]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p outbound.Payload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		tries[p.Data.EventID.String()]++
		status := http.StatusNoContent
		// Every event but a run's first fails its first try.
		if p.Data.Seq != want[p.Data.RunID][0] && tries[p.Data.EventID.String()] == 1 {
			status = http.StatusServiceUnavailable
		}
		posts = append(posts, post{p.Data.RunID, p.Data.Seq, status})
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	ep, _ := mustEndpoint(t, st, srv.URL+"/hook")
	if _, err := storetest.DB(t, st).Exec(`UPDATE webhook_endpoints SET created_at = '2000-01-01'`); err != nil {
		t.Fatal(err)
	}
	startEngine(t, st, outbound.Config{Workers: 4, PerEndpoint: 4})
	allDelivered(t, st, ep.ID, total(want), 30*time.Second)

	mu.Lock()
	defer mu.Unlock()
	acked := map[uuid.UUID]map[int64]bool{}
	for i, p := range posts {
		if acked[p.run] == nil {
			acked[p.run] = map[int64]bool{}
		}
		for _, earlier := range want[p.run] {
			if earlier < p.seq && !acked[p.run][earlier] {
				t.Errorf("post %d: run %s seq %d sent before seq %d was acknowledged", i, p.run, p.seq, earlier)
			}
		}
		if p.status < 300 {
			acked[p.run][p.seq] = true
		}
	}
	if wantPosts := 2*total(want) - len(want); len(posts) != wantPosts {
		t.Errorf("%d POSTs, want %d (each run's first event once, every other twice)", len(posts), wantPosts)
	}
	var attempts, rows int
	if err := storetest.DB(t, st).QueryRow(`SELECT (SELECT sum(attempts) FROM webhook_deliveries WHERE endpoint_id = $1),
            (SELECT count(*) FROM webhook_attempts WHERE endpoint_id = $1)`, ep.ID).Scan(&attempts, &rows); err != nil {
		t.Fatal(err)
	}
	if attempts != len(posts) || rows != len(posts) {
		t.Errorf("PostgreSQL counts %d attempts and %d attempt rows for %d POSTs", attempts, rows, len(posts))
	}
	wantVerified(t, st)
}
