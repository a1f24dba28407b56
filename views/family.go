package views

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// FamilyView is what a request's page shows: the request (its parent run)
// and each of its refunds (its children), every one a RunView built from
// one family snapshot and moved forward by its own run's events. What the
// page says about the request is derived from the children's views alone
// (FamilyWords), so it cannot say other than the cards beside it.
type FamilyView struct {
	// Runs is the parent's view, then each child's in family order: the
	// order of the family cursor.
	Runs []*RunView
	// Offline marks the runs whose stream started over from a snapshot:
	// their card says the refund went on while the page was away.
	Offline []bool
	// Answer is what the viewer's own decision just did (a cancel sent
	// without JavaScript), shown next to the button once.
	Answer string
	// Retries link the request to its chain of asking again.
	Retries *store.Retries
}

// NewFamilyView builds the view of a family snapshot for viewer; full is
// whether they may see each run's history (the family's access is the
// parent's).
func NewFamilyView(fs *store.FamilySnapshot, full bool, viewer Viewer) *FamilyView {
	f := &FamilyView{Runs: make([]*RunView, 0, 1+len(fs.Children))}
	f.Runs = append(f.Runs, familyRunView(fs.Parent, full, viewer))
	for _, c := range fs.Children {
		f.Runs = append(f.Runs, familyRunView(c, full, viewer))
	}
	f.Offline = make([]bool, len(f.Runs))
	return f
}

// familyRunView is a run's view as the family page holds it: its progress,
// without narration or timeline, which the page does not show.
func familyRunView(snap *store.Snapshot, full bool, viewer Viewer) *RunView {
	return &RunView{Progress: store.ProgressOf(snap), Viewer: viewer, Full: full, ReplayFloor: snap.ReplayFloor}
}

// Parent is the request's own view.
func (f *FamilyView) Parent() *RunView { return f.Runs[0] }

// Children are the refunds' views, in family order.
func (f *FamilyView) Children() []*RunView { return f.Runs[1:] }

// Cursor is the family cursor the page covers: each run's covering seq,
// the parent's first, joined by dots (handlers/stream/family.go).
func (f *FamilyView) Cursor() string {
	parts := make([]string, len(f.Runs))
	for i, v := range f.Runs {
		parts[i] = strconv.FormatInt(v.CoveringSeq, 10)
	}
	return strings.Join(parts, ".")
}

// Ended reports whether every refund of the request has ended.
func (f *FamilyView) Ended() bool {
	for _, c := range f.Children() {
		if !c.Terminal() {
			return false
		}
	}
	return true
}

// CanCancel offers the request's cancel while any refund goes on and no
// cancel was asked for: to its owner and approvers (Viewer.MayCancel).
func (f *FamilyView) CanCancel() bool {
	p := f.Parent()
	return p.Viewer.MayCancel && !p.CancelRequested && !f.Ended()
}

// Waiting are the refunds that wait for an approver's decision, with no
// cancel asked for.
func (f *FamilyView) Waiting() []*RunView {
	var out []*RunView
	for _, c := range f.Children() {
		if c.State == store.StateAwaitingApproval && !c.CancelRequested {
			out = append(out, c)
		}
	}
	return out
}

// CanApproveAll offers an approver the approval of every refund that
// waits for one (POST /runs/{parent}/approve), while the request is not
// being canceled.
func (f *FamilyView) CanApproveAll() bool {
	p := f.Parent()
	return p.Viewer.MayApprove && !p.CancelRequested && len(f.Waiting()) > 0
}

// notRefunded counts the refunds that ended without one.
func (f *FamilyView) notRefunded() int {
	n := 0
	for _, c := range f.Children() {
		if c.Terminal() && c.State != store.StateCompleted {
			n++
		}
	}
	return n
}

// CanAskAgain offers the request's owner "Ask again" once every refund
// has ended and one at least was not made: the new request asks again for
// those (store.AskAgainOf).
func (f *FamilyView) CanAskAgain() bool {
	return f.Parent().Viewer.MayAskAgain && f.Ended() && f.notRefunded() > 0
}

// AskAgainLabel is the request's "Ask again" button.
func (f *FamilyView) AskAgainLabel() string {
	return askAgainLabel(f.notRefunded(), len(f.Children()), f.Parent().Viewer.Lang)
}

// ActionsKey names what the request's decisions show: the stream draws
// them again only when it changes, so a confirm the viewer has open stays
// open while the refunds move.
func (f *FamilyView) ActionsKey() string {
	key := fmt.Sprint(f.CanCancel(), f.CanAskAgain())
	if f.CanApproveAll() {
		key += fmt.Sprint(" approve ", len(f.Waiting())) // the count is in its words
	}
	return key
}

// Words is what the request says to its viewer (FamilyWords).
func (f *FamilyView) Words() FamilySaid {
	ps := make([]*store.Progress, 0, len(f.Runs)-1)
	for _, c := range f.Children() {
		ps = append(ps, &c.Progress)
	}
	p := f.Parent()
	return FamilyWords(p.Run, p.Progress.Answer(p.Viewer.Lang.Tag.String()), ps, p.Viewer)
}

// FamilyStreamURL is where a family page's stream resumes: every run
// strictly after its part of the family cursor.
func FamilyStreamURL(parentID uuid.UUID, cursor string) string {
	return "/runs/" + parentID.String() + "/events?after=" + cursor
}

// ChildID is the stable element ID of a child's card (its position).
func ChildID(i int) string { return "child-" + strconv.Itoa(i) }

// RunURL is a run's own page.
func RunURL(id uuid.UUID) string { return "/runs/" + id.String() }

// FamilySaid is what a request's page says about the request as a whole.
type FamilySaid struct {
	Status string // requestStatus: "1 of 3 refunds ended", "Refunded", "Partly refunded (2 of 3)", …
	Tone   string
	// Outcome says how much was refunded, of how much asked, and what
	// became of each refund: "Refunded €3.50 of €5.00: two orders
	// refunded, one declined by the payment provider."
	Outcome string
	// Answer is the request's one final answer once every refund has
	// ended (its stored final message, the API's final_message).
	Answer string
	Ended  string // RequestFinished once every refund has ended
}

// RequestFinished is what a request's page says once every refund has
// ended and its live updates stopped: the English of "family.finished".
const RequestFinished = "The request has finished: every refund has ended."

// FamilyWords is what a request says to viewer, in their language, from
// its refunds' progress: only what the payment provider confirmed counts
// as refunded (succeeded operations), a refund whose result is unknown is
// "still verifying", and each ending names who acted, in the viewer's words.
func FamilyWords(parent *store.Run, parentAnswer string, children []*store.Progress, viewer Viewer) FamilySaid {
	l := viewer.Lang
	var (
		refunded, asked int64
		ended, going    phrases
		outcomes        = map[string]int{}
	)
	for _, p := range children {
		asked += p.Run.Amount
		for _, op := range p.Operations {
			if op.State == store.OpSucceeded {
				refunded += op.Amount
			}
		}
		if p.Terminal() {
			ended.add(childEnding(p, viewer))
			outcomes[p.Outcome()]++
		} else {
			going.add(childDoing(p, l))
		}
	}
	said := map[string]any{"Refunded": l.Money(refunded, parent.Currency), "Asked": l.Money(asked, parent.Currency)}
	if len(going.text) > 0 {
		said["Account"] = going.say(len(ended.text) == 0, l)
		if len(ended.text) > 0 {
			said["Account"] = ended.say(true, l) + l.T("family.account.sep") + going.say(false, l)
		}
		w := FamilySaid{Outcome: l.T("family.going", said)}
		w.Status, w.Tone = requestStatus(len(children), len(children)-going.total(), 0, false, false, l)
		if refunded > 0 {
			w.Outcome = l.T("family.going_refunded", said)
		}
		return w
	}
	w := FamilySaid{Ended: l.T("family.finished"), Answer: strings.TrimSpace(parentAnswer)}
	done := outcomes[store.OutcomeCompleted] + outcomes[store.OutcomeCancelTooLate]
	w.Status, w.Tone = requestStatus(len(children), len(children), done,
		outcomes[store.OutcomeCanceled] == len(children), outcomes[store.OutcomeFailed]+outcomes[store.OutcomeDeclined] > 0, l)
	said["Account"] = ended.say(true, l)
	if refunded > 0 {
		w.Outcome = l.T("family.ended_refunded", said)
	} else {
		w.Outcome = l.T("family.ended_nothing", said)
	}
	return w
}

// childEnding is how a refund ended, as the request's outcome lists it.
func childEnding(p *store.Progress, viewer Viewer) string {
	l := viewer.Lang
	by := func() map[string]any { return map[string]any{"By": who(p, viewer, p.CanceledBy, l.T("who.someone"))} }
	switch p.Outcome() {
	case store.OutcomeCompleted:
		return l.T("family.ended.refunded")
	case store.OutcomeCancelTooLate:
		return l.T("family.ended.too_late", by())
	case store.OutcomeDeclined:
		return l.T("family.ended.declined")
	case store.OutcomeCanceled:
		if p.Expiry != nil {
			return l.T("family.ended.expired")
		}
		return l.T("family.ended.canceled", by())
	}
	return l.T("family.ended.failed")
}

// childDoing is where a refund that goes on stands, in l; "verifying" is
// said of refunds ("still verifying one refund"), the rest of orders.
func childDoing(p *store.Progress, l Lang) string {
	switch p.State {
	case store.StateAwaitingApproval:
		return l.T("family.doing.approval")
	case store.StateSubmitting:
		return l.T("family.doing.submitting")
	case store.StateReconciling:
		return verifying
	}
	return l.T("family.doing.checking")
}

// verifying marks the refunds whose result is being verified among the
// phrases: they are counted as refunds, not orders ("family.phrase.verifying").
const verifying = "\x00verifying"

// phrases counts the refunds that read alike, in the order first seen.
type phrases struct {
	text  []string
	count []int
}

// total is how many refunds the phrases count.
func (ps *phrases) total() int {
	n := 0
	for _, c := range ps.count {
		n += c
	}
	return n
}

func (ps *phrases) add(s string) {
	for i, t := range ps.text {
		if t == s {
			ps.count[i]++
			return
		}
	}
	ps.text, ps.count = append(ps.text, s), append(ps.count, 1)
}

// say lists the phrases with their counts, in l: "two orders refunded,
// one declined by the payment provider". first: the list begins the
// sentence's account, so its first count names what it counts.
func (ps *phrases) say(first bool, l Lang) string {
	out := make([]string, len(ps.text))
	for i, t := range ps.text {
		n, text := ps.count[i], map[string]any{"Text": t}
		switch {
		case t == verifying:
			out[i] = countIn(l, "family.phrase.verifying", n)
		case i == 0 && first:
			out[i] = countIn(l, "family.phrase.first", n, text)
		default:
			out[i] = l.T("family.phrase.next", map[string]any{"Count": n, "Words": numberWord(n), "Text": t})
		}
	}
	return strings.Join(out, l.T("family.phrase.sep"))
}

// numberWord is n as an English page says it: in words up to twelve.
func numberWord(n int) string {
	words := [...]string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
	if n >= 0 && n < len(words) {
		return words[n]
	}
	return strconv.Itoa(n)
}

// waitingWordsIn names the refunds an approval of all would approve, in
// l: "the refund of €2.00 for order #7", "two refunds, €3.50 in all".
func waitingWordsIn(waiting []*RunView, l Lang) string {
	if len(waiting) == 1 {
		r := waiting[0].Run
		return l.T("family.waiting_one", map[string]any{"Amount": l.Money(r.Amount, r.Currency), "Order": r.OrderID})
	}
	var sum int64
	for _, v := range waiting {
		sum += v.Run.Amount
	}
	return countIn(l, "family.waiting_many", len(waiting), map[string]any{"Amount": l.Money(sum, waiting[0].Run.Currency)})
}
