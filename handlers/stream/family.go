package stream

import (
	"context"
	"strconv"
	"strings"

	"github.com/refundd/refundd/store"
)

// A family (a request's parent run and its children, README's "Families") is
// watched over one stream that carries every run's log: each run is a
// logFeed of its own, with its own cursor, tail and resets, so nothing is
// ordered across the runs and an expired cursor resets only its run.
//
// What the client keeps is one cursor for all of them, the family cursor:
// each run's last seq, in family order (the parent's, then each child's by
// position), joined by dots: "9.4.7.3". Every message's SSE id is the
// family cursor as of that message, so the last id a client received
// names, for every run, the last seq it was sent of that run. A browser's
// own reconnect (Last-Event-ID) or a program's ?after= with that id
// resumes each run strictly after its own seq: nothing lost, nothing
// twice, with no script needed on the client to keep per-run ids. (Ids of
// the form "RUN:SEQ", as GET /streams sends, would not do: Last-Event-ID
// holds the last message's id only, which names one run, and a client
// would have to keep the others' seqs itself.) A client that applies
// messages once (static/live.js) compares two family cursors part by
// part: a message is new when any part is above what it applied.
//
// The family is one stream as the caps and the access re-checks see it:
// only the parent's Sub is registered, and the family's access is the
// parent's (the adapter decides it, once for every run): a user who may
// no longer see the parent loses every run of the family at once. The
// close event comes once, when every run has ended (or access is lost).
// Each run keeps its own bounded outbox, so what a family's connection may
// hold is bounded by the family's size (MAX_FAMILY_SIZE + 1 runs), and a
// run whose outbox overflows cuts the whole connection, which then resumes
// every run from the store.

// ParseFamilyCursor splits a family cursor into its runs' cursors, for a
// family of n runs. "" (and a lone "0") is every run from its start. A
// cursor with another number of parts is CodeCursorInvalid, answered 400:
// it is not one this family's stream sent. A part that is not a seq is
// left to its run, which then starts over from a snapshot (as one run's
// stream does with such a cursor).
func ParseFamilyCursor(raw string, n int) ([]string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || raw == "0" {
		return make([]string, n), nil
	}
	if parts := strings.Count(raw, ".") + 1; parts != n {
		return nil, store.Errorf(store.CodeCursorInvalid,
			"a family's cursor lists the last seq of each of its %d runs, the parent's first and then each child's in order, joined by dots (like %s); %s has %d",
			n, strings.TrimSuffix(strings.Repeat("0.", n), "."), store.QuoteCursor(raw), parts)
	}
	return strings.Split(raw, "."), nil
}

// AddFamily adds the stream of a family to the connection: runs[0] is the
// parent, then its children in order; cursors are ParseFamilyCursor's;
// views[i] is runs[i]'s view. cred and access are the parent's: the
// family is re-checked as one stream, through views[0].Recheck, and its
// access given to every run.
func (sc *Conn) AddFamily(runs []*store.Run, cred store.StreamCredential, access int, cursors []string, views []RunView) Refused {
	sub, refused := sc.admit(cred, access)
	if refused != "" {
		return refused
	}
	fam := &familyFeed{sc: sc, parent: sub}
	for i, run := range runs {
		s := sub
		if i > 0 {
			// A child's Sub only takes its tail's pages: the caps and the
			// re-checks count the family once, by its parent.
			s = newSub(&sc.e.cfg, sc.userID, store.StreamCredential{}, access, sc.ready, sc.recheck)
		}
		leaveTail, tailFrom := sc.e.tails.join(run.ID, run.LastSeq, s)
		f := &logFeed{sc: sc, v: views[i], runID: run.ID, sub: s, run: run, fam: fam, tailFrom: tailFrom}
		f.asked, f.askedErr = store.ParseCursor(cursors[i])
		f.leaveFn = leaveTail
		if i == 0 {
			f.leaveFn = func() { leaveTail(); sc.e.reg.remove(sub) }
		}
		fam.runs = append(fam.runs, f)
	}
	sc.feeds = append(sc.feeds, fam)
	return ""
}

// familyFeed is a family's stream: its runs' logFeeds, served as one.
type familyFeed struct {
	sc     *Conn
	parent *Sub
	runs   []*logFeed // the parent's, then the children's in order
	left   bool
}

// cursor is the family cursor: every run's last seq handled, in order.
func (fam *familyFeed) cursor() string {
	var b strings.Builder
	for i, f := range fam.runs {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.FormatInt(f.cursor, 10))
	}
	return b.String()
}

func (fam *familyFeed) name() string   { return "family " + fam.runs[0].runID.String() }
func (fam *familyFeed) prefix() string { return fam.cursor() }

func (fam *familyFeed) each(fn func(f *logFeed) error) error {
	for _, f := range fam.runs {
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

func (fam *familyFeed) prepare(ctx context.Context) error {
	return fam.each(func(f *logFeed) error { return f.prepare(ctx) })
}

func (fam *familyFeed) begin(ctx context.Context) error {
	return fam.each(func(f *logFeed) error { return f.begin(ctx) })
}

func (fam *familyFeed) update(ctx context.Context) error {
	return fam.each(func(f *logFeed) error { return f.update(ctx) })
}

// recheck decides the family's access once, by its parent's view, and
// gives it to every run: each starts over from a snapshot of what may now
// be shown when it changed.
func (fam *familyFeed) recheck(ctx context.Context) error {
	now, err := fam.runs[0].v.Recheck(ctx)
	if err != nil {
		return err
	}
	if now == fam.parent.Access() {
		return nil
	}
	fam.parent.access.Store(int32(now))
	return fam.each(func(f *logFeed) error {
		f.sub.access.Store(int32(now))
		return f.fresh(ctx, false)
	})
}

// finished: every run of the family has ended, and all of it is sent.
func (fam *familyFeed) finished() bool {
	for _, f := range fam.runs {
		if !f.done {
			return false
		}
	}
	return true
}

func (fam *familyFeed) closing(ctx context.Context, r Reason) ([]byte, error) {
	return fam.runs[0].v.Closing(ctx, r)
}

func (fam *familyFeed) leave() {
	if fam.left {
		return
	}
	fam.left = true
	for _, f := range fam.runs {
		f.leave()
	}
}

// overflowed reports whether any run's subscriber was cut for not reading.
func (fam *familyFeed) overflowed() bool {
	for _, f := range fam.runs {
		if _, cut := f.sub.out.take(); cut != nil {
			return true
		}
	}
	return false
}
