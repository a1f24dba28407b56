package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

var htmx = map[string]string{"HX-Request": "true"}

type decisionJSON struct {
	Result  string  `json:"result"`
	Message string  `json:"message"`
	Run     runJSON `json:"run"`
}

// awaitingApproval is a run of the customer's that asks for a decision.
func (a *app) awaitingApproval(t *testing.T, email string) *store.Run {
	t.Helper()
	run := a.startRun(t, email, 1000)
	run, err := a.store.RequestApproval(context.Background(), run.ID, proposalFor(run))
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func (a *app) decide(t *testing.T, c *http.Client, runPath, action string, hdr map[string]string) response {
	t.Helper()
	return a.send(t, c, http.MethodPost, runPath+"/"+action, hdr, "")
}

// wantFragment checks an htmx answer: the DecisionResult fragment with
// these words.
func wantFragment(t *testing.T, r response, words string) {
	t.Helper()
	wantStatus(t, r, http.StatusOK)
	if got := strings.TrimSpace(r.doc(t).Find("#decision-result").Text()); got != words {
		t.Errorf("#decision-result = %q, want %q", got, words)
	}
}

// wantFlash checks the run page a plain form was sent back to shows the
// decision's words once, next to the buttons.
func wantFlash(t *testing.T, r response, words string) {
	t.Helper()
	wantStatus(t, r, http.StatusOK)
	if got := strings.TrimSpace(r.doc(t).Find("#decision-result").Text()); got != words {
		t.Errorf("answer next to the buttons = %q, want %q", got, words)
	}
}

func (a *app) events(t *testing.T, run *store.Run, typ string) int {
	t.Helper()
	return a.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = $2`, run.ID, typ)
}

// TestApprove_Twice: a double click, a second tab and the API all approve
// the same request; one approval is recorded and the repeats say so.
func TestApprove_Twice(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.awaitingApproval(t, "customer@example.com")
	c := a.client(t)
	a.login(t, c, "approver@example.com")
	page := "/runs/" + run.ID.String()

	wantRedirect(t, a.decide(t, c, page, "approve", nil), page)
	wantFlash(t, a.get(t, c, page), "You approved this refund.")
	wantRedirect(t, a.decide(t, c, page, "approve", nil), page)
	wantFlash(t, a.get(t, c, page), "This refund was already approved.")
	wantFragment(t, a.decide(t, c, page, "approve", htmx), "This refund was already approved.")
	api := a.decide(t, c, "/api"+page, "approve", nil)
	wantStatus(t, api, http.StatusOK)
	if d := decode[decisionJSON](t, api); d.Result != "already_approved" || d.Message != "This refund was already approved." ||
		d.Run.ID != run.ID || d.Run.State != store.StateSubmitting {
		t.Errorf("API answer = %+v", d)
	}

	if n := a.events(t, run, store.EventApprovalGranted); n != 1 {
		t.Errorf("approval.granted events = %d, want 1", n)
	}
	var decision string
	var by int64
	if err := a.db.QueryRow(`SELECT decision, decided_by FROM approvals WHERE run_id = $1`, run.ID).Scan(&decision, &by); err != nil {
		t.Fatal(err)
	}
	if decision != "approved" || by != a.user(t, "approver@example.com").ID {
		t.Errorf("approval = %s by %d, want approved by the approver", decision, by)
	}
}

func TestApprove_Words(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "approver@example.com")

	t.Run("htmx", func(t *testing.T) {
		run := a.awaitingApproval(t, "customer@example.com")
		wantFragment(t, a.decide(t, c, "/runs/"+run.ID.String(), "approve", htmx), "You approved this refund.")
	})
	t.Run("api", func(t *testing.T) {
		run := a.awaitingApproval(t, "customer2@example.com")
		r := a.decide(t, c, "/api/runs/"+run.ID.String(), "approve", nil)
		wantStatus(t, r, http.StatusOK)
		if d := decode[decisionJSON](t, r); d.Result != "approved" || d.Message != "You approved this refund." || d.Run.State != store.StateSubmitting {
			t.Errorf("API answer = %+v", d)
		}
	})
}

// TestApprove_OwnRequest: an approver who asked for a refund cannot approve
// it themselves.
func TestApprove_OwnRequest(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	approver := a.user(t, "approver@example.com")
	if _, err := a.store.CreateOrder(context.Background(), approver.ID, "Desk lamp", 4000, "EUR"); err != nil {
		t.Fatal(err)
	}
	run := a.awaitingApproval(t, "approver@example.com")
	c := a.client(t)
	a.login(t, c, "approver@example.com")

	page := a.decide(t, c, "/runs/"+run.ID.String(), "approve", nil)
	wantStatus(t, page, http.StatusForbidden)
	if !strings.Contains(page.body, "you cannot approve your own refund request") {
		t.Errorf("403 page does not give the reason:\n%s", page.body)
	}
	e := wantAPIError(t, a.decide(t, c, "/api/runs/"+run.ID.String(), "approve", nil), http.StatusForbidden, store.CodeForbidden)
	if !strings.Contains(e.Error.Message, "your own refund request") {
		t.Errorf("message = %q", e.Error.Message)
	}
	wantFragment(t, a.decide(t, c, "/runs/"+run.ID.String(), "approve", htmx), "You cannot approve your own refund request.")
	if n := a.events(t, run, store.EventApprovalGranted); n != 0 {
		t.Errorf("approval.granted events = %d, want none", n)
	}
}

// TestApprove_ByCustomer: approving needs the approver role, even for the
// run's owner.
func TestApprove_ByCustomer(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.awaitingApproval(t, "customer@example.com")
	for _, email := range []string{"customer@example.com", "support@example.com"} {
		t.Run(email, func(t *testing.T) {
			c := a.client(t)
			a.login(t, c, email)
			wantStatus(t, a.decide(t, c, "/runs/"+run.ID.String(), "approve", nil), http.StatusForbidden)
			wantAPIError(t, a.decide(t, c, "/api/runs/"+run.ID.String(), "approve", nil), http.StatusForbidden, store.CodeForbidden)
		})
	}
	if n := a.events(t, run, store.EventApprovalGranted); n != 0 {
		t.Errorf("approval.granted events = %d, want none", n)
	}
}

// TestCancel_ByOwner: cancel is a command recorded once; the agent honours
// it before any money moves.
func TestCancel_ByOwner(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.awaitingApproval(t, "customer@example.com")
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	page := "/runs/" + run.ID.String()

	wantRedirect(t, a.decide(t, c, page, "cancel", nil), page)
	wantFlash(t, a.get(t, c, page), "You asked to cancel this run.")
	if n := a.events(t, run, store.EventCancelRequested); n != 1 {
		t.Errorf("cancel.requested events = %d, want 1", n)
	}
	got, err := a.store.RunByID(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.CancelRequested() || got.State != store.StateAwaitingApproval {
		t.Errorf("run = %s, cancel requested %v; want the command recorded and the state left to the agent", got.State, got.CancelRequested())
	}

	wantFragment(t, a.decide(t, c, page, "cancel", htmx), "A cancel was already asked for.")
	r := a.decide(t, c, "/api"+page, "cancel", nil)
	wantStatus(t, r, http.StatusOK)
	if d := decode[decisionJSON](t, r); d.Result != "already_canceling" || d.Run.ID != run.ID {
		t.Errorf("API answer = %+v", d)
	}
	if n := a.events(t, run, store.EventCancelRequested); n != 1 {
		t.Errorf("cancel.requested events after repeats = %d, want 1", n)
	}
}

func TestCancel_Words(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	t.Run("owner htmx", func(t *testing.T) {
		run := a.startRun(t, "customer@example.com", 100)
		c := a.client(t)
		a.login(t, c, "customer@example.com")
		wantFragment(t, a.decide(t, c, "/runs/"+run.ID.String(), "cancel", htmx),
			"You asked to cancel this run.")
	})
	t.Run("approver api", func(t *testing.T) {
		run := a.awaitingApproval(t, "customer2@example.com")
		c := a.client(t)
		a.login(t, c, "approver@example.com")
		r := a.decide(t, c, "/api/runs/"+run.ID.String(), "cancel", nil)
		wantStatus(t, r, http.StatusOK)
		if d := decode[decisionJSON](t, r); d.Result != "cancel_requested" || d.Message != "You asked to cancel this run." {
			t.Errorf("API answer = %+v", d)
		}
		if n := a.events(t, run, store.EventCancelRequested); n != 1 {
			t.Errorf("cancel.requested events = %d, want 1", n)
		}
	})
}

// TestCancel_BySupport: support reads runs; it does not cancel them.
func TestCancel_BySupport(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.awaitingApproval(t, "customer@example.com")
	c := a.client(t)
	a.login(t, c, "support@example.com")
	wantStatus(t, a.decide(t, c, "/runs/"+run.ID.String(), "cancel", nil), http.StatusForbidden)
	wantAPIError(t, a.decide(t, c, "/api/runs/"+run.ID.String(), "cancel", nil), http.StatusForbidden, store.CodeForbidden)
	if n := a.events(t, run, store.EventCancelRequested); n != 0 {
		t.Errorf("cancel.requested events = %d, want none", n)
	}
}

// TestCancel_TooLate: once a call about the refund's operation may have
// reached the provider, the cancel is recorded, and the answer says it is
// too late and that the result is being confirmed.
func TestCancel_TooLate(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	ctx := context.Background()
	run := a.awaitingApproval(t, "customer@example.com")
	if _, err := a.store.Approve(ctx, run.ID, a.user(t, "approver@example.com").ID, ""); err != nil {
		t.Fatal(err)
	}
	op, err := a.store.SubmitOperation(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	// A refund call is on its way: it may reach the provider.
	if _, err := a.store.BeginSubmit(ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	page := "/runs/" + run.ID.String()
	const tooLate = "You asked to cancel, but the refund may already have reached the payment provider."

	wantFragment(t, a.decide(t, c, page, "cancel", htmx), tooLate)
	r := a.decide(t, c, "/api"+page, "cancel", nil)
	wantStatus(t, r, http.StatusOK)
	if d := decode[decisionJSON](t, r); d.Result != "too_late" || d.Message != tooLate {
		t.Errorf("API answer = %+v", d)
	}
	if n := a.events(t, run, store.EventCancelRequested); n != 1 {
		t.Errorf("cancel.requested events = %d, want 1", n)
	}
	if n := a.count(t, `SELECT count(*) FROM operations WHERE run_id = $1 AND state = 'submitted'`, run.ID); n != 1 {
		t.Errorf("submitted operations = %d, want the one left alone", n)
	}
}

// TestDecide_FinishedRun: deciding on a run that has ended is a 409 that
// says so.
func TestDecide_FinishedRun(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.awaitingApproval(t, "customer@example.com")
	if _, err := a.store.FinishRun(context.Background(), run.ID, store.StateFailed, store.Say("Policy refused.")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ email, action string }{
		{"approver@example.com", "approve"},
		{"approver@example.com", "cancel"},
		{"customer@example.com", "cancel"},
	} {
		t.Run(tc.email+" "+tc.action, func(t *testing.T) {
			c := a.client(t)
			a.login(t, c, tc.email)
			page := a.decide(t, c, "/runs/"+run.ID.String(), tc.action, nil)
			wantStatus(t, page, http.StatusConflict)
			if !strings.Contains(page.body, "The run has already finished.") {
				t.Errorf("409 page lacks the words:\n%s", page.body)
			}
			e := wantAPIError(t, a.decide(t, c, "/api/runs/"+run.ID.String(), tc.action, nil), http.StatusConflict, store.CodeConflict)
			if e.Error.Message != "The run has already finished." {
				t.Errorf("message = %q", e.Error.Message)
			}
			wantFragment(t, a.decide(t, c, "/runs/"+run.ID.String(), tc.action, htmx), "The run has already finished.")
		})
	}
	if n := a.events(t, run, store.EventCancelRequested) + a.events(t, run, store.EventApprovalGranted); n != 0 {
		t.Errorf("decision events on a finished run = %d, want none", n)
	}
}

// TestDecide_Reason: staff may give a reason, kept with the decision; one
// too long is refused in words and changes nothing; a customer's is not
// kept.
func TestDecide_Reason(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.awaitingApproval(t, "customer@example.com")
	page := "/runs/" + run.ID.String()
	approver := a.client(t)
	a.login(t, approver, "approver@example.com")

	long := url.Values{"reason": {strings.Repeat("x", store.MaxDecisionReasonLen+1)}}
	if r := a.post(t, approver, page+"/approve", long); r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "reason is longer") {
		t.Errorf("a reason too long: status %d, want 422 with words:\n%s", r.status, r.body)
	}
	if n := a.events(t, run, store.EventApprovalGranted); n != 0 {
		t.Fatalf("approval.granted events after a refused reason = %d, want none", n)
	}
	wantRedirect(t, a.post(t, approver, page+"/approve", url.Values{"reason": {"  photos checked  "}}), page)
	var reason string
	if err := a.db.Get(&reason, `SELECT payload->>'reason' FROM run_events WHERE run_id = $1 AND type = $2`, run.ID, store.EventApprovalGranted); err != nil || reason != "photos checked" {
		t.Errorf("stored reason = %q (%v), want the approver's, trimmed", reason, err)
	}
	if got := a.get(t, approver, page).doc(t).Find(`#timeline li[data-type="approval.granted"]`).Text(); !strings.Contains(got, "Approved by you: “photos checked”") {
		t.Errorf("approver's timeline item = %q", got)
	}

	customer := a.client(t)
	a.login(t, customer, "customer@example.com")
	wantRedirect(t, a.post(t, customer, page+"/cancel", url.Values{"reason": {"changed my mind"}}), page)
	if n := a.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = $2 AND payload ? 'reason'`, run.ID, store.EventCancelRequested); n != 0 {
		t.Errorf("a customer's reason was kept")
	}
}

// TestDecide_NotAwaitingApproval: an approver who approves or cancels a
// run right after its start, before the agent asked for a decision, gets a
// 409 that says the run's state, not a 404 that says it is not there; a
// customer who may not see the run still gets the 404. Nothing changes.
func TestDecide_NotAwaitingApproval(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{ApprovalThreshold: 500})
	run := a.startRun(t, "customer@example.com", 1000)  // created: nothing works on it here
	small := a.startRun(t, "customer@example.com", 100) // below the threshold: never asks
	approver := a.client(t)
	a.login(t, approver, "approver@example.com")
	for _, action := range []string{"approve", "cancel"} {
		t.Run(action, func(t *testing.T) {
			e := wantAPIError(t, a.decide(t, approver, "/api/runs/"+run.ID.String(), action, nil), http.StatusConflict, store.CodeConflict)
			if e.Error.State != store.StateCreated || !strings.Contains(e.Error.Message, "not waiting for an approval (it is created)") {
				t.Errorf("409 = %+v, want the run's state", e.Error)
			}
			page := a.decide(t, approver, "/runs/"+run.ID.String(), action, nil)
			wantStatus(t, page, http.StatusConflict)
			if !strings.Contains(page.body, "not waiting for an approval") {
				t.Errorf("409 page lacks the words:\n%s", page.body)
			}
			wantFragment(t, a.decide(t, approver, "/runs/"+run.ID.String(), action, htmx), "This run is not waiting for an approval (it is created).")
		})
	}
	wantAPIError(t, a.decide(t, approver, "/api/runs/"+small.ID.String(), "approve", nil), http.StatusNotFound, store.CodeNotFound)
	stranger := a.client(t)
	a.login(t, stranger, "customer2@example.com")
	wantAPIError(t, a.decide(t, stranger, "/api/runs/"+run.ID.String(), "cancel", nil), http.StatusNotFound, store.CodeNotFound)
	if n := a.events(t, run, store.EventCancelRequested) + a.events(t, run, store.EventApprovalGranted); n != 0 {
		t.Errorf("decision events = %d, want none", n)
	}
}
