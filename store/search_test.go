package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// TestSearchRuns_SaysWhichFailedRunsWereDeclined: a list tells a run the
// provider declined from one that failed before reaching it.
func TestSearchRuns_SaysWhichFailedRunsWereDeclined(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	declined, failed := f.start(t, "declined", 1), f.start(t, "failed", 1)
	op, err := f.s.SubmitOperation(ctx, declined.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpFailed, Reason: "card closed"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*store.Run{declined, failed} {
		if _, err := f.s.FinishRun(ctx, r.ID, store.StateFailed, store.Say("No.")); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := f.s.SearchRuns(ctx, store.RunFilter{State: store.StateFailed})
	if err != nil {
		t.Fatal(err)
	}
	got := map[uuid.UUID]bool{}
	for _, r := range runs {
		got[r.ID] = r.Declined
	}
	if len(got) != 2 || !got[declined.ID] || got[failed.ID] {
		t.Errorf("declined per run = %v; want %s declined and %s not", got, declined.ID, failed.ID)
	}
}
