package handlers_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/refundd/refundd/handlers"
)

// TestAPISnapshot_LongRunReadsNoEvents: GET /api/runs/{id} shows no
// events, so on a 500-event run it must not read them. The proof is that
// it answers, right, while another transaction holds run_events locked
// against every read: a snapshot that read the log would wait for the lock
// and get the request deadline's 503.
func TestAPISnapshot_LongRunReadsNoEvents(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{RequestTimeout: 3 * time.Second})
	a.narrate(t, 1, 500) // seq 2..501
	c := a.customerClient(t)
	path := "/api/runs/" + a.run.ID.String()
	unlocked := a.get(t, c, path)
	wantStatus(t, unlocked, http.StatusOK)

	lockTable(t, a.db, "run_events")
	locked := a.get(t, c, path)
	wantStatus(t, locked, http.StatusOK)
	if locked.body != unlocked.body {
		t.Errorf("with run_events locked the snapshot is\n%s\nwant the same as without\n%s", locked.body, unlocked.body)
	}
	var snap struct {
		Access      string `json:"access"`
		CoveringSeq int64  `json:"covering_seq"`
		Run         struct {
			State string `json:"state"`
		} `json:"run"`
	}
	if err := json.Unmarshal([]byte(locked.body), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Access != "full" || snap.CoveringSeq != 501 || snap.Run.State != "created" {
		t.Errorf("snapshot = %+v, want full access, covering_seq 501, state created", snap)
	}
}
