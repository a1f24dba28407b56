package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// newMail is a ledger row about run to user u.
func newMail(run uuid.UUID, kind string, u *store.User) store.NewMail {
	return store.NewMail{MessageID: "<" + kind + "." + run.String() + "@test>", RunID: run, Kind: kind,
		UserID: u.ID, Recipient: u.Email, Subject: "s", Body: "b"}
}

func TestMails_RecordedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.MustOpen(t)
	who := storetest.MustSeedParties(t, s, 1000)
	run := uuid.New()
	m := newMail(run, store.MailEnded, who.Customer)
	other := m
	other.MessageID = "<another@test>" // same run, kind and recipient
	for _, mails := range [][]store.NewMail{{m}, {m, other}} {
		if err := s.RecordMails(ctx, mails); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.MailsOfRun(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	// The run is not in runs: MailsOfRun finds nothing for it; read the
	// ledger directly.
	if len(got) != 0 {
		t.Errorf("MailsOfRun of a run that does not exist = %d mails, want 0", len(got))
	}
	var n int
	if err := storetest.DB(t, s).Get(&n, `SELECT count(*) FROM mails WHERE run_id = $1`, run); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("ledger holds %d mails for one ending, want 1", n)
	}
}

func TestMails_ClaimLeaseAndComplete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.MustOpen(t)
	who := storetest.MustSeedParties(t, s, 1000)
	run, _, err := s.StartRun(ctx, store.StartRequest{OwnerID: who.Customer.ID, ClientRequestID: "k",
		OrderID: who.Order.ID, Amount: 500, Reason: "broken"})
	if err != nil {
		t.Fatal(err)
	}
	sent, retried, refused := newMail(run.ID, store.MailEnded, who.Customer), newMail(run.ID, store.MailWaiting, who.Approver), newMail(run.ID, store.MailWaiting, who.Customer)
	refused.MessageID = "<refused@test>"
	if err := s.RecordMails(ctx, []store.NewMail{sent, retried, refused}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.ClaimMails(ctx, time.Minute, 10)
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim = %d mails, %v; want 3", len(claimed), err)
	}
	for _, m := range claimed {
		if m.Attempts != 1 || !m.LeasedUntil.Valid || m.State != store.MailPending {
			t.Errorf("claimed %s: attempts %d, leased %v, state %s; want 1, true, pending", m.MessageID, m.Attempts, m.LeasedUntil.Valid, m.State)
		}
	}
	t.Run("a leased mail is not claimed again", func(t *testing.T) {
		if again, err := s.ClaimMails(ctx, time.Minute, 10); err != nil || len(again) != 0 {
			t.Fatalf("claim under lease = %d mails, %v; want 0", len(again), err)
		}
	})
	if err := s.MailSent(ctx, sent.MessageID); err != nil {
		t.Fatal(err)
	}
	if err := s.MailRetry(ctx, retried.MessageID, time.Now().Add(-time.Second), "421 busy"); err != nil {
		t.Fatal(err)
	}
	if err := s.MailFailed(ctx, refused.MessageID, "550 no such mailbox"); err != nil {
		t.Fatal(err)
	}
	t.Run("a completed mail stays completed", func(t *testing.T) {
		if err := s.MailRetry(ctx, sent.MessageID, time.Now(), "late"); err != nil {
			t.Fatal(err)
		}
		if err := s.MailSent(ctx, "<nothing@test>"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("MailSent of no mail = %v, want ErrNotFound", err)
		}
	})
	t.Run("only the retried mail is due again", func(t *testing.T) {
		again, err := s.ClaimMails(ctx, time.Minute, 10)
		if err != nil || len(again) != 1 || again[0].MessageID != retried.MessageID || again[0].Attempts != 2 {
			t.Fatalf("claim = %+v, %v; want %s on its second attempt", again, err, retried.MessageID)
		}
	})
	t.Run("the request's ledger", func(t *testing.T) {
		got, err := s.MailsOfRun(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		states := map[string]string{}
		for _, m := range got {
			states[m.MessageID] = m.State + " " + m.LastError.String
		}
		want := map[string]string{sent.MessageID: "sent ", retried.MessageID: "pending 421 busy", refused.MessageID: "failed 550 no such mailbox"}
		for id, w := range want {
			if states[id] != w {
				t.Errorf("%s = %q, want %q", id, states[id], w)
			}
		}
	})
}

func TestMails_LeaseRunsOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.MustOpen(t)
	who := storetest.MustSeedParties(t, s, 1000)
	m := newMail(uuid.New(), store.MailEnded, who.Customer)
	if err := s.RecordMails(ctx, []store.NewMail{m}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ClaimMails(ctx, 50*time.Millisecond, 1); err != nil || len(got) != 1 {
		t.Fatalf("claim = %d, %v", len(got), err)
	}
	// A sender that died: its lease runs out and the mail is due again.
	var got []store.Mail
	testkit.WaitUntil(t, "the mail to be due again after its lease ran out", 10*time.Second, func() bool {
		var err error
		if got, err = s.ClaimMails(ctx, time.Minute, 1); err != nil {
			t.Fatal(err)
		}
		return len(got) == 1
	})
	if got[0].Attempts != 2 || got[0].MessageID != m.MessageID {
		t.Errorf("reclaimed %s on attempt %d, want %s on 2", got[0].MessageID, got[0].Attempts, m.MessageID)
	}
}

func TestMails_ApproversAndFamilyLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.MustOpen(t)
	who := storetest.MustSeedParties(t, s, 1000)
	gone, err := s.CreateUser(ctx, "gone@example.com", "G", store.RoleApprover, "pw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storetest.DB(t, s).Exec(`UPDATE users SET disabled_at = now() WHERE id = $1`, gone.ID); err != nil {
		t.Fatal(err)
	}
	approvers, err := s.Approvers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(approvers) != 1 || approvers[0].Email != who.Approver.Email {
		t.Errorf("approvers = %+v, want only %s (not the disabled one)", approvers, who.Approver.Email)
	}
	o2, err := s.CreateOrder(ctx, who.Customer.ID, "Hat", 300, "EUR")
	if err != nil {
		t.Fatal(err)
	}
	fam, _, err := s.StartFamily(ctx, store.FamilyRequest{OwnerID: who.Customer.ID, ClientRequestID: "f", Reason: "both",
		Refunds: []store.RefundItem{{OrderID: who.Order.ID, Amount: 100}, {OrderID: o2.ID, Amount: 200}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordMails(ctx, []store.NewMail{newMail(fam.Parent.ID, store.MailWaiting, who.Approver)}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uuid.UUID{fam.Parent.ID, fam.Children[0].ID, fam.Children[1].ID} {
		got, err := s.MailsOfRun(ctx, id)
		if err != nil || len(got) != 1 {
			t.Errorf("MailsOfRun(%s) = %d mails, %v; want the request's 1", id, len(got), err)
		}
	}
}
