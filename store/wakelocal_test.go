package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/refundd/refundd/store"
)

// TestWakeLocal_CommitWakesThisProcessAtOnce: a change committed through a
// store with WakeLocal wakes the run's subscribers in this process with
// the seq it appended, without the NOTIFY's round trip: here the listener
// never even listens, so nothing else could wake them.
func TestWakeLocal_CommitWakesThisProcessAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := f.start(t, "local", 1)
	l := store.NewListener(f.s.URL(), testLogger(t)) // not started
	f.s.WakeLocal(l)
	woke := make(chan int64, 16)
	defer l.SubscribeFunc(store.RunTopic(run.ID.String()), func(seq int64) { woke <- seq })()
	if _, err := f.s.RequestCancel(context.Background(), run.ID, f.customer.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case seq := <-woke:
		if want := run.LastSeq + 1; seq != want {
			t.Errorf("woken for seq %d, want %d (cancel.requested)", seq, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the commit did not wake the run's subscriber in this process")
	}
}
