// Package testkit is the harness the tests of several packages share:
// waiting for a condition under a deadline, reading server-sent events,
// running the real executor against a simulated payment provider, and a
// buffer a test reads while another goroutine writes it.
// It imports no package whose own internal tests import it back: keep it
// so (store, payments and agent test themselves as _test packages).
package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// maxBackoff caps the pause between two looks at a condition: short, so a
// test notices soon, long enough not to hammer the database.
const maxBackoff = 20 * time.Millisecond

// WaitUntil polls cond, first at once and then with a short backoff, until
// it holds. If it still does not hold after timeout, the test fails, saying
// what it waited for. cond runs on the test's goroutine, so it may call
// tb.Fatal.
func WaitUntil(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	if !poll(timeout, cond) {
		tb.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// poll reports whether cond came to hold within timeout.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for !cond() {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		t := time.NewTimer(min(pause, left))
		<-t.C
		pause = min(2*pause, maxBackoff)
	}
	return true
}

// WaitRunState waits until the run is in state and returns it as read
// then; after timeout the test fails, naming the state the run is in.
func WaitRunState(tb testing.TB, st *store.Store, runID uuid.UUID, state string, timeout time.Duration) *store.Run {
	tb.Helper()
	var r *store.Run
	ok := poll(timeout, func() bool {
		var err error
		if r, err = st.RunByID(context.Background(), runID); err != nil {
			tb.Fatalf("waiting for run %s to be %s: %v", runID, state, err)
		}
		return r.State == state
	})
	if !ok {
		tb.Fatalf("timed out after %v waiting for run %s to be %s: it is %s", timeout, runID, state, r.State)
	}
	return r
}
