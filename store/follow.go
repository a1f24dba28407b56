package store

import (
	"context"

	"github.com/google/uuid"
)

// Follower is one reader of a run's log: what it has (Cursor), what it
// does with each page (Deliver) and how it waits for more (Wait).
// `refundd events --follow` reads through it; the server-sent streams do
// not (they read through the per-run tails in handlers/).
type Follower struct {
	RunID uuid.UUID
	// Cursor is the seq of the last event delivered. Follow moves it past
	// each delivered page; Wait, or the caller between two Follow calls,
	// may move it too (a reset jumps to a snapshot's CoveringSeq).
	Cursor   int64
	PageSize int // events per read; 0 reads MaxPage
	// Deliver gets each non-empty page, in seq order. The cursor moves past
	// the page only once Deliver returns nil.
	Deliver func(ctx context.Context, evs []Event) error
	// Wait returns once the log may have grown: a notification, a poll,
	// a timer. It is called only when the reader has caught up. A nil Wait
	// ends Follow then instead.
	Wait func(ctx context.Context) error
}

// Follow replays the run's log strictly after f.Cursor, then follows it:
// it reads a page, delivers it, reads again at once while pages come back
// full, and otherwise waits. What is delivered always comes from the log,
// so a lost wake-up only delays it.
//
// Follow returns the first error from the log, Deliver or Wait, as it came:
// ErrCursorExpired and ErrCursorInvalid (the reader should start over from
// a snapshot and may call Follow again with the cursor moved), ErrNotFound
// for a missing run, or the caller's own error to stop. With a nil Wait it
// returns nil once caught up.
func (s *Store) Follow(ctx context.Context, f *Follower) error {
	page := pageLimit(f.PageSize)
	for {
		evs, err := s.EventsAfter(ctx, f.RunID, f.Cursor, page)
		if err != nil {
			return err
		}
		if len(evs) > 0 {
			if err := f.Deliver(ctx, evs); err != nil {
				return err
			}
			f.Cursor = evs[len(evs)-1].Seq
		}
		if len(evs) == page {
			continue
		}
		if f.Wait == nil {
			return nil
		}
		if err := f.Wait(ctx); err != nil {
			return err
		}
	}
}
