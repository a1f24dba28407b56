package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// stillRunningWords are sentences that only a run still going on may
// show: on a finished run's page each is left over from an earlier state.
var stillRunningWords = []string{"will stop", "stops before any money moves", "next safe point",
	"confirming the result", "not yet confirmed", "Too late to cancel", "Waiting for an approver",
	"Cancel run", "Approve refund", "can no longer be canceled", "Next:", "Checking the order", "Sending to the payment provider",
	"as requested"}

// contradicts are, for each outcome, sentences that would say otherwise.
var contradicts = map[string][]string{
	store.OutcomeCompleted:     {"Canceled", "Not refunded", "No money moved", "No refund was made", "cancel"},
	store.OutcomeCancelTooLate: {"Canceled", "Not refunded", "No money moved", "No refund was made"},
	store.OutcomeCanceled:      {"Refunded ", "Completed", "Not refunded", "confirmed the refund"},
	store.OutcomeDeclined:      {"Refunded ", "Completed", "Canceled", "cancel"},
	store.OutcomeFailed:        {"Refunded ", "Completed", "Canceled", "cancel"},
}

// wantOneOutcome checks a finished run's page: one outcome, these words,
// nothing that contradicts it or is left over from while it ran.
func wantOneOutcome(t *testing.T, r response, outcome, words string) {
	t.Helper()
	wantStatus(t, r, http.StatusOK)
	doc := r.doc(t)
	if n := doc.Find("[data-outcome]").Length(); n != 1 {
		t.Fatalf("%d outcomes on the page, want 1", n)
	}
	if got, _ := doc.Find("[data-outcome]").Attr("data-outcome"); got != outcome {
		t.Errorf("outcome = %q, want %q", got, outcome)
	}
	if got := doc.Find("#outcome").Text(); !strings.Contains(got, words) {
		t.Errorf("outcome card = %q, want it to say %q", got, words)
	}
	for _, id := range []string{"#cancel", "#approve", "#cancel-note", "#cancel-gone", "#approval-note"} {
		if doc.Find(id).Length() != 0 {
			t.Errorf("the finished run's page has %s: %q", id, doc.Find(id).Text())
		}
	}
	wantFinalAnswerOnce(t, doc)
	text := doc.Find("#run").Text()
	for _, w := range append(append([]string(nil), stillRunningWords...), contradicts[outcome]...) {
		if strings.Contains(text, w) {
			t.Errorf("the %s run's page says %q:\n%s", outcome, w, squash(text))
		}
	}
}

// wantFinalAnswerOnce: a finished run's page shows its final answer (the
// API's final_message) in #final-answer, and nowhere else.
func wantFinalAnswerOnce(t *testing.T, doc *goquery.Document) {
	t.Helper()
	answer := squash(doc.Find("#final-answer").Text())
	if doc.Find("#final-answer").Length() != 1 || answer == "" {
		t.Fatalf("the finished run's page has %d final answers (%q), want one", doc.Find("#final-answer").Length(), answer)
	}
	if n := strings.Count(squash(doc.Find("main").Text()), answer); n != 1 {
		t.Errorf("the final answer %q is on the page %d times, want once", answer, n)
	}
}

func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// outcomeApp is the real program at test speed, with a customer and an
// approver signed in.
type outcomeApp struct {
	*app
	customer, approver, support *http.Client
}

func (o *outcomeApp) startAwaiting(t *testing.T) *store.Run {
	t.Helper()
	run := o.startRun(t, "customer@example.com", 100)
	testkit.WaitRunState(t, o.store, run.ID, store.StateAwaitingApproval, 20*time.Second)
	return run
}

func (o *outcomeApp) decide(t *testing.T, c *http.Client, runID uuid.UUID, action string, form url.Values) {
	t.Helper()
	page := "/runs/" + runID.String()
	wantRedirect(t, o.post(t, c, page+"/"+action, form), page)
}

func (o *outcomeApp) finished(t *testing.T, runID uuid.UUID, state string) {
	t.Helper()
	testkit.WaitRunState(t, o.store, runID, state, 20*time.Second)
}

func (o *outcomeApp) page(t *testing.T, c *http.Client, runID uuid.UUID) response {
	t.Helper()
	return o.get(t, c, "/runs/"+runID.String())
}

// TestRunPage_EachTerminalPathShowsOneOutcome walks every way a run ends,
// through the real executor and provider, and reads the finished page as
// the customer and as the approver: one outcome, who acted in each
// viewer's words, nothing stale.
func TestRunPage_EachTerminalPathShowsOneOutcome(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{}, withExecutor(agent.Builtin{Words: views.Answers{}}, payments.Faults{}))
	o := &outcomeApp{app: a, customer: a.client(t), approver: a.client(t), support: a.client(t)}
	a.login(t, o.customer, "customer@example.com")
	a.login(t, o.approver, "approver@example.com")
	a.login(t, o.support, "support@example.com")
	customerName := a.user(t, "customer@example.com").Name

	t.Run("completed", func(t *testing.T) {
		run := o.startAwaiting(t)
		o.decide(t, o.approver, run.ID, "approve", nil)
		o.finished(t, run.ID, store.StateCompleted)
		wantOneOutcome(t, o.page(t, o.customer, run.ID), store.OutcomeCompleted, "Approved by an approver.")
		wantOneOutcome(t, o.page(t, o.approver, run.ID), store.OutcomeCompleted, "Approved by you.")
	})
	t.Run("an answer belongs to its run", o.checkAnswerBelongsToItsRun)
	t.Run("declined", func(t *testing.T) {
		if err := a.sim.SetFaults(payments.Faults{DeclineNext: 1}); err != nil {
			t.Fatal(err)
		}
		run := o.startAwaiting(t)
		o.decide(t, o.approver, run.ID, "approve", nil)
		o.finished(t, run.ID, store.StateFailed)
		wantOneOutcome(t, o.page(t, o.customer, run.ID), store.OutcomeDeclined, "Declined by the payment provider.")
	})
	t.Run("canceled by the customer", func(t *testing.T) {
		o.checkCanceledByCustomer(t, customerName)
	})
	t.Run("canceled by an approver", o.checkCanceledByApprover)
	t.Run("canceled too late", func(t *testing.T) {
		o.checkCanceledTooLate(t, customerName)
	})
	t.Run("failed", func(t *testing.T) {
		run := o.startAwaiting(t)
		if _, err := a.store.FinishRun(context.Background(), run.ID, store.StateFailed,
			store.Say("Refunds above $0.50 need a person: please contact support. Nothing was refunded.")); err != nil {
			t.Fatal(err)
		}
		wantOneOutcome(t, o.page(t, o.customer, run.ID), store.OutcomeFailed, "Not refunded")
	})
}

// checkAnswerBelongsToItsRun: the answer to a decision on one run is shown
// on that run's page only.
func (o *outcomeApp) checkAnswerBelongsToItsRun(t *testing.T) {
	t.Helper()
	first, second := o.startAwaiting(t), o.startAwaiting(t)
	o.decide(t, o.approver, first.ID, "approve", nil)
	if got := strings.TrimSpace(o.page(t, o.approver, second.ID).doc(t).Find("#decision-result").Text()); got != "" {
		t.Errorf("another run's page shows %q", got)
	}
	if got := strings.TrimSpace(o.page(t, o.approver, first.ID).doc(t).Find("#decision-result").Text()); got != "You approved this refund." {
		t.Errorf("the run's own page shows %q", got)
	}
	o.decide(t, o.customer, second.ID, "cancel", nil)
	o.finished(t, first.ID, store.StateCompleted)
	o.finished(t, second.ID, store.StateCanceled)
}

// checkCanceledByCustomer: a run the customer canceled says so, in each
// viewer's words.
func (o *outcomeApp) checkCanceledByCustomer(t *testing.T, customerName string) {
	t.Helper()
	run := o.startAwaiting(t)
	o.decide(t, o.customer, run.ID, "cancel", nil)
	o.finished(t, run.ID, store.StateCanceled)
	// The first page after the form holds its answer: what happened,
	// which the outcome does not contradict.
	r := o.page(t, o.customer, run.ID)
	if got := strings.TrimSpace(r.doc(t).Find("#decision-result").Text()); got != "You asked to cancel this run." {
		t.Errorf("answer = %q", got)
	}
	wantOneOutcome(t, r, store.OutcomeCanceled, "Canceled by you.")
	wantOneOutcome(t, o.page(t, o.approver, run.ID), store.OutcomeCanceled, "Canceled by "+customerName+" (the customer).")
}

// checkCanceledByApprover: a run an approver canceled says so, with the
// approver's reason, to the customer too; only staff read who it was.
func (o *outcomeApp) checkCanceledByApprover(t *testing.T) {
	t.Helper()
	run := o.startAwaiting(t)
	o.decide(t, o.approver, run.ID, "cancel", url.Values{"reason": {"duplicate of another request"}})
	o.finished(t, run.ID, store.StateCanceled)
	r := o.page(t, o.customer, run.ID)
	wantOneOutcome(t, r, store.OutcomeCanceled, "Canceled by an approver.")
	if got := r.doc(t).Find("#outcome-reason").Text(); got != "Reason given: “duplicate of another request”" {
		t.Errorf("the customer reads the reason %q", got)
	}
	if text := r.doc(t).Find("#run").Text(); strings.Contains(text, "Canceled by you") || strings.Contains(text, "Avery") {
		t.Errorf("the customer's page calls the cancel theirs or names the approver:\n%s", squash(text))
	}
	r = o.page(t, o.approver, run.ID)
	wantOneOutcome(t, r, store.OutcomeCanceled, "Canceled by you.")
	if got := r.doc(t).Find(`#timeline li[data-type="cancel.requested"]`).Text(); !strings.Contains(got, "duplicate of another request") {
		t.Errorf("the approver's timeline = %q, want the reason given", squash(got))
	}
	// Support reads the same outcome, naming the approver, in its own page.
	doc := o.get(t, o.support, "/support/runs/"+run.ID.String()).doc(t)
	want := "Canceled by Avery Approver (approver). Reason given: “duplicate of another request”"
	if got := squash(doc.Find("#support-outcome").Text()); got != want {
		t.Errorf("support's outcome = %q, want %q", got, want)
	}
	wantFinalAnswerOnce(t, doc)
	if got := doc.Find("#support-state").Text(); got != "Canceled" {
		t.Errorf("support's state = %q, want Canceled", got)
	}
}

// checkCanceledTooLate: once the provider may have the refund, the page
// offers no cancel, and a cancel sent anyway ends as cancel-too-late.
func (o *outcomeApp) checkCanceledTooLate(t *testing.T, customerName string) {
	t.Helper()
	a := o.app
	if err := a.sim.SetFaults(payments.Faults{HoldAfterCommit: true}); err != nil {
		t.Fatal(err)
	}
	run := o.startAwaiting(t)
	o.decide(t, o.approver, run.ID, "approve", nil)
	// Until the provider has it, a cancel still stops the money: wait for
	// the provider's own ledger, not just our operation row.
	testkit.WaitUntil(t, "the refund at the provider", 20*time.Second, func() bool {
		return a.count(t, `SELECT count(*) FROM provider_refunds p JOIN operations o ON p.key = o.id::text
                WHERE o.run_id = $1`, run.ID) > 0
	})
	// Once the provider may have the refund, the page offers no cancel
	// and says why.
	doc := o.page(t, o.customer, run.ID).doc(t)
	if doc.Find("#cancel").Length() != 0 || !strings.Contains(doc.Find("#cancel-gone").Text(), "can no longer be canceled") {
		t.Errorf("after the refund was sent: cancel offered %v, note %q", doc.Find("#cancel").Length() != 0, doc.Find("#cancel-gone").Text())
	}
	// A cancel sent anyway (an old tab, the API) is recorded, too late.
	o.decide(t, o.customer, run.ID, "cancel", nil)
	o.page(t, o.customer, run.ID) // takes the answer
	if err := a.sim.SetFaults(payments.Faults{}); err != nil {
		t.Fatal(err)
	}
	a.sim.Release()
	o.finished(t, run.ID, store.StateCompleted)
	wantOneOutcome(t, o.page(t, o.customer, run.ID), store.OutcomeCancelTooLate, "The cancel you asked for came too late")
	wantOneOutcome(t, o.page(t, o.approver, run.ID), store.OutcomeCancelTooLate, "The cancel "+customerName+" (the customer) asked for came too late")
}
