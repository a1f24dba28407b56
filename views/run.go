package views

import (
	"math"
	"strconv"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// Viewer is what the person looking at a run may do with it; it decides
// which buttons the page offers (the POST handlers decide for real).
type Viewer struct {
	MayApprove bool
	MayCancel  bool
	// UserID is who is looking (0: nobody signed in): their own decisions
	// read "you".
	UserID int64
	// Staff (approvers, support, admins) see who decided by name and the
	// reasons given, and may give one with their own decisions.
	Staff bool
	// MayAskAgain: the viewer owns the run and may start refunds, so a
	// run that ended without a refund offers them "Ask again".
	MayAskAgain bool
	// Lang is the language the viewer reads (English when unset); a
	// stream's is fixed when it opens.
	Lang Lang
}

// Narration is one stored piece of the agent's narration.
type Narration struct {
	Seq  int64
	Text string
}

// RunView is what the run page shows: the run's Progress, built from one
// snapshot and then moved forward event by event by the live stream (Apply),
// so the page and the fragments the stream sends come from the same values.
type RunView struct {
	store.Progress
	Viewer Viewer
	// Full is AccessFull: narration and timeline. Without it the view holds
	// the state and the outcome only.
	Full        bool
	ReplayFloor int64
	// Narration and Timeline are filled from the snapshot only; the stream
	// sends later pieces one by one and never keeps them.
	Narration []Narration
	Timeline  []store.Event
	// NarrationTrimmed: narration older than the replay window is gone.
	NarrationTrimmed bool
	// NarrationHidden: earlier pieces of narration the view leaves out
	// (NarrationShown). They are kept; the page links to them.
	NarrationHidden int
	// Answer is what the viewer's own decision just did, shown next to the
	// buttons; the next render from the log replaces it.
	Answer string
	// said is Words, computed once for the parts of one render; Apply
	// forgets it.
	said *Said
	// Retries link the run to its chain of asking again (the page's, not
	// the stream's: the links stay as the page was rendered).
	Retries *store.Retries
}

// NewRunView builds the view of a snapshot, with the latest NarrationShown
// pieces of narration (the others are counted in NarrationHidden). full is
// whether the viewer may see the narration and the timeline.
func NewRunView(snap *store.Snapshot, full bool, viewer Viewer) *RunView {
	return newRunView(snap, full, viewer, NarrationShown)
}

// NewRunViewAllNarration is NewRunView with every piece of narration the
// replay window holds (AllNarrationURL).
func NewRunViewAllNarration(snap *store.Snapshot, full bool, viewer Viewer) *RunView {
	return newRunView(snap, full, viewer, math.MaxInt)
}

func newRunView(snap *store.Snapshot, full bool, viewer Viewer, latest int) *RunView {
	v := &RunView{Progress: store.ProgressOf(snap), Viewer: viewer, Full: full, ReplayFloor: snap.ReplayFloor}
	if !full {
		return v
	}
	var narration []int // the shown pieces' places in snap.Events
	for i, ev := range snap.Events {
		switch {
		case ev.Type == store.EventNarrationDelta && v.ShowsNarration(ev):
			narration = append(narration, i)
		case inTimeline(ev):
			v.Timeline = append(v.Timeline, ev)
		}
	}
	// Only what is shown is decoded; a page's snapshot (SnapshotPage) did
	// not even read the rest.
	v.NarrationHidden = snap.NarrationLeftOut
	if extra := len(narration) - latest; extra > 0 {
		v.NarrationHidden, narration = v.NarrationHidden+extra, narration[extra:]
	}
	v.Narration = make([]Narration, 0, len(narration))
	for _, i := range narration {
		ev := &snap.Events[i]
		v.Narration = append(v.Narration, Narration{Seq: ev.Seq, Text: snap.NarrationText(*ev)})
	}
	// Only retention raises the floor; a restart's skipped seqs are no
	// loss and leave it be.
	v.NarrationTrimmed = snap.ReplayFloor > 0
	return v
}

// NarrationShown is how many of the latest pieces of narration a run's
// view holds unless asked for all (AllNarrationURL): a long run's page
// then costs about what reading its snapshot does, not the HTML of
// hundreds of pieces.
const NarrationShown = 100

// AllNarrationURL is the run page with every piece of narration the
// replay window holds.
func AllNarrationURL(runID uuid.UUID) string {
	return "/runs/" + runID.String() + "?narration=all#run-narration"
}

// CanApprove and CanCancel say which buttons to offer now.
func (v *RunView) CanApprove() bool {
	return v.Viewer.MayApprove && v.State == store.StateAwaitingApproval && !v.CancelRequested
}

// CanCancel offers the cancel only while it can still stop the money:
// once a call about an operation may have reached the provider, only its
// answer can say whether the refund was made (store.CancelTooLate).
func (v *RunView) CanCancel() bool {
	return v.Viewer.MayCancel && !v.Terminal() && !v.CancelRequested && !store.CancelTooLate(v.Operations)
}

// CanAskAgain offers "Ask again" on a run that ended without a refund,
// to its owner (AskAgainURL).
func (v *RunView) CanAskAgain() bool {
	return v.Viewer.MayAskAgain && v.Terminal() && v.State != store.StateCompleted
}

// AskAgainURL opens the start form filled in as the run was asked for.
func AskAgainURL(runID uuid.UUID) string { return "/runs/" + runID.String() + "/again" }

// Restarted reports whether a step began again, so the narration shown is
// the new attempt's only.
func (v *RunView) Restarted() bool { return v.RestartSeq > 0 }

// Words is what the run says to this viewer (words.go), computed once per
// state of the view: every part of one render shows a piece of the same Said.
func (v *RunView) Words() Said {
	if v.said == nil {
		w := Words(&v.Progress, v.Viewer)
		v.said = &w
	}
	return *v.said
}

// Apply moves the view forward by one event (store.Progress.Apply); its
// words are computed again at their next use.
func (v *RunView) Apply(ev store.Event) {
	v.Progress.Apply(ev)
	v.said = nil
}

// inTimeline reports whether an event is a line of the run page's
// timeline, the business history. A restarted step is told beside the
// narration instead (NarrationRestarted).
func inTimeline(ev store.Event) bool { return ev.Class != store.ClassPresentation }

// NarrationText is the text of a narration.delta event.
func NarrationText(ev store.Event) string {
	p, _ := store.PayloadOf[store.NarrationDelta](ev)
	return p.Text
}

// Stable element IDs of the run page's parts.
func NarrationID(seq int64) string { return "n-" + strconv.FormatInt(seq, 10) }
func EventID(seq int64) string     { return "ev-" + strconv.FormatInt(seq, 10) }

// NarrationAnnounceEvery is, in milliseconds, how often at most the run
// page reads new narration to a screen reader: each word as it arrives
// would drown everything else.
const NarrationAnnounceEvery = 8000

// StreamURL is where the page's stream resumes: strictly after seq.
func StreamURL(runID uuid.UUID, after int64) string {
	return "/runs/" + runID.String() + "/events?after=" + strconv.FormatInt(after, 10)
}

// finishedIn is a stream's closing message in l when it is one of the
// finished lines words.go and family.go know (RunFinished,
// RequestFinished), whichever handler sends it; other messages come
// worded by their sender.
func finishedIn(l Lang, message string) string {
	switch message {
	case RunFinished:
		return l.T("run.finished")
	case RequestFinished:
		return l.T("family.finished")
	}
	return message
}
