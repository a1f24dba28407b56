package views

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// queueItem is a queued run: a child of parent, or of its own when parent
// is uuid.Nil.
func queueItem(version int64, parent uuid.UUID) store.QueueItem {
	it := store.QueueItem{Version: version}
	it.ID = uuid.New()
	it.ParentRunID = uuid.NullUUID{UUID: parent, Valid: parent != uuid.Nil}
	return it
}

// entriesOf names a page's entries: "s" for a run of its own, "P:n" for a
// request with n children, by parent.
func entriesOf(es []QueueEntry, names map[uuid.UUID]string) string {
	var out []string
	for _, e := range es {
		if e.Parent == uuid.Nil {
			out = append(out, "s")
			continue
		}
		out = append(out, fmt.Sprintf("%s:%d", names[e.Parent], len(e.Items)))
	}
	return strings.Join(out, " ")
}

// TestQueueEntries_GroupByRequest: a request's children stand together
// where its first child waits, however the queue interleaves them; a
// stream message appends new entries, redraws requests whose children
// changed and drops requests with none left.
func TestQueueEntries_GroupByRequest(t *testing.T) {
	t.Parallel()
	a, b := uuid.New(), uuid.New()
	names := map[uuid.UUID]string{a: "A", b: "B"}
	shown := &store.QueuePage{Items: []store.QueueItem{queueItem(1, a), queueItem(2, uuid.Nil), queueItem(3, b), queueItem(4, a)}}
	if got, want := entriesOf(QueueEntries(shown), names), "A:2 s B:1"; got != want {
		t.Fatalf("entries = %q, want %q", got, want)
	}

	c := uuid.New()
	names[c] = "C"
	joinedA, single, firstOfC := queueItem(5, a), queueItem(6, uuid.Nil), queueItem(7, c)
	// B's child and the first single were decided; A gained a child, a
	// single and a new request joined.
	next := &store.QueuePage{Items: []store.QueueItem{shown.Items[0], shown.Items[3], joinedA, single, firstOfC}}
	change := NewQueueChange(shown, next, []*store.QueueItem{&next.Items[2], &next.Items[3], &next.Items[4]})
	if got, want := entriesOf(change.Appended, names), "s C:1"; got != want {
		t.Errorf("appended = %q, want %q", got, want)
	}
	if got, want := entriesOf(change.Redrawn, names), "A:3"; got != want {
		t.Errorf("redrawn = %q, want %q", got, want)
	}
	if !slices.Equal(change.Dropped, []uuid.UUID{b}) {
		t.Errorf("dropped = %v, want B (%s)", change.Dropped, b)
	}
	if same := NewQueueChange(next, next, nil); len(same.Appended)+len(same.Redrawn)+len(same.Dropped) != 0 {
		t.Errorf("no change = %+v, want nothing to do", same)
	}
}
