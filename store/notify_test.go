package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/refundd/refundd/store"
)

// TestNotify_AfterCommitOnly: a state change's wake-up is sent once its
// transaction committed, and one that rolled back sends none. The first
// notification about the run after a rolled-back and then a committed
// change names the committed seq.
func TestNotify_AfterCommitOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "notify", 1)

	l := pq.NewListener(f.s.URL(), 10*time.Millisecond, time.Second, nil)
	t.Cleanup(func() { l.Close() })
	if err := l.Listen(store.ChannelEvents); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("changed my mind")
	// Rolled back after its append: nothing is committed, nothing is said.
	if err := f.s.AppendThenRollBack(ctx, run.ID, boom, store.EventOf(store.RunPlanning{})); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	r, evs, err := f.s.Mutate(ctx, run.ID, func(*sqlx.Tx, *store.Run) (string, []store.NewEvent, error) {
		// Two events: the rolled-back append's notice would name the first.
		return store.StatePlanning, []store.NewEvent{store.EventOf(store.RunPlanning{}), store.EventOf(store.ActionProposed{})}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s:%d", r.ID, evs[len(evs)-1].Seq)
	// The start's own notice is sent after its commit too, by the
	// process's notifier: it may still arrive now, and says nothing of
	// the changes under test.
	started := fmt.Sprintf("%s:%d", run.ID, run.LastSeq)
	for {
		select {
		case n := <-l.Notify:
			if n != nil && n.Extra == started {
				continue
			}
			if n == nil || n.Extra != want {
				t.Fatalf("first notification = %+v, want %q", n, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no notification within 10 s of the commit")
		}
		return
	}
}
