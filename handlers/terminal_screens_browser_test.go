package handlers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
)

// ending is one way a run ends, built through the store as the executor
// would leave it, so its pages read the same every time they are taken.
type ending struct {
	name  string
	build func(b *endingBuilder) *store.Run
}

// endings are every terminal path of issue 20, item 1.
var endings = []ending{
	{"completed", (*endingBuilder).completed},
	{"declined", (*endingBuilder).declined},
	{"canceled-by-customer", (*endingBuilder).canceledByCustomer},
	{"canceled-by-approver", (*endingBuilder).canceledByApprover},
	{"canceled-too-late", (*endingBuilder).canceledTooLate},
	{"failed", (*endingBuilder).failed},
	{"verified-then-completed", (*endingBuilder).verifiedThenCompleted},
	{"restarted-then-completed", (*endingBuilder).restartedThenCompleted},
}

// TestBrowser_EveryEndingFits opens the page of every ending as the
// customer, an approver and support, in Chromium, and fails if one scrolls
// sideways or lacks the skip link. With SCREENSHOTS=1 it writes each to
// docs/screenshots/ as run-<ending>-<role>-<width>.png: the customer's at
// 360 and 1280 px, staff's at 1280.
func TestBrowser_EveryEndingFits(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{DemoLogins: true})
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	runs := make([]*store.Run, len(endings))
	asked := make([]bool, len(endings)) // an approver sees only runs that asked for one
	for i, e := range endings {
		runs[i] = e.build(b)
		snap, err := a.store.Snapshot(b.ctx, runs[i].ID)
		b.must(err)
		asked[i] = snap.Approval != nil
	}
	roles := []struct {
		name, email string
		widths      []int64
		page        func(id uuid.UUID) (path, ready, nav string)
	}{
		{"customer", "customer@example.com", []int64{360, 1280}, runPageOf},
		{"approver", "approver@example.com", []int64{1280}, runPageOf},
		{"support", "support@example.com", []int64{1280}, func(id uuid.UUID) (string, string, string) {
			return "/support/runs/" + id.String(), "#support-timeline", "/support/runs"
		}},
	}
	for _, role := range roles {
		t.Run(role.name, func(t *testing.T) {
			t.Parallel() // a browser of its own each
			ctx := browsertest.NewWithTimeout(t, 6*time.Minute)
			if err := browsertest.Login(ctx, a.srv.URL, role.email, devdb.DemoPassword); err != nil {
				t.Fatal(err)
			}
			for i, e := range endings {
				if role.name == "approver" && !asked[i] {
					continue
				}
				path, ready, nav := role.page(runs[i].ID)
				p := shownPage{name: fmt.Sprintf("run-%s-%s", e.name, role.name), path: path, ready: ready, nav: nav}
				for _, w := range role.widths {
					checkPage(t, ctx, a.srv.URL, p, w)
				}
			}
		})
	}
}

// runPageOf is a run's page, ready once its outcome is shown.
func runPageOf(id uuid.UUID) (path, ready, nav string) {
	return "/runs/" + id.String(), "#outcome", ""
}

// endingBuilder walks runs of the demo customer through the store.
type endingBuilder struct {
	t   *testing.T
	a   *app
	ctx context.Context
}

func (b *endingBuilder) must(err error) {
	b.t.Helper()
	if err != nil {
		b.t.Fatal(err)
	}
}

// as is the context of a request by the demo user email.
func (b *endingBuilder) as(email string) (context.Context, int64) {
	u := b.a.user(b.t, email)
	return store.WithActor(b.ctx, store.Actor{UserID: u.ID, IP: "127.0.0.1"}), u.ID
}

// planned starts a refund and takes it through the agent's check, with
// its narration.
func (b *endingBuilder) planned(item string, amount int64, reason string) *store.Run {
	b.t.Helper()
	u := b.a.user(b.t, "customer@example.com")
	run, _, err := b.a.store.StartRun(b.ctx, store.StartRequest{OwnerID: u.ID, ClientRequestID: uuid.NewString(),
		OrderID: b.a.order(b.t, "customer@example.com", item).ID, Amount: amount, Reason: reason})
	b.must(err)
	_, err = b.a.store.Transition(b.ctx, run.ID, store.StateCreated, store.StatePlanning, store.EventOf(store.RunPlanning{}))
	b.must(err)
	b.attempt(run, "planning")
	b.say(run, fmt.Sprintf("I'm looking at the %s order. The request is for %s back because: “%s”. ",
		item, store.FormatMoney(amount, run.Currency), strings.TrimRight(reason, ".")))
	return run
}

// attempt begins (again) the narrating step.
func (b *endingBuilder) attempt(run *store.Run, step string) {
	b.t.Helper()
	_, err := b.a.store.BeginAttempt(b.ctx, run.ID, step)
	b.must(err)
}

// say narrates text.
func (b *endingBuilder) say(run *store.Run, text string) {
	b.t.Helper()
	_, err := b.a.store.Append(b.ctx, run.ID, store.EventOf(store.NarrationDelta{Text: text}))
	b.must(err)
}

// awaiting asks an approver to decide on run.
func (b *endingBuilder) awaiting(run *store.Run) {
	b.t.Helper()
	b.say(run, "Refunds need an approver's OK, so I am asking for one now. ")
	_, err := b.a.store.RequestApproval(b.ctx, run.ID, store.ActionProposed{Action: "refund", OrderID: run.OrderID,
		Amount: run.Amount, Currency: run.Currency})
	b.must(err)
}

// sent has the approver approve run and records the refund's intent.
func (b *endingBuilder) sent(run *store.Run) *store.Operation {
	b.t.Helper()
	b.awaiting(run)
	ctx, approver := b.as("approver@example.com")
	_, err := b.a.store.Approve(ctx, run.ID, approver, "")
	b.must(err)
	op, err := b.a.store.SubmitOperation(b.ctx, run.ID)
	b.must(err)
	b.attempt(run, "submitting")
	b.say(run, "Approved. I'm asking the payment provider to refund "+store.FormatMoney(op.Amount, op.Currency)+". ")
	return op
}

func (b *endingBuilder) record(op *store.Operation, out store.Outcome) {
	b.t.Helper()
	_, err := b.a.store.RecordOutcome(b.ctx, op.ID, out)
	b.must(err)
}

func (b *endingBuilder) finish(run *store.Run, state, msg string, extra ...store.NewEvent) {
	b.t.Helper()
	_, err := b.a.store.FinishRun(b.ctx, run.ID, state, store.Say(msg), extra...)
	b.must(err)
}

func (b *endingBuilder) cancel(run *store.Run, email, reason string) {
	b.t.Helper()
	ctx, id := b.as(email)
	_, err := b.a.store.RequestCancelBecause(ctx, run.ID, id, reason)
	b.must(err)
}

func (b *endingBuilder) refunded(run *store.Run, op *store.Operation, ref string, extra ...store.NewEvent) {
	b.t.Helper()
	b.record(op, store.Outcome{State: store.OpSucceeded, ProviderRef: ref})
	b.finish(run, store.StateCompleted, fmt.Sprintf("Refunded %s to the original payment method. The payment provider's reference is %s.",
		store.FormatMoney(op.Amount, op.Currency), ref), extra...)
}

func (b *endingBuilder) completed() *store.Run {
	run := b.planned("Trail running shoes", 4000, "The soles came apart after two runs.")
	b.refunded(run, b.sent(run), "re_7Hc2Qx")
	return run
}

func (b *endingBuilder) declined() *store.Run {
	run := b.planned("Rain jacket", 8950, "The zip broke on the first day.")
	op := b.sent(run)
	b.record(op, store.Outcome{State: store.OpFailed, Reason: "declined by the card issuer"})
	b.finish(run, store.StateFailed, "The payment provider did not refund €89.50 (declined by the card issuer). No money moved.")
	return run
}

func (b *endingBuilder) canceledByCustomer() *store.Run {
	run := b.planned("Rain jacket", 2000, "Wrong size.")
	b.awaiting(run)
	b.cancel(run, "customer@example.com", "")
	b.finish(run, store.StateCanceled, "Canceled. No refund was made and no money moved.")
	return run
}

func (b *endingBuilder) canceledByApprover() *store.Run {
	run := b.planned("Water bottle", 1599, "It leaks.")
	b.awaiting(run)
	b.cancel(run, "approver@example.com", "The order was already refunded by bank transfer on 28 November.")
	b.finish(run, store.StateCanceled, "Canceled. No refund was made and no money moved.")
	return run
}

func (b *endingBuilder) canceledTooLate() *store.Run {
	run := b.planned("Water bottle", 1500, "It leaks from the lid.")
	op := b.sent(run)
	b.cancel(run, "customer@example.com", "")
	b.record(op, store.Outcome{State: store.OpReconciling, Reason: "no answer from the payment provider: timeout after 5s"})
	b.refunded(run, op, "re_9Lk4Tz", store.EventOf(store.CancelTooLatePayload{OperationID: op.ID}))
	return run
}

func (b *endingBuilder) failed() *store.Run {
	run := b.planned("Trail running shoes", 2500, "Changed my mind.")
	b.finish(run, store.StateFailed, "Refunds above €20.00 need a person: support decides them, not the agent. Nothing was refunded.")
	return run
}

func (b *endingBuilder) verifiedThenCompleted() *store.Run {
	run := b.planned("Trail running shoes", 3000, "One shoe is a size smaller than the other.")
	op := b.sent(run)
	b.record(op, store.Outcome{State: store.OpReconciling, Reason: "no answer from the payment provider: timeout after 5s"})
	b.refunded(run, op, "re_3Vb8Mn")
	return run
}

// restartedThenCompleted: PostgreSQL and the worker restarted while it
// checked the order; the next worker began the step again, and the run
// went on to the end. The restart is what PostgreSQL's new start time
// does to the run's next append: its seqs skip a gap (seqEpochGap).
func (b *endingBuilder) restartedThenCompleted() *store.Run {
	run := b.planned("Trail running shoes", 2000, "The laces are missing.")
	_, err := b.a.db.ExecContext(b.ctx, `UPDATE runs SET seq_epoch = 'epoch' WHERE id = $1`, run.ID)
	b.must(err)
	b.attempt(run, "planning")
	b.say(run, "Fresh start. I'm looking at the order again. ")
	b.refunded(run, b.sent(run), "re_5Qw1Er")
	return run
}
