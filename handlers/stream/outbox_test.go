package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/refundd/refundd/store"
)

func narrationItem(seq int64, text string) item {
	p, _ := json.Marshal(map[string]string{"text": text})
	return eventItem(store.Event{Seq: seq, Type: store.EventNarrationDelta, Payload: p}, nil)
}

func businessItem(seq int64) item {
	return eventItem(store.Event{Seq: seq, Type: store.EventCancelRequested, Payload: []byte(`{}`)}, nil)
}

func TestOutbox_FullBufferCoalescesNarration(t *testing.T) {
	t.Parallel()
	// Nothing takes from the queue: only coalescing may make room here.
	o := newOutbox(&Config{Buffer: 4, BufferBytes: 1 << 20}, nil)
	want := ""
	for i := int64(1); i <= 50; i++ {
		it := narrationItem(i, fmt.Sprintf("w%d ", i))
		if i == 20 {
			it = businessItem(i)
		} else {
			want += fmt.Sprintf("w%d ", i)
		}
		if !o.offer(it) {
			t.Fatalf("offer %d: the subscriber was cut, want its narration coalesced", i)
		}
	}
	items, err := o.take()
	if err != nil {
		t.Fatal(err)
	}
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

// TestOutbox_OverflowCutsTheSubscriber: what coalescing cannot make room
// for cuts the subscriber at once, never waiting (the tail serves every
// watcher of the run); the writer then gets errSlowReader and nothing else.
func TestOutbox_OverflowCutsTheSubscriber(t *testing.T) {
	t.Parallel()
	o := newOutbox(&Config{Buffer: 2, BufferBytes: 1 << 20}, nil)
	for i := int64(1); i <= 2; i++ {
		if !o.offer(businessItem(i)) {
			t.Fatalf("offer %d into room: cut", i)
		}
	}
	if o.offer(businessItem(3)) {
		t.Fatal("offer of a business event into a full queue succeeded, want the subscriber cut")
	}
	if o.offer(narrationItem(4, "w4 ")) {
		t.Error("offer after the cut succeeded, want every later offer refused")
	}
	select {
	case <-o.ready:
	default:
		t.Error("the cut did not wake the writer")
	}
	if items, err := o.take(); !errors.Is(err, errSlowReader) || len(items) != 0 {
		t.Errorf("take = %d items, %v; want none and errSlowReader", len(items), err)
	}
}

// TestOutbox_WrittenBatchTakesTheNext: the batch a writer gives back is
// emptied and queues what comes next, so a stream that keeps up queues a
// fan-out's event without allocating, whether the next event comes after
// the writer gave the batch back or while it was still writing.
func TestOutbox_WrittenBatchTakesTheNext(t *testing.T) {
	o := newOutbox(&Config{Buffer: 4, BufferBytes: 1 << 20}, nil)
	items := []item{businessItem(1), businessItem(2)}
	seq := int64(0)
	offer := func() {
		seq++
		if !o.offer(items[seq%2]) {
			t.Fatalf("offer %d: cut", seq)
		}
	}
	take := func() []item {
		got, err := o.take()
		if err != nil || len(got) != 1 || got[0].ev.Seq != items[seq%2].ev.Seq {
			t.Fatalf("take after offer %d = %v, %v; want that one item", seq, got, err)
		}
		return got
	}
	after := testing.AllocsPerRun(100, func() {
		offer()
		o.giveBack(take())
	})
	during := testing.AllocsPerRun(100, func() {
		offer()
		written := take()
		offer() // while the writer writes
		o.giveBack(written)
		o.giveBack(take())
	})
	if after != 0 || during != 0 {
		t.Errorf("%v allocations an event given back after, %v while writing; want 0", after, during)
	}
	offer()
	written := take()
	if o.giveBack(written); written[0].frames != nil || written[0].ev.Payload != nil {
		t.Errorf("a batch given back still holds %+v, want it emptied", written[0])
	}
}
