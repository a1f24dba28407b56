package outbound_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/mailbox"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// sinkEnv is a database with one mail in its ledger, and where to send it.
type sinkEnv struct {
	t    *testing.T
	s    *store.Store
	mail store.NewMail
}

func newSinkEnv(t *testing.T) *sinkEnv {
	t.Helper()
	s := storetest.MustOpen(t)
	who := storetest.MustSeedParties(t, s, 1000)
	root := uuid.New()
	m := store.NewMail{MessageID: outbound.MessageID(store.MailEnded, root, who.Customer.ID, publicURL), RunID: root,
		Kind: store.MailEnded, UserID: who.Customer.ID, Recipient: who.Customer.Email,
		Subject: "Your refund of €5.00 for order #7: Refunded",
		Body: "Refunded €5.00.\n\nRefunded €5.00 to the original payment method. The payment provider's reference is re_1 — " +
			strings.Repeat("a long line that a mail server would fold ", 4) + "\n\nSee it: " + publicURL + "/runs/" + root.String() + "\n"}
	if err := s.RecordMails(context.Background(), []store.NewMail{m}); err != nil {
		t.Fatal(err)
	}
	return &sinkEnv{t: t, s: s, mail: m}
}

// mailer sends to addr from refundd@localhost.
func (e *sinkEnv) mailer(addr string) *outbound.SMTPMailer {
	e.t.Helper()
	m, err := outbound.NewSMTPMailer("smtp://"+addr, "refundd <refundd@localhost>")
	if err != nil {
		e.t.Fatal(err)
	}
	m.Timeout = 5 * time.Second
	return m
}

// runSink runs a sink with test-speed settings until the test ends.
func (e *sinkEnv) runSink(m outbound.Mailer) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	sink := &outbound.MailSink{Store: e.s, Mailer: m, Logger: testkit.Logger(e.t, 0), Workers: 2,
		Backoff: []time.Duration{50 * time.Millisecond}, Poll: 10 * time.Millisecond}
	go func() {
		defer close(done)
		sink.Run(ctx)
	}()
	e.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// ledger is the mail's row now.
func (e *sinkEnv) ledger() store.Mail {
	e.t.Helper()
	var m store.Mail
	if err := storetest.DB(e.t, e.s).Get(&m, `SELECT message_id, run_id, kind, user_id, recipient, subject, body, state,
        attempts, next_at, leased_until, last_error, created_at, sent_at FROM mails WHERE message_id = $1`, e.mail.MessageID); err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *sinkEnv) waitState(state string) store.Mail {
	e.t.Helper()
	var m store.Mail
	testkit.WaitUntil(e.t, "the mail to be "+state, 20*time.Second, func() bool {
		m = e.ledger()
		return m.State == state
	})
	return m
}

func startMailbox(t *testing.T, addr, dir string, opts ...mailbox.Option) *mailbox.Mailbox {
	t.Helper()
	mb, err := mailbox.Start(context.Background(), addr, dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mb.Close)
	return mb
}

// received is what the mailbox holds, failing unless it is n mails.
func received(t *testing.T, mb *mailbox.Mailbox, n int) []mailbox.Message {
	t.Helper()
	msgs, err := mb.Messages()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != n {
		t.Fatalf("mailbox holds %d mails, want %d: %+v", len(msgs), n, msgs)
	}
	return msgs
}

// wantReceived checks a received mail against the ledger's.
func wantReceived(t *testing.T, got mailbox.Message, want store.NewMail) {
	t.Helper()
	if got.MessageID != want.MessageID || got.Subject != want.Subject || !strings.Contains(got.To, want.Recipient) {
		t.Errorf("received %q %q to %q, want %q %q to %q", got.MessageID, got.Subject, got.To, want.MessageID, want.Subject, want.Recipient)
	}
	if body := strings.ReplaceAll(got.Text, "\r\n", "\n"); body != want.Body {
		t.Errorf("received body\n%q\nwant\n%q", body, want.Body)
	}
}

func TestMailSink_SendsThroughARealServer(t *testing.T) {
	t.Parallel()
	e := newSinkEnv(t)
	mb := startMailbox(t, "127.0.0.1:0", t.TempDir())
	e.runSink(e.mailer(mb.Addr()))
	m := e.waitState(store.MailSentOK)
	if m.Attempts != 1 || !m.SentAt.Valid {
		t.Errorf("ledger: attempts %d, sent at %v; want 1, set", m.Attempts, m.SentAt)
	}
	wantReceived(t, received(t, mb, 1)[0], e.mail)
}

func TestSMTPMailer_IPv6Loopback(t *testing.T) {
	t.Parallel()
	mb, err := mailbox.Start(context.Background(), "[::1]:0", t.TempDir())
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	t.Cleanup(mb.Close)
	e := newSinkEnv(t)
	e.runSink(e.mailer(mb.Addr()))
	e.waitState(store.MailSentOK)
	wantReceived(t, received(t, mb, 1)[0], e.mail)
}

func TestMailSink_PermanentRefusalRecorded(t *testing.T) {
	t.Parallel()
	e := newSinkEnv(t)
	mb := startMailbox(t, "127.0.0.1:0", t.TempDir(), mailbox.RefuseRecipients(func(string) error {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
	}))
	e.runSink(e.mailer(mb.Addr()))
	m := e.waitState(store.MailRefused)
	if m.Attempts != 1 || !strings.Contains(m.LastError.String, "550") {
		t.Errorf("ledger: attempts %d, error %q; want 1 attempt and the server's 550", m.Attempts, m.LastError.String)
	}
	received(t, mb, 0)
}

func TestMailSink_TemporaryRefusalRetried(t *testing.T) {
	t.Parallel()
	e := newSinkEnv(t)
	refusals := 2
	mb := startMailbox(t, "127.0.0.1:0", t.TempDir(), mailbox.RefuseRecipients(func(string) error {
		if refusals > 0 { // one sink worker holds the one mail: no race
			refusals--
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}
		}
		return nil
	}))
	e.runSink(e.mailer(mb.Addr()))
	m := e.waitState(store.MailSentOK)
	if m.Attempts != 3 || !strings.Contains(m.LastError.String, "451") {
		t.Errorf("ledger: attempts %d, last error %q; want 3 and the 451", m.Attempts, m.LastError.String)
	}
	wantReceived(t, received(t, mb, 1)[0], e.mail)
}

func TestMailSink_ServerDownThenUp(t *testing.T) {
	t.Parallel()
	e := newSinkEnv(t)
	// A port nobody listens on, until the mailbox does.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e.runSink(e.mailer(addr))
	testkit.WaitUntil(t, "two failed tries", 20*time.Second, func() bool {
		m := e.ledger()
		return m.Attempts >= 2 && m.State == store.MailPending && m.LastError.Valid && !m.LeasedUntil.Valid
	})
	mb := startMailbox(t, addr, t.TempDir())
	e.waitState(store.MailSentOK)
	wantReceived(t, received(t, mb, 1)[0], e.mail)
}

// TestMailSink_LeaseRunsOutAfterUnrecordedSend: a sender that died after
// the server accepted a mail and before it recorded it leaves the mail
// pending; once its lease runs out the mail is sent again, with the same
// Message-ID: two copies of one email, never two emails.
func TestMailSink_LeaseRunsOutAfterUnrecordedSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newSinkEnv(t)
	mb := startMailbox(t, "127.0.0.1:0", t.TempDir())
	mailer := e.mailer(mb.Addr())
	claimed, err := e.s.ClaimMails(ctx, 200*time.Millisecond, 1)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim = %d, %v", len(claimed), err)
	}
	if err := mailer.Send(ctx, claimed[0]); err != nil {
		t.Fatal(err)
	}
	// The sender dies here. Another one runs.
	e.runSink(mailer)
	m := e.waitState(store.MailSentOK)
	if m.Attempts != 2 {
		t.Errorf("attempts = %d, want 2", m.Attempts)
	}
	msgs := received(t, mb, 2)
	for _, got := range msgs {
		wantReceived(t, got, e.mail)
	}
}

func TestParseSMTPURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw                   string
		host                  string
		port                  int
		implicitTLS, starttls bool
	}{
		{"smtp://user:secret@mail.example.com", "mail.example.com", 587, false, true},
		{"smtp://mail.example.com:2525", "mail.example.com", 2525, false, true},
		{"smtp://10.0.0.5:25", "10.0.0.5", 25, false, true},
		{"smtps://user:secret@mail.example.com", "mail.example.com", 465, true, false},
		{"smtp://127.0.0.1:1025", "127.0.0.1", 1025, false, false},
		{"smtp://localhost:1025", "localhost", 1025, false, false},
		{"smtp://[::1]:1025", "::1", 1025, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			c, err := outbound.ParseSMTPURL(tt.raw)
			if err != nil {
				t.Fatal(err)
			}
			if c.Host != tt.host || c.Port != tt.port || c.ImplicitTLS != tt.implicitTLS || c.RequireTLS != tt.starttls {
				t.Errorf("got %+v, want host %s port %d implicit TLS %v STARTTLS required %v", c, tt.host, tt.port, tt.implicitTLS, tt.starttls)
			}
			if strings.Contains(c.String(), "secret") {
				t.Errorf("String() = %q shows the password", c.String())
			}
		})
	}
	for _, raw := range []string{"http://u:secret@mail.example.com", "smtp://u:secret@", "smtp://u:secret@host:99999", "smtp://u:secret@host/path", "::"} {
		t.Run("refused "+raw, func(t *testing.T) {
			_, err := outbound.ParseSMTPURL(raw)
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestNewSMTPMailer_BadFrom(t *testing.T) {
	t.Parallel()
	if _, err := outbound.NewSMTPMailer("smtp://127.0.0.1:25", "not an address"); err == nil {
		t.Fatal("MAIL_FROM that is not an address: no error")
	}
}
