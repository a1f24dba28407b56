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
	"github.com/refundd/refundd/views"
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
// customer, an approver and support, in Chromium, in English and in
// Chinese, and fails if one scrolls sideways or lacks the skip link, or if
// a Chinese page shows English words of the words table. With
// SCREENSHOTS=1 it writes each to docs/screenshots/ as
// [zh-CN-]run-<ending>-<role>-<width>.png: the customer's at 360 and
// 1280 px, staff's at 1280.
func TestBrowser_EveryEndingFits(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"en", "zh-CN"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			everyEndingFits(t, lang)
		})
	}
}

func everyEndingFits(t *testing.T, lang string) {
	a := newApp(t, handlers.Config{DemoLogins: true})
	b := &endingBuilder{t: t, a: a, ctx: context.Background(), lang: lang}
	prefix := ""
	if lang != "en" {
		prefix = lang + "-"
		for _, email := range []string{"customer@example.com", "approver@example.com", "support@example.com"} {
			b.must(a.store.SetLanguage(b.ctx, a.user(t, email).ID, lang))
		}
	}
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
				p := shownPage{name: fmt.Sprintf("%srun-%s-%s", prefix, e.name, role.name), path: path, ready: ready, nav: nav}
				for _, w := range role.widths {
					checkPage(t, ctx, a.srv.URL, p, w)
					if lang != "en" {
						wantNoEnglish(t, ctx, p.name)
					}
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
	t    *testing.T
	a    *app
	ctx  context.Context
	lang string // the customer's: the agent narrates in it
}

// speak is the built-in narrator's line key in the customer's language.
func (b *endingBuilder) speak(key string, data map[string]any) string {
	return views.Answers{}.Say(b.lang, key, data)
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
	o := b.a.order(b.t, "customer@example.com", item)
	money := views.Answers{}.Money
	b.say(run, b.speak("narration.planning", map[string]any{"Order": o.ID, "Description": item, "Paid": money(b.lang, o.Amount, o.Currency),
		"Amount": money(b.lang, amount, run.Currency), "Reason": strings.TrimRight(reason, ".")})+b.speak("narration.refundable", nil))
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
	b.say(run, b.speak("narration.needs_ok", nil))
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
	b.say(run, b.speak("narration.submitting", map[string]any{"Amount": views.Answers{}.Money(b.lang, op.Amount, op.Currency)}))
	return op
}

func (b *endingBuilder) record(op *store.Operation, out store.Outcome) {
	b.t.Helper()
	_, err := b.a.store.RecordOutcome(b.ctx, op.ID, out)
	b.must(err)
}

// finish ends run with msg, an answer of the words table (views.Answers)
// as the executor words it, in every language.
func (b *endingBuilder) finish(run *store.Run, state string, msg store.Answer, extra ...store.NewEvent) {
	b.t.Helper()
	_, err := b.a.store.FinishRun(b.ctx, run.ID, state, msg, extra...)
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
	b.finish(run, store.StateCompleted, views.Answers{}.Refunded(op.Amount, op.Currency, ref, len(extra) > 0), extra...)
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
	b.finish(run, store.StateFailed, views.Answers{}.Declined(op.Amount, op.Currency, "declined by the card issuer"))
	return run
}

func (b *endingBuilder) canceledByCustomer() *store.Run {
	run := b.planned("Rain jacket", 2000, "Wrong size.")
	b.awaiting(run)
	b.cancel(run, "customer@example.com", "")
	b.finish(run, store.StateCanceled, views.Answers{}.Canceled(false))
	return run
}

func (b *endingBuilder) canceledByApprover() *store.Run {
	run := b.planned("Water bottle", 1599, "It leaks.")
	b.awaiting(run)
	b.cancel(run, "approver@example.com", "The order was already refunded by bank transfer on 28 November.")
	b.finish(run, store.StateCanceled, views.Answers{}.Canceled(false))
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
	b.finish(run, store.StateFailed, views.Answers{}.OverLimit(2000, run.Currency))
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
	b.say(run, b.speak("narration.refundable", nil))
	b.refunded(run, b.sent(run), "re_5Qw1Er")
	return run
}
