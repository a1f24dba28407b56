package store

import (
	"context"
	"testing"
	"time"
)

// TestBatcher_PaceSpacesAStormOnly: with a pace, the batch after a batch
// of several items begins no sooner than the pace after it, and takes
// what came meanwhile; an item after a lone one goes at once; stop ends a
// worker that rests.
func TestBatcher_PaceSpacesAStormOnly(t *testing.T) {
	t.Parallel()
	const pace = 2 * time.Second
	type call struct {
		items []int
		at    time.Time
	}
	calls := make(chan call, 10)
	// The worker is held in the batches of 1 and of 10 while the next
	// items queue.
	holds := map[int]chan struct{}{1: make(chan struct{}), 10: make(chan struct{})}
	b := newBatcher(8, 1, 8, func(items []int) {
		calls <- call{items, time.Now()}
		if hold, ok := holds[items[0]]; ok {
			<-hold
		}
	})
	b.pace = pace
	ctx := context.Background()
	next := func() call {
		t.Helper()
		select {
		case c := <-calls:
			return c
		case <-time.After(time.Minute):
			t.Fatal("no batch within a minute")
			return call{}
		}
	}
	put := func(x int) {
		t.Helper()
		if err := b.put(ctx, x); err != nil {
			t.Fatal(err)
		}
	}

	put(1)
	if c := next(); len(c.items) != 1 {
		t.Fatalf("first batch %v, want [1]", c.items)
	}
	put(2)
	put(3)
	close(holds[1])
	storm := next()
	if len(storm.items) != 2 {
		t.Fatalf("second batch %v, want [2 3]", storm.items)
	}
	put(4)
	put(5)
	after := next()
	if len(after.items) != 2 || after.at.Sub(storm.at) < pace {
		t.Errorf("after a batch of two: %v, %s later; want [4 5], at least %s later", after.items, after.at.Sub(storm.at), pace)
	}
	// [4 5] rests too; 6 waits out the rest, and 7 comes after a lone 6.
	put(6)
	lone := next()
	put(7)
	if c := next(); c.at.Sub(lone.at) >= pace {
		t.Errorf("an item after a lone one waited %s; want it at once", c.at.Sub(lone.at))
	}

	// A batch of two, then stop while the worker rests: it ends now.
	put(10)
	next()
	put(11)
	put(12)
	close(holds[10])
	if c := next(); len(c.items) != 2 {
		t.Fatalf("batch %v, want [11 12]", c.items)
	}
	stopped := make(chan struct{})
	go func() { b.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(pace / 2):
		t.Error("stop waited for the rest to end")
	}
}
