package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/refundd/refundd/store"
)

func narrationItem(seq int64, text string) item {
	p, _ := json.Marshal(map[string]string{"text": text})
	return item{kind: itemEvent, ev: store.Event{Seq: seq, Type: store.EventNarrationDelta, Payload: p}}
}

func businessItem(seq int64) item {
	return item{kind: itemEvent, ev: store.Event{Seq: seq, Type: store.EventCancelRequested, Payload: []byte(`{}`)}}
}

func TestOutbox_FullBufferCoalescesNarration(t *testing.T) {
	t.Parallel()
	o := newOutbox(&StreamConfig{Buffer: 4, BufferBytes: 1 << 20, SlowAfter: time.Hour})
	ctx := context.Background()
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
			json.Unmarshal(it.ev.Payload, &p)
			got += p.Text
		}
	}
	if got != want || last != 50 {
		t.Errorf("coalesced narration = %q up to seq %d, want %q up to 50", got, last, want)
	}
}

func TestOutbox_StaysFullPastSlowAfter(t *testing.T) {
	t.Parallel()
	o := newOutbox(&StreamConfig{Buffer: 2, BufferBytes: 1 << 20, SlowAfter: 50 * time.Millisecond})
	ctx := context.Background()
	for i := int64(1); i <= 2; i++ {
		if err := o.push(ctx, businessItem(i)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := o.push(ctx, businessItem(3)); !errors.Is(err, errSlowReader) {
		t.Fatalf("push into a full buffer = %v, want errSlowReader", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("gave up after %v, want SlowAfter", d)
	}
	t.Run("a writer that drains in time makes room", func(t *testing.T) {
		go func() { time.Sleep(10 * time.Millisecond); o.take() }()
		if err := o.push(ctx, businessItem(3)); err != nil {
			t.Errorf("push = %v, want room after the writer took the queue", err)
		}
	})
}

func TestSSEWriter_MultiLineData(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	w := &sseWriter{w: rec, timeout: time.Second}
	w.message("reset", 7, []byte("<p>a\r\nb</p>\n<p>c\rd</p>"))
	w.message("", -1, []byte("x"))
	w.comment("ping")
	want := "event: reset\nid: 7\ndata: <p>a\ndata: b</p>\ndata: <p>c\ndata: d</p>\n\ndata: x\n\n: ping\n\n"
	if got := w.buf.String(); got != want {
		t.Errorf("framed =\n%q\nwant\n%q", got, want)
	}
}
