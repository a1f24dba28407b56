package main

import (
	"context"
	"database/sql"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/mailbox"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// TestCrash_WorkerKilledBetweenMailAcceptAndRecord: 50 requests end (10
// of them after an approver's decision) while a real worker process sends
// their emails to a real SMTP server; the worker is killed with SIGKILL
// after the server kept a mail and before it answered, so the worker
// never recorded it. A second worker finishes the work. Each customer gets
// one email per request and the approver one per waiting request, by
// Message-ID: the one the dead worker sent is sent again under the same
// Message-ID, never as a second, different email.
func TestCrash_WorkerKilledBetweenMailAcceptAndRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.MustOpen(t)
	var worker atomic.Pointer[process]
	var kept atomic.Int64
	mb, err := mailbox.Start(ctx, "127.0.0.1:0", t.TempDir(), mailbox.AfterKeeping(func() {
		if kept.Add(1) == 12 {
			// The server kept it and has not answered: the crash.
			p := worker.Load()
			p.cmd.Process.Kill()
			<-p.done
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	providerAddr := freeAddr(t)
	env := []string{"DATABASE_URL=" + st.URL(), "PROVIDER_ADDR=" + providerAddr, "PROVIDER_URL=http://" + providerAddr,
		"WORKER_LEASE=2s", "MAIL_LEASE=2s", "PROVIDER_SECRET=" + testProviderSecret, "SMTP_URL=" + mb.URL(),
		"APPROVAL_THRESHOLD=5000", "NARRATION_PACE=0", "PUBLIC_URL=http://refundd.test"}
	spawn(t, env, "simulated payment provider running", "provider")

	who := storetest.MustSeedParties(t, st, 1_000_000)
	var runs, waiting []uuid.UUID
	for i := range 50 {
		amount := int64(100)
		if i%5 == 0 {
			amount = 6000 // an approver decides
		}
		r, _, err := st.StartRun(ctx, store.StartRequest{OwnerID: who.Customer.ID, ClientRequestID: "mail-crash-" + uuid.NewString(),
			OrderID: who.Order.ID, Amount: amount, Reason: "arrived broken"})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r.ID)
		if amount >= 5000 {
			waiting = append(waiting, r.ID)
		}
	}
	worker.Store(spawn(t, env, "worker running", "worker"))
	approveAsTheyWait(t, st, who.Approver.ID, waiting, func() bool { return kept.Load() >= 12 })
	spawn(t, env, "worker running", "worker")
	approveAsTheyWait(t, st, who.Approver.ID, waiting, func() bool { return allEnded(t, st, runs) })
	testkit.WaitUntil(t, "every email sent", time.Minute, func() bool {
		return countMails(t, st, "state <> 'sent'") == 0 && countMails(t, st, "true") == len(runs)+len(waiting)
	})

	wantOneEmailPerMessageID(t, st, mb, len(runs), len(waiting))
	wantVerifyClean(t, env)
}

// approveAsTheyWait approves each of the runs once it waits for a
// decision, until done (a minute at most).
func approveAsTheyWait(t *testing.T, st *store.Store, approver int64, runs []uuid.UUID, done func() bool) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(time.Minute); !done(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("gave up waiting a minute")
		}
		for _, id := range runs {
			r, err := st.RunByID(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.State == store.StateAwaitingApproval {
				if _, err := st.Approve(ctx, id, approver, ""); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func allEnded(t *testing.T, st *store.Store, runs []uuid.UUID) bool {
	t.Helper()
	for _, id := range runs {
		r, err := st.RunByID(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !store.Terminal(r.State) {
			return false
		}
	}
	return true
}

func countMails(t *testing.T, st *store.Store, where string) int {
	t.Helper()
	var n int
	if err := storetest.DB(t, st).Get(&n, `SELECT count(*) FROM mails WHERE `+where); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantOneEmailPerMessageID: the ledger holds one ended email per request
// and one waiting email per waiting request, all sent; the server received
// exactly the ledger's Message-IDs, and one of them twice (the crash's).
func wantOneEmailPerMessageID(t *testing.T, st *store.Store, mb *mailbox.Mailbox, ended, waiting int) {
	t.Helper()
	if n := countMails(t, st, "kind = 'ended'"); n != ended {
		t.Errorf("%d ended emails in the ledger, want one per request: %d", n, ended)
	}
	if n := countMails(t, st, "kind = 'waiting'"); n != waiting {
		t.Errorf("%d waiting emails in the ledger, want one per waiting request: %d", n, waiting)
	}
	var ledger []string
	if err := storetest.DB(t, st).Select(&ledger, `SELECT message_id FROM mails ORDER BY message_id`); err != nil {
		t.Fatal(err)
	}
	msgs, err := mb.Messages()
	if err != nil {
		t.Fatal(err)
	}
	copies := map[string]int{}
	for _, m := range msgs {
		copies[m.MessageID]++
	}
	var received []string
	twice := 0
	for id, n := range copies {
		received = append(received, id)
		if n > 1 {
			twice++
		}
	}
	slices.Sort(received)
	if !slices.Equal(received, ledger) {
		t.Errorf("the server received Message-IDs %v, want the ledger's %v", received, ledger)
		logMissingMails(t, st, mb, ledger, copies)
	}
	if twice == 0 {
		t.Errorf("no email was received twice: the kill did not land between the server's accept and the record (%d received)", len(msgs))
	}
}

// logMissingMails says, of each mail the ledger holds and the server did
// not receive, what the ledger recorded of its tries, and lists the
// server's folder: what the next look at such a failure starts from.
func logMissingMails(t *testing.T, st *store.Store, mb *mailbox.Mailbox, ledger []string, copies map[string]int) {
	t.Helper()
	for _, id := range ledger {
		if copies[id] > 0 {
			continue
		}
		var row struct {
			State     string         `db:"state"`
			Attempts  int            `db:"attempts"`
			LastError sql.NullString `db:"last_error"`
			SentAt    sql.NullTime   `db:"sent_at"`
			Created   time.Time      `db:"created_at"`
		}
		err := storetest.DB(t, st).Get(&row, `SELECT state, attempts, last_error, sent_at, created_at FROM mails WHERE message_id = $1`, id)
		t.Logf("not received: %s: %+v (%v)", id, row, err)
	}
	entries, err := os.ReadDir(mb.Dir())
	t.Logf("the server's folder: %d entries (%v)", len(entries), err)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".eml") {
			t.Logf("  %s", e.Name())
		}
	}
}
