package outbound_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
	"github.com/refundd/refundd/views"
)

const publicURL = "http://127.0.0.1:8080"

// planEnv is a database, a simulated provider, the real executor, a
// customer with an order and two approvers, and the mail planner.
type planEnv struct {
	t         *testing.T
	s         *store.Store
	customer  *store.User
	approvers []*store.User
	order     *store.Order
	planner   *outbound.MailPlanner
}

// newPlanEnv starts the executor: refunds of at least threshold need an
// approver (0: every one does).
func newPlanEnv(t *testing.T, threshold int64) *planEnv {
	t.Helper()
	s := storetest.MustOpen(t)
	p := testkit.StartProvider(t, storetest.DB(t, s), payments.Faults{}, 10*time.Second)
	who := storetest.MustSeedParties(t, s, 1_000_000)
	second, err := s.CreateUser(context.Background(), "a2@example.com", "A2", store.RoleApprover, "pw")
	if err != nil {
		t.Fatal(err)
	}
	testkit.StartExecutor(t, s, nil, p.Client, nil, agent.Config{ApprovalThreshold: threshold, ProviderTimeout: 2 * time.Second})
	return &planEnv{t: t, s: s, customer: who.Customer, approvers: []*store.User{who.Approver, second}, order: who.Order,
		planner: &outbound.MailPlanner{Store: s, PublicURL: publicURL}}
}

func (e *planEnv) start(amount int64) *store.Run {
	e.t.Helper()
	r, _, err := e.s.StartRun(context.Background(), store.StartRequest{OwnerID: e.customer.ID, ClientRequestID: uuid.NewString(),
		OrderID: e.order.ID, Amount: amount, Reason: "arrived broken"})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// family starts a request of n orders of 900 cents, refunding amount of each.
func (e *planEnv) family(n int, amount int64) *store.Family {
	e.t.Helper()
	ctx := context.Background()
	var refunds []store.RefundItem
	for range n {
		o, err := e.s.CreateOrder(ctx, e.customer.ID, "Lamp", 900, "EUR")
		if err != nil {
			e.t.Fatal(err)
		}
		refunds = append(refunds, store.RefundItem{OrderID: o.ID, Amount: amount})
	}
	fam, _, err := e.s.StartFamily(ctx, store.FamilyRequest{OwnerID: e.customer.ID, ClientRequestID: uuid.NewString(),
		Refunds: refunds, Reason: "all arrived broken"})
	if err != nil {
		e.t.Fatal(err)
	}
	return fam
}

func (e *planEnv) waitState(id uuid.UUID, state string) {
	e.t.Helper()
	testkit.WaitRunState(e.t, e.s, id, state, 20*time.Second)
}

// fanOut runs the engine's fan-out with the planner until the outbox is
// empty: every business event, in order, planned and its mails recorded.
func (e *planEnv) fanOut() {
	e.t.Helper()
	ctx := context.Background()
	// Twice: a second fan-out finds nothing left, and plans nothing twice.
	for range 2 {
		for {
			n, err := e.s.FanOut(ctx, 100, e.planner)
			if err != nil {
				e.t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
	}
}

// verify runs refundd verify's checks, the mail ledger's among them.
func (e *planEnv) verify() {
	e.t.Helper()
	problems, err := e.s.Verify(context.Background(), store.WithMailCheck())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, p := range problems {
		e.t.Errorf("verify: %s", p)
	}
}

// mails is the whole ledger, by kind.
func (e *planEnv) mails() map[string][]store.Mail {
	e.t.Helper()
	var all []store.Mail
	if err := storetest.DB(e.t, e.s).Select(&all, `SELECT message_id, run_id, kind, user_id, recipient, subject, body, state,
        attempts, next_at, leased_until, last_error, created_at, sent_at FROM mails ORDER BY created_at, message_id`); err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]store.Mail{}
	for _, m := range all {
		out[m.Kind] = append(out[m.Kind], m)
	}
	return out
}

// wantMail checks a ledger row against the email the page's own view
// words for the same viewer.
func wantMail(t *testing.T, got store.Mail, kind string, root uuid.UUID, to *store.User, want views.Email) {
	t.Helper()
	if id := outbound.MessageID(kind, root, to.ID, publicURL); got.MessageID != id {
		t.Errorf("Message-ID = %q, want %q", got.MessageID, id)
	}
	if got.RunID != root || got.Recipient != to.Email || got.UserID.Int64 != to.ID {
		t.Errorf("mail about %s to %s (user %d), want about %s to %s (user %d)", got.RunID, got.Recipient, got.UserID.Int64, root, to.Email, to.ID)
	}
	if got.Subject != want.Subject {
		t.Errorf("subject = %q, want %q", got.Subject, want.Subject)
	}
	if got.Body != want.Body {
		t.Errorf("body =\n%s\nwant\n%s", got.Body, want.Body)
	}
}

// TestMailPlan_OneEndedEmailPerRun: a run of one order that ends sends its
// owner one email, in the words its page shows them.
func TestMailPlan_OneEndedEmailPerRun(t *testing.T) {
	t.Parallel()
	e := newPlanEnv(t, 1<<40)
	run := e.start(500)
	e.waitState(run.ID, store.StateCompleted)
	e.fanOut()
	e.fanOut()

	mails := e.mails()
	if len(mails[store.MailEnded]) != 1 || len(mails[store.MailWaiting]) != 0 {
		t.Fatalf("ledger: %d ended, %d waiting; want 1, 0", len(mails[store.MailEnded]), len(mails[store.MailWaiting]))
	}
	// The page's view, as the run page reads it for its owner.
	snap, err := e.s.SnapshotPage(context.Background(), run.ID, views.NarrationShown)
	if err != nil {
		t.Fatal(err)
	}
	v := views.NewRunView(snap, true, views.Viewer{UserID: e.customer.ID, MayCancel: true, MayAskAgain: true})
	wantMail(t, mails[store.MailEnded][0], store.MailEnded, run.ID, e.customer, views.EndedEmail(v, publicURL+"/runs/"+run.ID.String()))
	if w := v.Words(); w.Outcome != "Refunded €5.00." || w.Answer == "" {
		t.Errorf("the page says %q, %q: want the refund and its final answer", w.Outcome, w.Answer)
	}
	e.verify()
}

// TestMailPlan_OneEndedEmailPerFamily: a request of several orders sends
// one email once its last refund has ended, none per refund.
func TestMailPlan_OneEndedEmailPerFamily(t *testing.T) {
	t.Parallel()
	e := newPlanEnv(t, 1<<40)
	fam := e.family(3, 400)
	e.waitState(fam.Parent.ID, store.StateCompleted)
	e.fanOut()

	mails := e.mails()
	if len(mails[store.MailEnded]) != 1 {
		t.Fatalf("ledger holds %d ended emails for one request of 3 orders, want 1: %+v", len(mails[store.MailEnded]), mails[store.MailEnded])
	}
	fs, err := e.s.SnapshotFamily(context.Background(), fam.Parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	f := views.NewFamilyView(fs, true, views.Viewer{UserID: e.customer.ID, MayCancel: true})
	wantMail(t, mails[store.MailEnded][0], store.MailEnded, fam.Parent.ID, e.customer, views.RequestEndedEmail(f, publicURL+"/runs/"+fam.Parent.ID.String()))
	if got, want := f.Words().Outcome, "Refunded €12.00 of €12.00: three orders refunded."; got != want {
		t.Errorf("the request's page says %q, want %q", got, want)
	}
	e.verify()
}

// TestMailPlan_OneWaitingEmailPerApproverAndRequest: a request whose
// refunds each ask for a decision sends each approver one email, and a run
// of one order one more; their ends one email each to the customer.
func TestMailPlan_OneWaitingEmailPerApproverAndRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPlanEnv(t, 0)
	fam := e.family(2, 400)
	single := e.start(500)
	for _, id := range []uuid.UUID{fam.Children[0].ID, fam.Children[1].ID, single.ID} {
		e.waitState(id, store.StateAwaitingApproval)
	}
	e.fanOut()

	waiting := e.mails()[store.MailWaiting]
	if len(waiting) != 4 {
		t.Fatalf("ledger holds %d waiting emails, want 4 (2 approvers × 2 requests): %+v", len(waiting), waiting)
	}
	byKey := map[string]store.Mail{}
	for _, m := range waiting {
		byKey[m.RunID.String()+" "+m.Recipient] = m
	}
	for _, a := range e.approvers {
		viewer := views.Viewer{UserID: a.ID, Staff: true, MayApprove: true, MayCancel: true}
		fs, err := e.s.SnapshotFamily(ctx, fam.Parent.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantMail(t, byKey[fam.Parent.ID.String()+" "+a.Email], store.MailWaiting, fam.Parent.ID, a,
			views.RequestWaitingEmail(views.NewFamilyView(fs, true, viewer), publicURL+"/runs/"+fam.Parent.ID.String()))
		snap, err := e.s.SnapshotPage(ctx, single.ID, views.NarrationShown)
		if err != nil {
			t.Fatal(err)
		}
		wantMail(t, byKey[single.ID.String()+" "+a.Email], store.MailWaiting, single.ID, a,
			views.WaitingEmail(views.NewRunView(snap, true, viewer), publicURL+"/runs/"+single.ID.String()))
	}

	for _, id := range []uuid.UUID{fam.Children[0].ID, fam.Children[1].ID, single.ID} {
		if _, err := e.s.Approve(ctx, id, e.approvers[0].ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	e.waitState(fam.Parent.ID, store.StateCompleted)
	e.waitState(single.ID, store.StateCompleted)
	e.fanOut()
	mails := e.mails()
	if len(mails[store.MailWaiting]) != 4 || len(mails[store.MailEnded]) != 2 {
		t.Errorf("ledger after the ends: %d waiting, %d ended; want 4, 2", len(mails[store.MailWaiting]), len(mails[store.MailEnded]))
	}
	e.verify()
}

// TestMailPlan_DecidedBeforeFanOut: a request decided before its wait was
// fanned out still sends each approver their one email (verify counts on
// it), telling the request as it stands, never as waiting; its end is told
// to the customer.
func TestMailPlan_DecidedBeforeFanOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPlanEnv(t, 0)
	run := e.start(500)
	e.waitState(run.ID, store.StateAwaitingApproval)
	if _, err := e.s.RequestCancelBecause(ctx, run.ID, e.approvers[1].ID, "not this one"); err != nil {
		t.Fatal(err)
	}
	e.waitState(run.ID, store.StateCanceled)
	e.fanOut()

	mails := e.mails()
	if len(mails[store.MailWaiting]) != 2 || len(mails[store.MailEnded]) != 1 {
		t.Fatalf("ledger: %d waiting, %d ended; want 2, 1", len(mails[store.MailWaiting]), len(mails[store.MailEnded]))
	}
	snap, err := e.s.SnapshotPage(ctx, run.ID, views.NarrationShown)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range e.approvers {
		m := mails[store.MailWaiting][i]
		if m.Recipient != a.Email {
			for _, other := range mails[store.MailWaiting] {
				if other.Recipient == a.Email {
					m = other
				}
			}
		}
		v := views.NewRunView(snap, true, views.Viewer{UserID: a.ID, Staff: true, MayApprove: true, MayCancel: true})
		wantMail(t, m, store.MailWaiting, run.ID, a, views.WaitingEmail(v, publicURL+"/runs/"+run.ID.String()))
		if contains(m.Subject+m.Body, "waits for your decision") || !contains(m.Body, "Canceled") {
			t.Errorf("the waiting email of a canceled request says it waits, or not that it was canceled:\n%s\n%s", m.Subject, m.Body)
		}
	}
	body := mails[store.MailEnded][0].Body
	for _, want := range []string{"Canceled by an approver.", "Reason given: “not this one”"} {
		if !contains(body, want) {
			t.Errorf("ended email lacks %q:\n%s", want, body)
		}
	}
	e.verify()
}
