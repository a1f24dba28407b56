package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/refundd/refundd/store"
)

// errPushBound ends a push that waited past the test's bound: the outbox
// did not make room when it should have.
var errPushBound = errors.New("test: push waited past its bound")

// boundedCtx bounds every wait of a test on the outbox, so a broken outbox
// fails the test in seconds instead of hanging it.
func boundedCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(context.Background(), 5*time.Second, errPushBound)
	t.Cleanup(cancel)
	return ctx
}

func narrationItem(seq int64, text string) item {
	p, _ := json.Marshal(map[string]string{"text": text})
	return item{kind: itemEvent, ev: store.Event{Seq: seq, Type: store.EventNarrationDelta, Payload: p}}
}

func businessItem(seq int64) item {
	return item{kind: itemEvent, ev: store.Event{Seq: seq, Type: store.EventCancelRequested, Payload: []byte(`{}`)}}
}

func TestOutbox_FullBufferCoalescesNarration(t *testing.T) {
	t.Parallel()
	// SlowAfter is out of reach: only coalescing may make room here, and
	// the context's bound fails a push that waits instead.
	o := newOutbox(&StreamConfig{Buffer: 4, BufferBytes: 1 << 20, SlowAfter: time.Hour})
	ctx := boundedCtx(t)
	want := ""
	for i := int64(1); i <= 50; i++ {
		it := narrationItem(i, fmt.Sprintf("w%d ", i))
		if i == 20 {
			it = businessItem(i)
		} else {
			want += fmt.Sprintf("w%d ", i)
		}
		if err := o.push(ctx, it); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
	items := o.take()
	if len(items) > 4 {
		t.Fatalf("%d items queued, want at most the bound of 4", len(items))
	}
	var got string
	var last int64
	for _, it := range items {
		if it.ev.Seq <= last {
			t.Errorf("seq %d after %d: out of order", it.ev.Seq, last)
		}
		last = it.ev.Seq
		if it.ev.Type == store.EventNarrationDelta {
			var p struct{ Text string }
			if err := json.Unmarshal(it.ev.Payload, &p); err != nil {
				t.Fatalf("seq %d: %v", it.ev.Seq, err)
			}
			got += p.Text
		}
	}
	if got != want || last != 50 {
		t.Errorf("coalesced narration = %q up to seq %d, want %q up to 50", got, last, want)
	}
}

func TestOutbox_StaysFullPastSlowAfter(t *testing.T) {
	t.Parallel()
	full := func(t *testing.T, slow time.Duration) *outbox {
		t.Helper()
		o := newOutbox(&StreamConfig{Buffer: 2, BufferBytes: 1 << 20, SlowAfter: slow})
		for i := int64(1); i <= 2; i++ {
			if err := o.push(boundedCtx(t), businessItem(i)); err != nil {
				t.Fatal(err)
			}
		}
		return o
	}
	t.Run("a writer that never drains ends the subscriber", func(t *testing.T) {
		o := full(t, 50*time.Millisecond)
		start := time.Now()
		if err := o.push(boundedCtx(t), businessItem(3)); !errors.Is(err, errSlowReader) {
			t.Fatalf("push into a full buffer = %v, want errSlowReader", err)
		}
		if d := time.Since(start); d < 50*time.Millisecond {
			t.Errorf("gave up after %v, want SlowAfter", d)
		}
	})
	t.Run("a writer that drains in time makes room", func(t *testing.T) {
		// SlowAfter is out of reach, so the push can only end by the drain
		// (or fail at the context's bound).
		o := full(t, time.Hour)
		go func() { time.Sleep(10 * time.Millisecond); o.take() }()
		if err := o.push(boundedCtx(t), businessItem(3)); err != nil {
			t.Errorf("push = %v, want room after the writer took the queue", err)
		}
	})
}
