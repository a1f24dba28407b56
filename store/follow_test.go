package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

var errStopFollow = errors.New("test: stop following")

// narrate appends n narration deltas to the run.
func narrate(t *testing.T, s *store.Store, runID uuid.UUID, n int) {
	t.Helper()
	for range n {
		if _, err := s.Append(context.Background(), runID, store.EventOf(store.NarrationDelta{})); err != nil {
			t.Fatal(err)
		}
	}
}

// follow runs Follow under a deadline, so a Follow that never stops fails
// the test instead of hanging it.
func follow(t *testing.T, s *store.Store, f *store.Follower) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.Follow(ctx, f)
	if ctx.Err() != nil {
		t.Fatalf("Follow still running after its deadline (err %v)", err)
	}
	return err
}

// pages records the seqs of each delivered page.
type pages [][]int64

func (p *pages) deliver(_ context.Context, evs []store.Event) error {
	var seqs []int64
	for _, e := range evs {
		seqs = append(seqs, e.Seq)
	}
	*p = append(*p, seqs)
	return nil
}

func (p pages) seqs() []int64 { return slices.Concat(p...) }

func TestFollow_ReplaysPagesInOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := f.start(t, "k", 100) // seq 1
	narrate(t, f.s, run.ID, 9)  // seqs 2..10

	t.Run("across a page boundary, then stops caught up", func(t *testing.T) {
		var got pages
		fl := &store.Follower{RunID: run.ID, Cursor: 2, PageSize: 4, Deliver: got.deliver}
		if err := follow(t, f.s, fl); err != nil {
			t.Fatal(err)
		}
		if want := (pages{{3, 4, 5, 6}, {7, 8, 9, 10}}); !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("pages = %v, want %v", got, want)
		}
		if fl.Cursor != 10 {
			t.Errorf("cursor = %d, want 10", fl.Cursor)
		}
	})
	t.Run("waits only once caught up", func(t *testing.T) {
		var got pages
		var atWait []int64
		fl := &store.Follower{RunID: run.ID, PageSize: 5, Deliver: got.deliver,
			Wait: func(context.Context) error {
				atWait = got.seqs()
				return errStopFollow
			}}
		if err := follow(t, f.s, fl); !errors.Is(err, errStopFollow) {
			t.Fatalf("Follow = %v, want the Wait's error", err)
		}
		if want := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(atWait, want) {
			t.Errorf("delivered before the first wait = %v, want %v", atWait, want)
		}
	})
}

func TestFollow_FollowsAfterAWake(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := f.start(t, "k", 100) // seq 1
	var got pages
	waits := 0
	fl := &store.Follower{RunID: run.ID, Deliver: got.deliver,
		Wait: func(context.Context) error {
			waits++
			if waits == 1 {
				// What commits while the reader waits is read after the wake.
				narrate(t, f.s, run.ID, 2)
				return nil
			}
			return errStopFollow
		}}
	if err := follow(t, f.s, fl); !errors.Is(err, errStopFollow) {
		t.Fatalf("Follow = %v, want the Wait's error", err)
	}
	if want := (pages{{1}, {2, 3}}); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("pages = %v, want %v", got, want)
	}
	if fl.Cursor != 3 {
		t.Errorf("cursor = %d, want 3", fl.Cursor)
	}
}

func TestFollow_CallerMovesTheCursor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := f.start(t, "k", 100) // seq 1
	narrate(t, f.s, run.ID, 4)  // seqs 2..5
	var got pages
	waits := 0
	fl := &store.Follower{RunID: run.ID, Cursor: 1, PageSize: 2, Deliver: got.deliver}
	fl.Wait = func(context.Context) error {
		waits++
		if waits > 1 {
			return errStopFollow
		}
		// A reset: a snapshot covered everything up to 5 but 4 and 5 were
		// already sent; the next read starts after the cursor given here.
		narrate(t, f.s, run.ID, 2) // seqs 6, 7
		fl.Cursor = 6
		return nil
	}
	if err := follow(t, f.s, fl); !errors.Is(err, errStopFollow) {
		t.Fatalf("Follow = %v, want the Wait's error", err)
	}
	if want := (pages{{2, 3}, {4, 5}, {7}}); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("pages = %v, want %v", got, want)
	}
}

func TestFollow_StopsOnTheCallersError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := f.start(t, "k", 100) // seq 1
	narrate(t, f.s, run.ID, 5)  // seqs 2..6
	calls := 0
	fl := &store.Follower{RunID: run.ID, Cursor: 1, PageSize: 2,
		Deliver: func(context.Context, []store.Event) error {
			calls++
			if calls == 2 {
				return errStopFollow
			}
			return nil
		},
		Wait: func(context.Context) error {
			t.Error("Follow waited after Deliver failed")
			return errStopFollow
		}}
	if err := follow(t, f.s, fl); !errors.Is(err, errStopFollow) {
		t.Fatalf("Follow = %v, want the Deliver's error", err)
	}
	if calls != 2 {
		t.Errorf("Deliver called %d times, want 2", calls)
	}
	// The refused page (4, 5) was not delivered: the cursor stays before it.
	if fl.Cursor != 3 {
		t.Errorf("cursor = %d, want 3", fl.Cursor)
	}
}

func TestFollow_CursorExpired(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "k", 100) // seq 1
	narrate(t, f.s, run.ID, 3)  // seqs 2..4
	if _, err := f.s.Prune(ctx, store.Retention{Presentation: time.Microsecond}); err != nil {
		t.Fatal(err)
	}
	var got pages
	fl := &store.Follower{RunID: run.ID, Cursor: 1, Deliver: got.deliver}
	if err := follow(t, f.s, fl); !errors.Is(err, store.ErrCursorExpired) {
		t.Fatalf("Follow from 1 after pruning 2..4 = %v, want ErrCursorExpired", err)
	}
	if len(got) != 0 || fl.Cursor != 1 {
		t.Errorf("delivered %v and moved the cursor to %d, want nothing delivered at 1", got, fl.Cursor)
	}
	t.Run("from the floor it resumes", func(t *testing.T) {
		narrate(t, f.s, run.ID, 1) // seq 5
		fl.Cursor = 4
		if err := follow(t, f.s, fl); err != nil {
			t.Fatal(err)
		}
		if want := []int64{5}; !slices.Equal(got.seqs(), want) {
			t.Errorf("seqs = %v, want %v", got.seqs(), want)
		}
	})
}

func TestFollow_SurfacesStoreErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := f.start(t, "k", 100) // seq 1
	var got pages
	for _, tc := range []struct {
		name   string
		runID  uuid.UUID
		cursor int64
		want   error
	}{
		{"cursor from the future", run.ID, 2, store.ErrCursorInvalid},
		{"unknown run", uuid.New(), 0, store.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := &store.Follower{RunID: tc.runID, Cursor: tc.cursor, Deliver: got.deliver}
			if err := follow(t, f.s, fl); !errors.Is(err, tc.want) {
				t.Errorf("Follow = %v, want %v", err, tc.want)
			}
		})
	}
}
