package stream

import (
	"encoding/json"
	"errors"
	"sync"

	"github.com/refundd/refundd/store"
)

// errSlowReader ends a stream whose outbox overflowed: the client
// reconnects and replays from the store.
var errSlowReader = errors.New("handlers: stream Sub too slow")

// outbox is one Sub's bounded queue between the run's shared tail
// (tail.go) and the connection's writer. Offering never blocks: the tail
// serves every watcher of the run, so one that does not keep up is cut, not
// waited for. A full queue first coalesces narration; if that makes no
// room, the Sub is cut (errSlowReader) and what was queued is
// dropped with it.
type outbox struct {
	max, maxBytes int

	mu    sync.Mutex
	items []item
	spare []item // the writer's last batch, emptied (giveBack): the next items
	bytes int
	err   error         // set once: the Sub was cut
	ready chan struct{} // something to write, or the cut
}

// newOutbox makes an outbox that signals ready (nil: a channel of its own).
func newOutbox(cfg *Config, ready chan struct{}) *outbox {
	if ready == nil {
		ready = make(chan struct{}, 1)
	}
	return &outbox{max: cfg.Buffer, maxBytes: cfg.BufferBytes, ready: ready}
}

type itemKind int

const (
	itemEvent itemKind = iota
	// itemResync: the tail lost its place in the log (pruned past it);
	// the Sub starts over from a snapshot.
	itemResync
)

// item is one thing for the writer to handle.
type item struct {
	kind itemKind
	ev   store.Event
	// from is the first seq the item covers: ev.Seq, or the first of the
	// narration deltas merged into it.
	from int64
	// frames are ev's encodings, shared with the other watchers of the
	// run (nil for merged narration: its bytes are this Sub's own).
	frames *Frames
}

func eventItem(ev store.Event, frames *Frames) item {
	return item{kind: itemEvent, ev: ev, from: ev.Seq, frames: frames}
}

func (it item) size() int { return len(it.ev.Payload) + 64 }

// signal wakes the other side without ever blocking: one pending signal
// is as good as many.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// offer queues it without waiting. It reports false when the Sub
// is cut: now, because nothing could make room, or before.
func (o *outbox) offer(it item) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.err != nil:
		return false
	case o.fits(it):
		o.items = append(o.items, it)
		o.bytes += it.size()
	case !o.coalesce(it):
		o.err = errSlowReader
		o.items, o.bytes = nil, 0
	}
	signal(o.ready)
	return o.err == nil
}

func (o *outbox) fits(it item) bool {
	return len(o.items) == 0 || (len(o.items) < o.max && o.bytes+it.size() <= o.maxBytes)
}

// coalesce makes room in a full queue by merging runs of narration deltas
// into one delta each, then tries to merge it into the tail. It reports
// whether it was taken.
func (o *outbox) coalesce(it item) bool {
	out := o.items[:0]
	for _, x := range o.items {
		if n := len(out); n > 0 && isNarration(out[n-1]) && isNarration(x) {
			if merged, ok := mergeNarration(out[n-1], x); ok {
				out[n-1] = merged
				continue
			}
		}
		out = append(out, x)
	}
	clear(o.items[len(out):])
	o.items = out
	if n := len(o.items); isNarration(it) && n > 0 && isNarration(o.items[n-1]) && o.bytes+it.size() <= o.maxBytes {
		if merged, ok := mergeNarration(o.items[n-1], it); ok {
			o.items[n-1] = merged
			o.bytes += it.size()
			return true
		}
	}
	if o.fits(it) {
		o.items = append(o.items, it)
		o.bytes += it.size()
		return true
	}
	return false
}

func isNarration(it item) bool {
	return it.kind == itemEvent && it.ev.Type == store.EventNarrationDelta
}

// mergeNarration joins two narration deltas into one, numbered as the
// later one, so a Sub that fell behind gets fewer, larger messages.
// A payload it cannot read is not rewritten (false): both stay as they are.
func mergeNarration(a, b item) (item, bool) {
	pa, errA := store.PayloadOf[store.NarrationDelta](a.ev)
	pb, errB := store.PayloadOf[store.NarrationDelta](b.ev)
	if errA != nil || errB != nil {
		return b, false
	}
	from := pa.CoalescedFrom
	if from == 0 {
		from = a.ev.Seq
	}
	pb.Text = pa.Text + pb.Text
	pb.CoalescedFrom = from
	payload, err := json.Marshal(pb)
	if err != nil {
		return b, false
	}
	out := b
	out.ev.Payload = payload
	out.from = a.from
	out.frames = nil
	return out, true
}

// take hands everything queued to the writer, or the error that cut it.
// The writer may give the slice back once it has written it (giveBack).
func (o *outbox) take() ([]item, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	items := o.items
	o.items, o.spare, o.bytes = o.spare, nil, 0
	return items, o.err
}

// giveBack returns what take handed over, written: its room takes the
// next items, so a stream that keeps up queues a fan-out's event without
// allocating.
func (o *outbox) giveBack(items []item) {
	clear(items) // the events and their frames go
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.items == nil && o.err == nil {
		o.items = items[:0]
	} else if o.spare == nil {
		o.spare = items[:0]
	}
}
