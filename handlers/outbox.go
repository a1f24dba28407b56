package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/refundd/refundd/store"
)

// errSlowReader ends a stream whose outbox stayed full for SlowAfter; the
// client reconnects and replays from the store.
var errSlowReader = errors.New("handlers: stream subscriber too slow")

// outbox is one subscriber's bounded queue between the store reader and the
// connection writer. Pushing never blocks the runtime: the reader reads
// from the store, so waiting here only delays this subscriber.
type outbox struct {
	max, maxBytes int
	slow          time.Duration

	mu      sync.Mutex
	items   []item
	bytes   int
	ready   chan struct{} // something to write
	drained chan struct{} // the writer took what was queued
}

func newOutbox(cfg *StreamConfig) *outbox {
	return &outbox{max: cfg.Buffer, maxBytes: cfg.BufferBytes, slow: cfg.SlowAfter,
		ready: make(chan struct{}, 1), drained: make(chan struct{}, 1)}
}

type itemKind int

const (
	itemEvent itemKind = iota
	itemReset
	itemClose
)

// item is one thing for the writer to send.
type item struct {
	kind   itemKind
	ev     store.Event
	snap   *store.Snapshot // reset
	access Access          // reset
	banner bool            // reset: "the run continued while you were offline"
	reason closeReason     // close
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

// push queues it. A full queue first coalesces narration; if that does not
// make room before slow has passed, push fails with errSlowReader.
func (o *outbox) push(ctx context.Context, it item) error {
	var timer *time.Timer
	for {
		o.mu.Lock()
		if o.fits(it) {
			o.items = append(o.items, it)
			o.bytes += it.size()
			o.mu.Unlock()
			signal(o.ready)
			return nil
		}
		merged := o.coalesce(it)
		o.mu.Unlock()
		if merged {
			signal(o.ready)
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(o.slow)
			defer timer.Stop()
		}
		select {
		case <-o.drained:
		case <-timer.C:
			return errSlowReader
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
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
// later one, so a subscriber that fell behind gets fewer, larger messages.
// A payload it cannot read is not rewritten (false): both stay as they are.
func mergeNarration(a, b item) (item, bool) {
	var pa, pb struct {
		Text          string `json:"text"`
		CoalescedFrom int64  `json:"coalesced_from,omitempty"`
	}
	if json.Unmarshal(a.ev.Payload, &pa) != nil || json.Unmarshal(b.ev.Payload, &pb) != nil {
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
	return out, true
}

// take hands everything queued to the writer.
func (o *outbox) take() []item {
	o.mu.Lock()
	items := o.items
	o.items, o.bytes = nil, 0
	o.mu.Unlock()
	signal(o.drained)
	return items
}
