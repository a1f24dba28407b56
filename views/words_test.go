package views_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// The people of the words table: the customer who asked, the approver
// who decided, and someone in support who only looks.
const (
	customerID = 1
	approverID = 7
	supportID  = 9
)

type role struct {
	name   string
	user   *store.User
	viewer views.Viewer
}

var roles = []role{
	{"customer", &store.User{ID: customerID, Name: "Cat", Role: store.RoleCustomer},
		views.Viewer{UserID: customerID, MayCancel: true}},
	{"approver", &store.User{ID: approverID, Name: "Ann", Role: store.RoleApprover},
		views.Viewer{UserID: approverID, MayApprove: true, MayCancel: true, Staff: true}},
	{"support", &store.User{ID: supportID, Name: "Sam", Role: store.RoleSupport},
		views.Viewer{UserID: supportID, Staff: true}},
}

var (
	approvedByAnn = ev(8, store.EventApprovalGranted, map[string]any{"by": approverID, "by_role": store.RoleApprover, "by_name": "Ann"})
	canceledByCat = ev(9, store.EventCancelRequested, map[string]any{"by": customerID, "by_role": store.RoleCustomer, "by_name": "Cat"})
	canceledByAnn = ev(9, store.EventCancelRequested, map[string]any{"by": approverID, "by_role": store.RoleApprover, "by_name": "Ann",
		"reason": "duplicate of another request"})
)

// ended is a finished run: its state, its ledger (opState "" for none,
// with the provider's reason for a failed one), and its decisions.
func ended(state, opState, providerSaid string, marks ...store.Event) *store.Snapshot {
	snap := terminalSnapshot(state, opState, marks...)
	snap.Approval = &store.Approval{RequestedAt: time.Unix(1700000000, 0)}
	for i := range snap.Operations {
		snap.Operations[i].LastError = providerSaid
		if opState == store.OpSucceeded {
			snap.Operations[i].ProviderRef = sql.NullString{String: "PRV-1", Valid: true}
		}
	}
	return snap
}

// wordsCase is one terminal path: the status word every viewer reads, and
// per role the outcome's headline, the actor line and the reason.
type wordsCase struct {
	path    string
	snap    func() *store.Snapshot
	outcome string
	status  string
	tone    string
	want    map[string][3]string // role: outcome, actor, reason
}

var refunded = map[string][3]string{
	"customer": {"Refunded €5.00.", "", ""}, "approver": {"Refunded €5.00.", "", ""}, "support": {"Refunded €5.00.", "", ""},
}

var wordsCases = []wordsCase{
	{"completed", func() *store.Snapshot { return ended(store.StateCompleted, store.OpSucceeded, "", approvedByAnn) },
		store.OutcomeCompleted, "Refunded", views.ToneGood, refunded},
	{"declined by the provider", func() *store.Snapshot {
		return ended(store.StateFailed, store.OpFailed, "card account closed", approvedByAnn)
	}, store.OutcomeDeclined, "Declined", views.ToneNeutral, map[string][3]string{
		"customer": {"Declined by the payment provider.", "", "The payment provider said: “card account closed”"},
		"approver": {"Declined by the payment provider.", "", "The payment provider said: “card account closed”"},
		"support":  {"Declined by the payment provider.", "", "The payment provider said: “card account closed”"},
	}},
	{"canceled by the customer", func() *store.Snapshot { return ended(store.StateCanceled, "", "", canceledByCat) },
		store.OutcomeCanceled, "Canceled", views.ToneNeutral, map[string][3]string{
			"customer": {"Canceled by you.", "", ""},
			"approver": {"Canceled by Cat (the customer).", "", ""},
			"support":  {"Canceled by Cat (the customer).", "", ""},
		}},
	{"canceled by an approver with a reason", func() *store.Snapshot { return ended(store.StateCanceled, "", "", canceledByAnn) },
		store.OutcomeCanceled, "Canceled", views.ToneNeutral, map[string][3]string{
			"customer": {"Canceled by an approver.", "", "Reason given: “duplicate of another request”"},
			"approver": {"Canceled by you.", "", "Reason given: “duplicate of another request”"},
			"support":  {"Canceled by Ann (approver).", "", "Reason given: “duplicate of another request”"},
		}},
	{"canceled too late", func() *store.Snapshot {
		return ended(store.StateCompleted, store.OpSucceeded, "", approvedByAnn, canceledByCat)
	}, store.OutcomeCancelTooLate, "Refunded", views.ToneGood, map[string][3]string{
		"customer": {"Refunded €5.00.", "The cancel you asked for came too late: the refund had already reached the payment provider.", ""},
		"approver": {"Refunded €5.00.", "The cancel Cat (the customer) asked for came too late: the refund had already reached the payment provider.", ""},
		"support":  {"Refunded €5.00.", "The cancel Cat (the customer) asked for came too late: the refund had already reached the payment provider.", ""},
	}},
	{"failed", func() *store.Snapshot {
		snap := ended(store.StateFailed, "", "")
		snap.Approval = nil
		snap.FinalMessage.Body = "Refunds above €0.50 need a person in support."
		return snap
	}, store.OutcomeFailed, "Failed", views.ToneBad, map[string][3]string{
		"customer": {"Not refunded: the request could not be carried out.", "", ""},
		"approver": {"Not refunded: the request could not be carried out.", "", ""},
		"support":  {"Not refunded: the request could not be carried out.", "", ""},
	}},
	{"verifying then completed", verifiedThenCompleted, store.OutcomeCompleted, "Refunded", views.ToneGood, refunded},
	{"restarted mid-run", restartedThenCompleted, store.OutcomeCompleted, "Refunded", views.ToneGood, refunded},
}

// verifiedThenCompleted: the provider's answer was lost, the run verified
// the result, and the stream then brought the receipt and the end.
func verifiedThenCompleted() *store.Snapshot {
	snap := ended(store.StateReconciling, store.OpReconciling, "no answer from the payment provider: timeout", approvedByAnn)
	snap.Run.State = store.StateReconciling
	snap.Events = append(snap.Events,
		ev(21, store.EventOperationSucceeded, map[string]any{"operation_id": snap.Operations[0].ID, "amount": 500, "currency": "EUR", "provider_ref": "PRV-1"}),
		ev(22, store.EventRunCompleted, map[string]any{"state": "completed"}))
	return snap
}

// restartedThenCompleted: the server restarted mid-run, the planning step
// began again, and the run completed.
func restartedThenCompleted() *store.Snapshot {
	snap := ended(store.StateCompleted, store.OpSucceeded, "", approvedByAnn)
	restart := ev(6, store.EventStepAttempt, map[string]any{"step": "planning", "attempt": 2})
	snap.Events = append(snap.Events, restart)
	snap.Marks = append(snap.Marks, restart)
	return snap
}

// viewOf is the run page's view of c's snapshot for r: events after the
// snapshot's covering seq are applied as the stream applies them.
func viewOf(c wordsCase, r role) *views.RunView {
	snap := c.snap()
	var later []store.Event
	for _, e := range snap.Events {
		if e.Seq > snap.CoveringSeq {
			later = append(later, e)
		}
	}
	v := views.NewRunView(snap, true, r.viewer)
	for _, e := range later {
		v.Apply(e)
	}
	return v
}

// TestWords_EveryTerminalPathForEveryRole is the table of words: each way
// a run ends, read by the customer, the approver who decided and support.
// One outcome, the actor in the viewer's terms, the reason where one was
// given, and nothing on the page that says otherwise.
func TestWords_EveryTerminalPathForEveryRole(t *testing.T) {
	t.Parallel()
	for _, c := range wordsCases {
		for _, r := range roles {
			t.Run(c.path+"/"+r.name, func(t *testing.T) {
				t.Parallel()
				v := viewOf(c, r)
				w := v.Words()
				want := c.want[r.name]
				if w.Outcome != want[0] || w.Actor != want[1] || w.Reason != want[2] {
					t.Errorf("outcome, actor, reason = %q, %q, %q; want %q, %q, %q", w.Outcome, w.Actor, w.Reason, want[0], want[1], want[2])
				}
				// The one final answer, the same for every viewer.
				if want := strings.TrimSpace(c.snap().FinalMessage.Body); w.Answer != want {
					t.Errorf("answer = %q, want the final message %q", w.Answer, want)
				}
				if w.Status != c.status || w.Tone != c.tone || w.Ended != views.RunFinished {
					t.Errorf("status %q (%s), ended %q; want %q (%s), %q", w.Status, w.Tone, w.Ended, c.status, c.tone, views.RunFinished)
				}
				checkPage(t, c, r, v)
			})
		}
	}
}

// checkPage reads the rendered page as the person would.
func checkPage(t *testing.T, c wordsCase, r role, v *views.RunView) {
	t.Helper()
	doc := render(t, views.RunPage(r.user, v))
	if n := doc.Find("[data-outcome]").Length(); n != 1 {
		t.Fatalf("%d outcome blocks, want 1", n)
	}
	if got, _ := doc.Find("[data-outcome]").Attr("data-outcome"); got != c.outcome {
		t.Errorf("outcome = %q, want %q", got, c.outcome)
	}
	if got := doc.Find("#stream-end").Text(); got != views.RunFinished {
		t.Errorf("#stream-end = %q, want %q on the finished page", got, views.RunFinished)
	}
	if got := doc.Find("#narration-end").Text(); got != c.want[r.name][0] {
		t.Errorf("the narration ends with %q, want the outcome", got)
	}
	ended := doc.Find(`#run-progress [aria-current="step"]`)
	if tone, _ := ended.Attr("data-tone"); tone != c.tone || ended.Text() != c.status || ended.Next().Length() != 0 {
		t.Errorf("the run ends at step %q (%s, %d after it), want %q (%s) last", ended.Text(), tone, ended.NextAll().Length(), c.status, c.tone)
	}
	text := squash(doc.Find("#run").Text())
	// The final answer, exactly once on the page (the timeline's "Final
	// answer written" line says it was written, not what).
	if answer := squash(v.FinalMessage); answer != "" {
		if n := strings.Count(squash(doc.Text()), answer); n != 1 || squash(doc.Find("#final-answer").Text()) != answer {
			t.Errorf("the final answer %q is on the page %d times (#final-answer %q), want once", answer, n, doc.Find("#final-answer").Text())
		}
	}
	for _, w := range contradictions(c.outcome) {
		if strings.Contains(text, w) {
			t.Errorf("the %s page says %q:\n%s", c.outcome, w, text)
		}
	}
	if r.viewer.Staff {
		for _, w := range []string{"your", "Your", "You asked"} {
			if strings.Contains(text, w) {
				t.Errorf("staff read %q:\n%s", w, text)
			}
		}
	} else if strings.Contains(text, "Ann") {
		t.Errorf("the customer reads the approver's name:\n%s", text)
	}
}

// contradictions are words a page with that outcome must not hold, and
// words only a run still going on may show.
func contradictions(outcome string) []string {
	running := []string{"Waiting for an approver", "Sending to", "Verifying", "not yet confirmed", "stops before any money moves",
		"Checking the order", "can no longer be canceled", "Next:", "Confirmed (ended here)", "as requested"}
	switch outcome {
	case store.OutcomeCompleted:
		return append(running, "Canceled", "Not refunded", "No money moved", "no money moved", "Declined", "cancel")
	case store.OutcomeCancelTooLate:
		return append(running, "Canceled", "Not refunded", "no money moved", "Declined")
	case store.OutcomeCanceled:
		return append(running, "Refunded", "Declined", "Failed", "Not refunded")
	case store.OutcomeDeclined:
		return append(running, "Refunded", "Failed", "Canceled", "cancel")
	}
	return append(running, "Refunded", "Declined", "Canceled", "cancel")
}

func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestWords_ProgressLineSpeaksInThePresent walks a run that needs an
// approval: every step is on the line from the start, the running one in
// the present tense with a timer while it waits on someone, the ones
// before it in the past, and the page says what happens next.
func TestWords_ProgressLineSpeaksInThePresent(t *testing.T) {
	t.Parallel()
	opID := uuid.New()
	op := map[string]any{"operation_id": opID, "amount": 500, "currency": "EUR"}
	v := views.NewRunView(testSnapshot(), true, roles[0].viewer)
	for _, step := range []struct {
		e      *store.Event
		line   string
		timed  bool
		status string
	}{
		{nil, "Requested|Checking the order…|Approval|Send to the payment provider|Result", false, "Checking the order…"},
		{ptr(ev(5, store.EventApprovalRequested, nil)), "Requested|Order checked|Waiting for an approver|Send to the payment provider|Result", true, "Waiting for an approver"},
		{&approvedByAnn, "Requested|Order checked|Approved|Sending to the payment provider|Result", true, "Sending to the payment provider"},
		{ptr(ev(10, store.EventOperationSubmitted, op)), "Requested|Order checked|Approved|Sending to the payment provider|Result", true, "Sending to the payment provider"},
		{ptr(ev(11, store.EventOperationReconciling, op)), "Requested|Order checked|Approved|Sent to the payment provider|Verifying the result", true, "Verifying the result"},
	} {
		if step.e != nil {
			v.Apply(*step.e)
		}
		w := v.Words()
		var labels []string
		for _, s := range w.Steps {
			labels = append(labels, s.Label)
		}
		if got := strings.Join(labels, "|"); got != step.line || w.Status != step.status {
			t.Errorf("at %s: line %q, status %q; want %q, %q", v.State, got, w.Status, step.line, step.status)
		}
		doc := render(t, views.RunBody(v, nil))
		timer := doc.Find(`#run-status [role="timer"][aria-live="off"] #step-timer`)
		if since, _ := timer.Attr("data-since"); (timer.Length() == 1) != step.timed || (step.timed && since == "") {
			t.Errorf("at %s: step timer %v (since %q), want %v", v.State, timer.Length() == 1, since, step.timed)
		}
		if next := doc.Find("#next-step").Text(); !strings.HasPrefix(next, "Next:") && !strings.Contains(next, "Next:") {
			t.Errorf("at %s: next step = %q, want what happens next", v.State, next)
		}
		if doc.Find(`#run-progress [aria-current="step"][data-status="current"]`).Length() != 1 {
			t.Errorf("at %s: want one current step", v.State)
		}
	}
}

// TestWords_PolicyApprovalIsNoStepAddedMidRun: a refund the policy lets
// through keeps the line it started with: the approval step reads "No
// approval needed".
func TestWords_PolicyApprovalIsNoStepAddedMidRun(t *testing.T) {
	t.Parallel()
	v := views.NewRunView(testSnapshot(), true, roles[0].viewer)
	before := len(v.Words().Steps)
	v.Apply(ev(5, store.EventApprovalGranted, map[string]any{"by": "policy"}))
	w := v.Words()
	if len(w.Steps) != before || w.Steps[2].Label != "No approval needed" || w.Steps[2].Status != "done" {
		t.Errorf("steps %+v, want the same %d steps with the approval not needed", w.Steps, before)
	}
	if w.Approved != "" {
		t.Errorf("approval note %q for the policy's approval", w.Approved)
	}
}

func ptr(e store.Event) *store.Event { return &e }

// TestListWords_SameWordsAsTheRunPage: a list names a run's status with
// the run page's word: a declined refund is "Declined", not "failed".
func TestListWords_SameWordsAsTheRunPage(t *testing.T) {
	t.Parallel()
	listed := func(state string, declined, cancel bool) store.RunListing {
		r := store.RunListing{Run: store.Run{ID: uuid.New(), State: state, Amount: 500, Currency: "EUR"}, Declined: declined}
		r.CancelRequestedAt.Valid = cancel
		return r
	}
	for _, tc := range []struct {
		r            store.RunListing
		status, tone string
	}{
		{listed(store.StateFailed, true, false), "Declined", views.ToneNeutral},
		{listed(store.StateFailed, false, false), "Failed", views.ToneBad},
		{listed(store.StateCompleted, false, true), "Refunded", views.ToneGood},
		{listed(store.StateCanceled, false, true), "Canceled", views.ToneNeutral},
		{listed(store.StateReconciling, false, false), "Verifying the result", views.ToneWorking},
	} {
		if status, tone := views.ListWords(tc.r, views.English); status != tc.status || tone != tc.tone {
			t.Errorf("%s (declined %v): %q (%s), want %q (%s)", tc.r.State, tc.r.Declined, status, tone, tc.status, tc.tone)
		}
	}
}

// TestEventText_EveryTypeInWords: each event type of the history reads as
// a sentence, never as its type name.
func TestEventText_EveryTypeInWords(t *testing.T) {
	t.Parallel()
	for _, typ := range store.EventTypes() {
		if typ == store.EventNarrationDelta {
			continue // narration is shown as its own text, never as a line of history
		}
		payload := map[string]any{"step": "planning", "attempt": 2}
		if got := views.EventText(ev(5, typ, payload)); got == typ || got == "" {
			t.Errorf("%s reads %q", typ, got)
		}
	}
	if got := views.EventText(ev(5, store.EventStepAttempt, map[string]any{"step": "submitting", "attempt": 1})); got != "The agent began sending the refund to the payment provider" {
		t.Errorf("step.attempt reads %q", got)
	}
}
