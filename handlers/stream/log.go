package stream

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/store"
)

// A run's log stream follows one plan:
//
//  1. the adapter checks access before anything is read, on every request,
//     and the caps refuse what is over them (registry.go): a refused
//     stream is told when to retry;
//  2. join the run's shared tail (tail.go) BEFORE the first read, so
//     whatever commits from then on is either in that read or in a page
//     the tail hands over;
//  3. replay seq > cursor from the store in pages, then send what the tail
//     hands over, in seq order, each seq once: what is sent always comes
//     from the store, and a gap in what the tail handed over is read from
//     the store again;
//  4. a cursor that is expired, invalid or from the future gets event: reset
//     with a fresh snapshot, and the stream goes on after its covering seq;
//  5. a finished run, once everything is sent, and a denied viewer get the
//     named event "close", which htmx-ext-sse's sse-close stops on.

// RunView is an adapter's view of one run for one viewer: what they may
// see of it, and the fragments that say it.
type RunView interface {
	// Head is the snapshot a stream that resumes from a cursor continues
	// from: the run's state without its log.
	Head(ctx context.Context, run *store.Run) (*store.Snapshot, error)
	// Begin adopts head as what the viewer has been shown.
	Begin(head *store.Snapshot)
	// Reset adopts snap in place of everything sent and renders it (event:
	// reset); banner: the page says the run went on while it was away.
	Reset(ctx context.Context, snap *store.Snapshot, banner bool) ([]byte, error)
	// Event applies ev and renders it: name "" is a plain message; nil
	// data sends nothing (an event this viewer may not see). What is the
	// same for every viewer is encoded through frames (Frames.Get), once.
	Event(ctx context.Context, ev store.Event, frames *Frames) (name string, data []byte, err error)
	// Recheck decides the viewer's access again: a Reason ends the
	// stream; an access other than the last starts it over from a
	// snapshot of what may now be shown.
	Recheck(ctx context.Context) (access int, err error)
	// Closing renders the close event for r.
	Closing(ctx context.Context, r Reason) ([]byte, error)
}

// AddRun adds run's stream to the connection (or says which cap refuses
// it) and joins the run's tail: before the first read, so whatever commits
// from here on either is in that read or in a page the tail hands over.
// cursor is what the client asked to resume after; idPrefix is "" for a
// connection of one run, "RUN:" for one of several.
func (sc *Conn) AddRun(run *store.Run, cred store.StreamCredential, access int, cursor, idPrefix string, v RunView) Refused {
	sub, refused := sc.admit(cred, access)
	if refused != "" {
		return refused
	}
	leaveTail, tailFrom := sc.e.tails.join(run.ID, run.LastSeq, sub)
	f := &logFeed{sc: sc, v: v, runID: run.ID, sub: sub, run: run, idPrefix: idPrefix, tailFrom: tailFrom}
	f.asked, f.askedErr = store.ParseCursor(cursor)
	f.leaveFn = func() { leaveTail(); sc.e.reg.remove(sub) }
	sc.feeds = append(sc.feeds, f)
	return ""
}

// logFeed is one run's stream: where it is in the run's log.
type logFeed struct {
	sc       *Conn
	v        RunView
	runID    uuid.UUID
	sub      *Sub
	run      *store.Run  // as loaded for the access check
	asked    int64       // the cursor it was asked to resume from
	askedErr error       // why that cursor is not one (store.ParseCursor)
	tailFrom int64       // the tail hands over every seq after this (tails.join)
	idPrefix string      // "": ids are seqs; "RUN:" on a connection of several runs
	fam      *familyFeed // the family it is a run of (family.go), nil for none
	leaveFn  func()      // leaves the tail and the registry

	// The start, as prepare found it.
	snap    *store.Snapshot
	resumes bool // false: the stream starts with a reset to snap

	cursor int64 // the last seq handled: sent, or left out for this viewer
	done   bool  // the run has ended as of cursor
}

func (f *logFeed) name() string   { return "run " + f.runID.String() }
func (f *logFeed) prefix() string { return f.idPrefix }
func (f *logFeed) finished() bool { return f.done }
func (f *logFeed) leave()         { f.leaveFn() }
func (f *logFeed) closing(ctx context.Context, r Reason) ([]byte, error) {
	return f.v.Closing(ctx, r)
}

// prepare judges the cursor against the run the adapter read, so a cursor
// that cannot resume (malformed, expired, from the future) costs one full
// snapshot read and nothing else. Only one that resumes reads the
// snapshot's head and then replays after it; if pruning overtakes it
// meanwhile, the reader falls back to a snapshot.
func (f *logFeed) prepare(ctx context.Context) error {
	cursor, err := f.asked, f.askedErr
	if err == nil {
		err = f.run.CheckCursor(cursor)
	}
	if err != nil {
		f.snap, err = f.sc.e.store.Snapshot(ctx, f.runID)
		return err
	}
	f.cursor, f.resumes = cursor, true
	f.snap, err = f.v.Head(ctx, f.run)
	return err
}

// begin sends the start: a reset to the snapshot, or the replay after the
// cursor.
func (f *logFeed) begin(ctx context.Context) error {
	f.sub.w.Store(f.sc.w)
	if !f.resumes {
		metrics.StreamResets.WithLabelValues("cursor").Inc()
		return f.reset(ctx, f.snap, true)
	}
	metrics.StreamReplays.Inc()
	f.v.Begin(f.snap)
	f.done = store.Terminal(f.snap.Run.State)
	if f.cursor == f.snap.CoveringSeq && f.tailFrom <= f.cursor {
		// Nothing to read: the client has everything up to the run's end as
		// read (a page that just loaded, a reconnect with nothing missed),
		// and the tail hands over everything after it.
		return nil
	}
	return f.catchUp(ctx)
}

// catchUp reads the log after the cursor from the store and sends it,
// page by page, until it has caught up (store.Follow without a Wait).
func (f *logFeed) catchUp(ctx context.Context) error {
	fl := &store.Follower{RunID: f.runID, Cursor: f.cursor, PageSize: f.sc.e.cfg.PageSize,
		Deliver: func(ctx context.Context, evs []store.Event) error {
			for _, ev := range evs {
				if err := f.send(ctx, ev, nil, false); err != nil {
					return err
				}
			}
			return f.sc.w.flush()
		}}
	err := f.sc.e.store.Follow(ctx, fl)
	metrics.StreamReads.Add(float64(fl.Reads))
	switch code := store.ErrorCode(err); {
	case err == nil:
		return nil
	case code == store.CodeCursorExpired || code == store.CodeCursorInvalid:
		// Pruned since the stream started: start over from a snapshot.
		metrics.StreamResets.WithLabelValues("pruned").Inc()
		return f.fresh(ctx, true)
	case errors.Is(err, store.ErrNotFound):
		return Denied
	}
	return err
}

// update sends what the tail handed over, in seq order, once each. An
// item that does not follow on from the cursor (a gap, or merged
// narration that overlaps what was sent) is read from the store instead.
func (f *logFeed) update(ctx context.Context) error {
	items, cut := f.sub.out.take()
	if cut != nil {
		return cut
	}
	defer f.sub.out.giveBack(items)
	for _, it := range items {
		var err error
		switch {
		case it.kind == itemResync:
			metrics.StreamResets.WithLabelValues("pruned").Inc()
			err = f.fresh(ctx, true)
		case it.ev.Seq <= f.cursor:
		case it.from != f.cursor+1:
			err = f.catchUp(ctx)
		default:
			err = f.send(ctx, it.ev, it.frames, true)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// send writes one event for this viewer and moves the cursor past it.
// live: it comes from the tail (frames: its shared encodings), so its
// delivery time is recorded.
func (f *logFeed) send(ctx context.Context, ev store.Event, frames *Frames, live bool) error {
	if ev.Seq <= f.cursor {
		return nil
	}
	f.cursor = ev.Seq
	switch ev.Type {
	case store.EventRunCompleted, store.EventRunFailed, store.EventRunCanceled:
		f.done = true
	}
	name, data, err := f.v.Event(ctx, ev, frames)
	if err != nil || data == nil {
		return err
	}
	f.write(name, ev.Seq, data)
	if live {
		metrics.StreamDelivery.Observe(time.Since(ev.CreatedAt).Seconds())
	}
	return nil
}

// recheck decides the viewer's access again: the stream ends, goes on, or
// starts over from a snapshot of what may now be shown.
func (f *logFeed) recheck(ctx context.Context) error {
	now, err := f.v.Recheck(ctx)
	if err != nil {
		return err
	}
	if now != f.sub.Access() {
		// Less (or more) may be shown now: replace the page's body with a
		// snapshot of what is allowed, and go on after it.
		f.sub.access.Store(int32(now))
		metrics.StreamResets.WithLabelValues("access").Inc()
		return f.fresh(ctx, false)
	}
	return nil
}

// fresh sends a new snapshot in place of everything sent so far.
func (f *logFeed) fresh(ctx context.Context, banner bool) error {
	snap, err := f.sc.e.store.Snapshot(ctx, f.runID)
	if err != nil {
		return err
	}
	return f.reset(ctx, snap, banner)
}

// reset sends snap in place of everything sent so far, and moves the
// cursor to what it covers.
func (f *logFeed) reset(ctx context.Context, snap *store.Snapshot, banner bool) error {
	f.cursor, f.done = snap.CoveringSeq, store.Terminal(snap.Run.State)
	data, err := f.v.Reset(ctx, snap, banner)
	if err != nil {
		return err
	}
	f.write("reset", snap.CoveringSeq, data)
	return nil
}

// write sends one message of the run: its id is the seq (after the
// stream's prefix), or the family cursor for a run of a family, whose
// cursor has already moved past it.
func (f *logFeed) write(name string, seq int64, data []byte) {
	if f.fam != nil {
		f.sc.w.event(name, f.fam.cursor(), data)
		return
	}
	f.sc.message(f.idPrefix, name, seq, data)
}
