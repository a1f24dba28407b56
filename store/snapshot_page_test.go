package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/refundd/refundd/store"
)

// TestSnapshotPage_LatestNarrationOfTheShownAttempt: a page's snapshot has
// every business event, only the latest pieces of narration of the
// attempt it shows (a restarted step's old narration is never shown), and
// counts the pieces it left out; it covers the same seq as the full one.
func TestSnapshotPage_LatestNarrationOfTheShownAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "page", 1)
	narrate := func(from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := f.s.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{Text: fmt.Sprintf("w%d ", i)})); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := f.s.BeginAttempt(ctx, run.ID, "plan"); err != nil {
		t.Fatal(err)
	}
	narrate(1, 5)                                                    // the first attempt's: never shown
	if _, err := f.s.BeginAttempt(ctx, run.ID, "plan"); err != nil { // attempt 2: a restart
		t.Fatal(err)
	}
	narrate(6, 7)
	full, err := f.s.Snapshot(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	page, err := f.s.SnapshotPage(ctx, run.ID, 3)
	if err != nil {
		t.Fatal(err)
	}
	if page.CoveringSeq != full.CoveringSeq {
		t.Errorf("covering seq %d, want the full snapshot's %d", page.CoveringSeq, full.CoveringSeq)
	}
	var business, narration []int64
	for _, ev := range page.Events {
		if ev.Type == store.EventNarrationDelta {
			narration = append(narration, ev.Seq)
		} else {
			business = append(business, ev.Seq)
		}
	}
	var wantBusiness []int64
	for _, ev := range full.Events {
		if ev.Type != store.EventNarrationDelta {
			wantBusiness = append(wantBusiness, ev.Seq)
		}
	}
	last := full.CoveringSeq
	if fmt.Sprint(business) != fmt.Sprint(wantBusiness) || fmt.Sprint(narration) != fmt.Sprint([]int64{last - 2, last - 1, last}) {
		t.Errorf("business %v, narration %v; want %v and the last three seqs up to %d", business, narration, wantBusiness, last)
	}
	if page.NarrationLeftOut != 4 {
		t.Errorf("NarrationLeftOut = %d, want 4 (7 of the shown attempt, 3 read)", page.NarrationLeftOut)
	}
	if len(page.Marks) != len(full.Marks) {
		t.Errorf("%d marks, want the full snapshot's %d", len(page.Marks), len(full.Marks))
	}
	// An event as the page read it is the event as the log holds it: its
	// run, parent and family (the run's own, not read again) included. Of
	// a piece of narration the page reads its seq and text only.
	bySeq := map[int64]store.Event{}
	for _, ev := range full.Events {
		bySeq[ev.Seq] = ev
	}
	for _, ev := range page.Events {
		want := bySeq[ev.Seq]
		if ev.RunID != want.RunID || ev.ParentRunID != want.ParentRunID || ev.CorrelationID != want.CorrelationID ||
			ev.Type != want.Type || ev.Class != want.Class {
			t.Errorf("seq %d as the page read it:\n%+v\nas the log holds it:\n%+v", ev.Seq, ev, want)
		}
		if ev.Type == store.EventNarrationDelta {
			if got, text := page.NarrationText(ev), full.NarrationText(want); got != text {
				t.Errorf("seq %d: the page read the text %q, the log holds %q", ev.Seq, got, text)
			}
			continue
		}
		if ev.EventID != want.EventID || string(ev.Payload) != string(want.Payload) || !ev.CreatedAt.Equal(want.CreatedAt) {
			t.Errorf("seq %d as the page read it:\n%+v\nas the log holds it:\n%+v", ev.Seq, ev, want)
		}
	}
}

// TestSnapshotPage_NarrationTextAsItsPayloadSays: the text a page's
// snapshot reads with its narration (PostgreSQL's payload->>'text') is the
// text the payload holds, escapes and all, and a snapshot that read none
// decodes the payload itself.
func TestSnapshotPage_NarrationTextAsItsPayloadSays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "page-text", 1)
	texts := []string{"plain ", `quote " and \ backslash `, "line\nbreak\ttab ", "退款 é <b>&amp;</b> ", "😀"}
	for _, text := range texts {
		if _, err := f.s.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{Text: text})); err != nil {
			t.Fatal(err)
		}
	}
	page, err := f.s.SnapshotPage(ctx, run.ID, len(texts))
	if err != nil {
		t.Fatal(err)
	}
	full, err := f.s.Snapshot(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for name, snap := range map[string]*store.Snapshot{"page": page, "full": full} {
		var got []string
		for _, ev := range snap.Events {
			if ev.Type == store.EventNarrationDelta {
				got = append(got, snap.NarrationText(ev))
			}
		}
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", texts) {
			t.Errorf("%s snapshot's narration %q, want %q", name, got, texts)
		}
	}
}
