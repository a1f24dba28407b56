package views

import (
	"cmp"
	"strings"
	"time"

	"github.com/refundd/refundd/store"
)

// This file is the one table of words a run shows: its status, its
// progress line, who acted, what happens next and how it ended all come
// from Words, as a function of where the run stands (store.Progress, built
// from one snapshot and moved by the stream) and who is looking (Viewer);
// the history's lines come from EventText, naming who acted the same way.
// A run page's status, progress line and outcome come from nothing else;
// the final answer beside them is written once, from answers.go.
// Still worded beside their pages: support's Who column (SupportRun.actorOf)
// and its coverage lines, the queue's "who decided" line (QueueGone) and
// the answers to approve and cancel (handlers/decide.go).

// RunFinished is what the page says once the run has ended and its live
// updates stopped, on the page that saw it end and on every reload: the
// English of "run.finished", which a page says in its viewer's language.
const RunFinished = "The run has finished."

// StatusOnly says why a viewer sees a run's status and outcome and not its
// history: a customer's refund access was taken away (they may still
// cancel their own run while it goes on).
func StatusOnly(viewer Viewer) string {
	if viewer.Staff {
		return viewer.Lang.T("run.status_only.staff")
	}
	return viewer.Lang.T("run.status_only.customer")
}

// askAgainLabel is a request's "Ask again" button, in l: a request partly
// refunded asks again for its refunds that were not made only.
func askAgainLabel(notRefunded, children int, l Lang) string {
	if notRefunded == children {
		return l.T("run.ask_again")
	}
	return countIn(l, "run.ask_again_for", notRefunded)
}

// RequestOfIn names a run of a chain of asking again by when it was
// asked, in l: "the request of 3 Dec 2026, 14:05 UTC".
func RequestOfIn(r store.RunListing, l Lang) string {
	return l.T("run.request_of", map[string]any{"When": l.Time(r.CreatedAt)})
}

// listEndIn ends the i-th of n items of a sentence's list, in l: ";"
// between them, "." after the last.
func listEndIn(i, n int, l Lang) string {
	if i == n-1 {
		return l.T("list.end")
	}
	return l.T("list.sep")
}

// endedAsIn is how a run that was asked again for ended, in l, which it
// did for good, so the words never go stale: " (Declined)".
func endedAsIn(r store.RunListing, l Lang) string {
	status, _ := ListWords(r, l)
	return l.T("run.ended_as", map[string]any{"Status": status})
}

// Tones of a status or a step: how it is coloured, never what it says.
const (
	ToneWorking = "working" // a step runs or waits
	ToneGood    = "good"    // refunded
	ToneNeutral = "neutral" // ended without a refund, and nothing went wrong
	ToneBad     = "bad"     // the request could not be carried out
)

// Said is everything a run's page says about the run, in one viewer's
// words. Empty fields are not shown.
type Said struct {
	Status string // the status word: "Waiting for an approver", "Declined"
	Tone   string
	Steps  []ProgressStep
	// Since is when the current step began, while it waits on someone
	// else (an approver, the provider); zero otherwise. The page counts
	// from it in the browser.
	Since    time.Time
	Next     string // what happens next, while the run goes on
	Approved string // "Approved by an approver."
	Pending  string // a cancel asked for while the run goes on
	// CancelGone says why the viewer's cancel is no longer offered.
	CancelGone string
	// DecideBy is until when an approver may decide, while the run waits
	// for one; zero when no deadline binds it. The page shows it in the
	// viewer's time, inside the run.decide_by_lead … run.decide_by_tail
	// sentence.
	DecideBy time.Time
	// Outcome is the headline of how the run ended, "" while it goes on;
	// Answer the run's one final answer (store.FinalMessage, the API's
	// final_message) in the viewer's language (Progress.Answer), the same
	// for every viewer of that language; Actor who ended it (or
	// whose cancel came too late) and Reason the reason they gave, in the
	// viewer's terms; Detail what it means for the viewer's money, beside
	// the answer, never repeating or contradicting it.
	Outcome, Answer, Actor, Reason, Detail string
	Ended                                  string // RunFinished once the run has ended
}

// ProgressStep is one stop of the progress line.
type ProgressStep struct {
	Label string
	// Status is done, current, todo, or ended (where a run that was not
	// refunded stopped); Tone colours it.
	Status string
	Tone   string
	// Here marks where the run stands (aria-current="step").
	Here bool
}

// The sentence around a decision's deadline (Said.DecideBy), in English
// ("run.decide_by_lead", "run.decide_by_tail" in a viewer's language).
const (
	DecideByLead = "An approver may decide until "
	DecideByTail = ". If nobody has by then, the system cancels the refund and nothing is refunded."
)

// waitingForAgent is a run that no worker has taken up yet.
const waitingForAgent = "status.created"

// The steps of a run, in order.
const (
	stepRequested = iota
	stepCheck
	stepApproval
	stepSend
	stepResult
)

// Words is what the run p says to viewer.
func Words(p *store.Progress, viewer Viewer) Said {
	w := Said{Status: statusWord(p, viewer.Lang), Tone: toneOf(p)}
	if store.Waits(p.State) {
		w.Since = p.StateSince
	}
	w.Steps = steps(p, stepAt(p), viewer.Lang)
	if p.ApprovedBy != nil && !p.ApprovedBy.System {
		w.Approved = viewer.Lang.T("approved.by", map[string]any{
			"By": who(p, viewer, p.ApprovedBy, viewer.Lang.T("who.approver")), "Reason": approvalReason(p.ApprovedBy, viewer)})
	}
	if p.State == store.StateAwaitingApproval && !p.CancelRequested {
		w.DecideBy = p.Deadline
	}
	if !p.Terminal() {
		w.Next = nextStep(p, viewer)
		w.Pending = pendingCancel(p, viewer)
		w.CancelGone = cancelGone(p, viewer)
		return w
	}
	w.Ended = viewer.Lang.T("run.finished")
	outcome(p, viewer, &w)
	return w
}

// ListWords is a listed run's status word and tone, from Words: a list
// knows the run's state, whether a cancel was asked for and whether the
// provider declined it, which is all the status word needs.
func ListWords(r store.RunListing, l Lang) (status, tone string) {
	if r.IsParent() {
		return requestListWords(r, l)
	}
	p := store.Progress{Run: &r.Run, State: r.State, CancelRequested: r.CancelRequested()}
	if r.Declined {
		p.Operations = []store.Operation{{State: store.OpFailed}}
	}
	w := Words(&p, Viewer{Lang: l})
	return w.Status, w.Tone
}

// requestListWords is a listed request's status, from its children's ends:
// it never says more was refunded than the ended children that were.
func requestListWords(r store.RunListing, l Lang) (status, tone string) {
	return requestStatus(r.Children, r.ChildrenEnded, r.ChildrenRefunded, r.State == store.StateCanceled,
		r.State == store.StateFailed, l)
}

// requestStatus is a request's status word and tone, on its page, in the
// lists and on support's page alike: of n refunds, ended have ended and
// refunded of those the payment provider refunded; canceled: all were
// canceled; failed: one could not be carried out or was declined.
func requestStatus(n, ended, refunded int, canceled, failed bool, l Lang) (status, tone string) {
	counts := map[string]any{"Count": n, "Ended": ended, "Refunded": refunded}
	switch {
	case ended < n:
		return l.T("request.ended_of", counts), ToneWorking
	case refunded == n:
		return l.T("status.refunded"), ToneGood
	case refunded > 0:
		return l.T("request.partly", counts), ToneGood
	case canceled:
		return l.T("status.canceled"), ToneNeutral
	case failed:
		return l.T("request.not_refunded"), ToneBad
	}
	return l.T("request.not_refunded"), ToneNeutral
}

// statusWord is the run's state in a word or three, in l: what runs now,
// in the present tense, or how it ended.
func statusWord(p *store.Progress, l Lang) string {
	switch p.State {
	case store.StateCreated:
		return l.T(waitingForAgent)
	case store.StatePlanning:
		return l.T("status.planning")
	case store.StateAwaitingApproval:
		return l.T("status.awaiting_approval")
	case store.StateSubmitting:
		return l.T("status.submitting")
	case store.StateReconciling:
		return l.T("status.reconciling")
	}
	return outcomeWord(p.Outcome(), l)
}

// outcomeWord is how a run ended in a word, in l, on its page, in its
// status and in its request's timeline alike.
func outcomeWord(outcome string, l Lang) string {
	switch outcome {
	case store.OutcomeCompleted, store.OutcomeCancelTooLate:
		return l.T("status.refunded")
	case store.OutcomeDeclined:
		return l.T("status.declined")
	case store.OutcomeCanceled:
		return l.T("status.canceled")
	}
	return l.T("status.failed")
}

func toneOf(p *store.Progress) string {
	switch p.Outcome() {
	case "":
		return ToneWorking
	case store.OutcomeCompleted, store.OutcomeCancelTooLate:
		return ToneGood
	case store.OutcomeFailed:
		return ToneBad
	}
	return ToneNeutral
}

// stepAt is the step the run stands at, or ended at.
func stepAt(p *store.Progress) int {
	switch p.State {
	case store.StateCreated, store.StatePlanning:
		return stepCheck
	case store.StateAwaitingApproval:
		return stepApproval
	case store.StateSubmitting:
		return stepSend
	case store.StateReconciling, store.StateCompleted:
		return stepResult
	}
	// Failed or canceled: where it stopped.
	switch {
	case len(p.Operations) > 0:
		return stepResult
	case p.ApprovedBy != nil:
		return stepSend
	case p.ApprovalAsked:
		return stepApproval
	}
	return stepCheck
}

// stepLabels are each step's catalogue keys: not yet begun, running now,
// done.
var stepLabels = [...][3]string{
	stepRequested: {"step.requested.todo", "step.requested.current", "step.requested.done"},
	stepCheck:     {"step.check.todo", "step.check.current", "step.check.done"},
	stepApproval:  {"step.approval.todo", "step.approval.current", "step.approval.done"},
	stepSend:      {"step.send.todo", "step.send.current", "step.send.done"},
	stepResult:    {"step.result.todo", "step.result.current", "step.result.done"},
}

// steps is the progress line: every step from the start (the approval too:
// a refund the policy lets through reads "No approval needed"), each in
// the tense of where the run stands, up to where a finished run ended.
func steps(p *store.Progress, at int, lang Lang) []ProgressStep {
	out := make([]ProgressStep, 0, len(stepLabels))
	for i, l := range stepLabels {
		if i > at && p.Terminal() {
			break // a run that ended early has no steps ahead of it
		}
		st := ProgressStep{Label: lang.T(l[0]), Status: "todo", Tone: ToneWorking, Here: i == at}
		switch {
		case i < at || (st.Here && p.State == store.StateCompleted):
			st.Label, st.Status, st.Tone = lang.T(l[2]), "done", ToneGood
		case st.Here && p.Terminal():
			st.Label, st.Status, st.Tone = statusWord(p, lang), "ended", toneOf(p)
		case st.Here:
			st.Label, st.Status = lang.T(l[1]), "current"
			if p.State == store.StateCreated {
				st.Label = lang.T(waitingForAgent) // the check has not begun
			}
		}
		if i == stepApproval && st.Status == "done" && (p.ApprovedBy == nil || p.ApprovedBy.System) && !p.ApprovalAsked {
			st.Label = lang.T("step.no_approval")
		}
		out = append(out, st)
	}
	return out
}

// nextStep says what happens next while the run goes on.
func nextStep(p *store.Progress, viewer Viewer) string {
	switch p.State {
	case store.StateCreated, store.StatePlanning:
		return viewer.Lang.T("next.check")
	case store.StateAwaitingApproval:
		if viewer.MayApprove && p.Run.OwnerID != viewer.UserID {
			return viewer.Lang.T("next.approval_you")
		}
		return viewer.Lang.T("next.approval")
	case store.StateSubmitting:
		return viewer.Lang.T("next.submitting")
	case store.StateReconciling:
		return viewer.Lang.T("next.reconciling")
	}
	return ""
}

// pendingCancel is a cancel asked for while the run goes on, "" when
// there is none.
func pendingCancel(p *store.Progress, viewer Viewer) string {
	if !p.CancelRequested {
		return ""
	}
	by := map[string]any{"By": who(p, viewer, p.CanceledBy, viewer.Lang.T("who.someone"))}
	if store.CancelTooLate(p.Operations) {
		return viewer.Lang.T("cancel.pending_too_late", by)
	}
	return viewer.Lang.T("cancel.pending", by)
}

// cancelGone says why a viewer who could cancel before no longer can, ""
// when the cancel is still offered or was never theirs to make.
func cancelGone(p *store.Progress, viewer Viewer) string {
	if !viewer.MayCancel || p.CancelRequested || !store.CancelTooLate(p.Operations) {
		return ""
	}
	return viewer.Lang.T("cancel.gone")
}

// outcome fills in how the run ended. The final answer says what
// happened to the money; the other lines add only who acted, in the
// viewer's terms, and the reason they gave.
func outcome(p *store.Progress, viewer Viewer, w *Said) {
	l := viewer.Lang
	amount := l.Money(p.Run.Amount, p.Run.Currency)
	var ref, providerSaid string
	recovered := false
	for _, op := range p.Operations {
		switch op.State {
		case store.OpSucceeded:
			amount, ref = l.Money(op.Amount, op.Currency), op.ProviderRef.String
		case store.OpFailed:
			providerSaid = op.LastError
		}
		recovered = recovered || op.Recovered
	}
	w.Answer = strings.TrimSpace(p.Answer(l.Tag.String()))
	canceler := who(p, viewer, p.CanceledBy, l.T("who.someone"))
	switch p.Outcome() {
	case store.OutcomeCompleted, store.OutcomeCancelTooLate:
		w.Outcome = l.T("outcome.refunded", map[string]any{"Amount": amount})
		w.Detail = possessive(p, viewer)
		if w.Answer == "" {
			said := map[string]any{"Ref": reference(ref, l), "BackTo": w.Detail}
			w.Detail = l.T("outcome.confirmed", said)
			if recovered {
				w.Detail = l.T("outcome.recovered", said)
			}
		}
		if p.Outcome() == store.OutcomeCancelTooLate {
			w.Actor = l.T("outcome.too_late", map[string]any{"By": canceler})
			w.Reason = decisionReason(p.CanceledBy, l)
		}
	case store.OutcomeCanceled:
		w.Outcome = l.T("outcome.canceled_by", map[string]any{"By": canceler})
		w.Reason = decisionReason(p.CanceledBy, l)
		if p.Expiry != nil {
			// Why, unless the final answer beside it says so already.
			w.Outcome = l.T("outcome.canceled_system")
			if why := expiredWhy(p.Expiry, l); !strings.Contains(w.Answer, why) {
				w.Reason = l.T("reason.sentence", map[string]any{"Text": why})
			}
		}
	case store.OutcomeDeclined:
		w.Outcome = l.T("outcome.declined")
		if !strings.Contains(w.Answer, strings.TrimSpace(providerSaid)) {
			w.Reason = quoted("reason.provider_said", providerSaid, l)
		}
	default:
		w.Outcome = l.T("outcome.not_refunded")
	}
	if w.Answer == "" && p.Outcome() != store.OutcomeCompleted && p.Outcome() != store.OutcomeCancelTooLate {
		// A run that ended before this page knew its answer: the one
		// fact every ending without a refund shares.
		w.Detail = l.T("outcome.no_money")
	}
}

// reference is the provider's reference as a sentence carries it, in l.
func reference(ref string, l Lang) string {
	if ref == "" {
		return ""
	}
	return l.T("outcome.reference", map[string]any{"Ref": ref})
}

// possessive is where the refund goes back to: the viewer's own payment
// method or the customer's.
func possessive(p *store.Progress, viewer Viewer) string {
	if viewer.UserID != 0 && viewer.UserID == p.Run.OwnerID {
		return viewer.Lang.T("outcome.back_to_you")
	}
	return viewer.Lang.T("outcome.back_to_customer")
}

// decisionReason is the reason given with a decision, for every viewer of
// its outcome, in l: a customer whose refund an approver canceled reads why.
func decisionReason(d *store.Decider, l Lang) string {
	if d == nil {
		return ""
	}
	return quoted("reason.given", d.Reason, l)
}

// approvalReason is an approver's reason for approving, which only staff
// read: it is about the refund, not for the customer.
func approvalReason(d *store.Decider, viewer Viewer) string {
	if !viewer.Staff {
		return ""
	}
	return ReasonSuffixIn(d.Reason, viewer.Lang)
}

// ReasonSuffixIn is a reason given with a decision as every line that
// names one ends, in l: `: “…”`, "" for none. The one place a reason is
// framed.
func ReasonSuffixIn(reason string, l Lang) string {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return ""
	}
	return l.T("reason.suffix", map[string]any{"Reason": reason})
}

// quoted is a reason as the page shows it, led by key's words in l
// ("Reason given: “…”"), "" for none.
func quoted(key, s string, l Lang) string {
	if s = strings.TrimSpace(s); s != "" {
		return l.T(key, map[string]any{"Reason": s})
	}
	return ""
}

// Who names the person who made decision d in the viewer's words (who).
func (v *RunView) Who(d *store.Decider, unknown string) string {
	return who(&v.Progress, v.Viewer, d, unknown)
}

// who names the person who made decision d in the viewer's words: "you",
// "an approver", "support", "the customer", "the system"; staff also see
// the name. unknown is the words for an event that recorded no role.
func who(p *store.Progress, viewer Viewer, d *store.Decider, unknown string) string {
	l := viewer.Lang
	switch {
	case d == nil:
		return unknown
	case d.System:
		return l.T("who.system")
	case d.UserID != 0 && d.UserID == viewer.UserID:
		return l.T("who.you")
	}
	var role string
	switch {
	case d.Role == store.RoleApprover:
		role = "approver"
	case d.Role == store.RoleSupport, d.Role == store.RoleAdmin:
		role = "support"
	case d.Role == store.RoleCustomer, d.Role == "" && d.UserID != 0 && p != nil && p.Run != nil && d.UserID == p.Run.OwnerID:
		role = "customer"
	default:
		return unknown
	}
	if viewer.Staff && d.Name != "" {
		return l.T("who.named", map[string]any{"Name": d.Name, "Role": l.T("role." + role)})
	}
	return l.T("who." + role)
}

// EventText describes a business event in words, naming who acted in the
// viewer's terms and language.
func (v *RunView) EventText(ev store.Event) string {
	l := v.Viewer.Lang
	switch ev.Type {
	case store.EventApprovalGranted:
		return l.T("event.approved_by", map[string]any{"By": v.Who(store.DeciderOf(ev), l.T("who.approver")), "Reason": v.reason(ev)})
	case store.EventCancelRequested:
		return l.T("event.cancel_requested_by", map[string]any{"By": v.Who(store.DeciderOf(ev), l.T("who.someone")), "Reason": v.reason(ev)})
	}
	return EventTextIn(ev, l)
}

// reason is the reason given with a decision: a cancel's for everyone
// (the customer reads why their refund was stopped), an approval's for
// staff only, as Words shows them.
func (v *RunView) reason(ev store.Event) string {
	d := store.DeciderOf(ev)
	if d == nil || (ev.Type == store.EventApprovalGranted && !v.Viewer.Staff) {
		return ""
	}
	return ReasonSuffixIn(d.Reason, v.Viewer.Lang)
}

// EventText is EventTextIn in English.
func EventText(ev store.Event) string { return EventTextIn(ev, English) }

// EventTextIn describes a business event in words, in l, without who
// acted. The store wrote every payload itself; one that does not decode
// reads as empty fields, and the page still renders.
func EventTextIn(ev store.Event, l Lang) string {
	if s, ok := requestEventText(ev, l); ok {
		return s
	}
	if s, ok := operationEventText(ev, l); ok {
		return s
	}
	switch ev.Type {
	case store.EventRunPlanning:
		return l.T("event.planning")
	case store.EventStepAttempt:
		p, _ := store.PayloadOf[store.StepAttempt](ev)
		if p.Attempt > 1 {
			return l.T("event.step_again", map[string]any{"Step": stepDoing(p.Step, l), "Attempt": p.Attempt})
		}
		return l.T("event.step", map[string]any{"Step": stepDoing(p.Step, l)})
	case store.EventApprovalRequested:
		if p, _ := store.PayloadOf[store.ApprovalRequested](ev); p.Deadline != nil {
			return l.T("event.approval_requested_within", map[string]any{"Window": l.Window(p.Deadline.Sub(ev.CreatedAt))})
		}
		return l.T("event.approval_requested")
	case store.EventApprovalExpired:
		p, _ := store.PayloadOf[store.ApprovalExpired](ev)
		return l.T("event.approval_expired", map[string]any{"Why": expiredWhy(&p, l)})
	case store.EventApprovalGranted:
		if d := store.DeciderOf(ev); d != nil && d.System {
			return l.T("event.approved_policy")
		}
		return l.T("event.approved")
	case store.EventCancelRequested:
		return l.T("event.cancel_requested")
	case store.EventCancelTooLate:
		return l.T("event.cancel_too_late")
	case store.EventMessageFinal:
		return l.T("event.final")
	case store.EventRunCompleted:
		return l.T("event.completed")
	case store.EventRunFailed:
		return l.T("event.failed")
	case store.EventRunCanceled:
		return l.T("event.canceled")
	}
	return ev.Type
}

// requestEventText is the line of an event about what was asked for: a
// run or request created, a request's refund started or ended, a refund
// proposed; ok false for another event.
func requestEventText(ev store.Event, l Lang) (string, bool) {
	switch ev.Type {
	case store.EventRunCreated:
		p, _ := store.PayloadOf[store.RunCreated](ev)
		if len(p.Refunds) > 0 {
			return l.N("event.refunds_requested", len(p.Refunds), map[string]any{
				"Amount": l.Money(p.Amount, p.Currency), "Count": len(p.Refunds)}), true
		}
		return l.T("event.refund_requested", map[string]any{"Amount": l.Money(p.Amount, p.Currency), "Order": p.OrderID}), true
	case store.EventChildStarted:
		p, _ := store.PayloadOf[store.ChildStarted](ev)
		return l.T("event.child_started", map[string]any{"Amount": l.Money(p.Amount, p.Currency), "Order": p.OrderID}), true
	case store.EventChildFinished:
		p, _ := store.PayloadOf[store.ChildFinished](ev)
		// The child's own page's word for its ending (an event written
		// before outcome was recorded reads by its state).
		data := map[string]any{"Order": p.OrderID, "End": outcomeWord(cmp.Or(p.Outcome, store.EndedAs(p.State, false, false)), l)}
		if p.Refunded > 0 {
			data["Amount"] = l.Money(p.Refunded, p.Currency)
			return l.T("event.child_finished_refunded", data), true
		}
		return l.T("event.child_finished_nothing", data), true
	case store.EventActionProposed:
		p, _ := store.PayloadOf[store.ActionProposed](ev)
		return l.T("event.proposed", map[string]any{"Amount": l.Money(p.Amount, p.Currency)}), true
	}
	return "", false
}

// operationEventText is the line of an event of the ledger: a refund sent
// to the payment provider, and what became of it; ok false for another
// event.
func operationEventText(ev store.Event, l Lang) (string, bool) {
	op, _ := store.OperationNewsOf(ev)
	data := map[string]any{"Amount": l.Money(op.Amount, op.Currency), "Ref": op.ProviderRef, "Reason": op.Reason}
	switch ev.Type {
	case store.EventOperationSubmitted:
		return l.T("event.op_submitted", data), true
	case store.EventOperationSucceeded:
		if op.Recovered {
			return l.T("event.op_recovered", data), true
		}
		return l.T("event.op_succeeded", data), true
	case store.EventOperationFailed:
		switch {
		case op.Recovered:
			return l.T("event.op_failed_recovered", data), true
		case op.Reason != "":
			return l.T("event.op_failed_reason", data), true
		}
		return l.T("event.op_failed", data), true
	case store.EventOperationReconciling:
		return l.T("event.reconciling"), true
	}
	return "", false
}

// expiredWhy is why the system canceled a run nobody decided in time, in l.
func expiredWhy(e *store.ApprovalExpired, l Lang) string {
	return l.T("reason.expired", map[string]any{"Window": l.Window(e.Window())})
}

// narrationStretchIn names a stretch of n narration pieces in support's
// timeline, in l.
func narrationStretchIn(n int, l Lang) string { return l.N("event.narration_stretch", n) }

// stepDoing is a narrating step as the history names it, in l.
func stepDoing(step string, l Lang) string {
	switch step {
	case store.StatePlanning:
		return l.T("event.doing.planning")
	case store.StateSubmitting:
		return l.T("event.doing.submitting")
	}
	return l.T("event.doing.other")
}

// Elapsed is how long a step has waited, in l, as the step timer shows it
// (static/live.js counts on in the browser the same way).
func Elapsed(d time.Duration, l Lang) string {
	s := int64(max(d, 0) / time.Second)
	switch {
	case s < 60:
		return l.T("elapsed.s", map[string]any{"S": s})
	case s < 3600:
		return l.T("elapsed.m", map[string]any{"M": s / 60, "S": s % 60})
	}
	return l.T("elapsed.h", map[string]any{"H": s / 3600, "M": s % 3600 / 60})
}

// operationLabelIn is how a ledger state reads, in l: submitted is not
// succeeded, and an unknown outcome is being verified, never "failed".
func operationLabelIn(state string, l Lang) string {
	switch state {
	case store.OpSubmitted, store.OpSucceeded, store.OpFailed, store.OpReconciling:
		return l.T("event.op_state." + state)
	}
	return state
}

// countIn is n things in l by key's plural forms, which may say n as a
// number (.Count) or, in English, in words (.Words: "one", "three").
func countIn(l Lang, key string, n int, data ...map[string]any) string {
	d := map[string]any{"Count": n, "Words": numberWord(n)}
	for _, m := range data {
		for k, v := range m {
			d[k] = v
		}
	}
	return l.N(key, n, d)
}
