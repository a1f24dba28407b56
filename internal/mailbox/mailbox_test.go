package mailbox_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/refundd/refundd/internal/mailbox"
)

// send delivers one raw mail to addr over SMTP.
func send(t *testing.T, addr, to, raw string) error {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.SendMail("refundd@localhost", []string{to}, strings.NewReader(raw))
}

const quotedPrintable = "From: refundd <refundd@localhost>\r\n" +
	"To: c@example.com\r\n" +
	"Subject: =?UTF-8?q?Your_refund_of_=E2=82=AC5.00_<b>?=\r\n" +
	"Message-ID: <ended.1.2@refundd>\r\n" +
	"Date: Fri, 04 Dec 2026 02:00:00 +0000\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: text/plain; charset=UTF-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"Refunded =E2=82=AC5.00. <script>alert(1)</script>\r\n"

func TestMailbox_KeepsAndShowsMail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mb, err := mailbox.Start(context.Background(), "127.0.0.1:0", dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := send(t, mb.Addr(), "c@example.com", quotedPrintable); err != nil {
		t.Fatal(err)
	}
	mb.Close()
	mb.Close() // twice is safe

	t.Run("survives a restart", func(t *testing.T) {
		again, err := mailbox.Start(context.Background(), "127.0.0.1:0", dir)
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		msgs, err := again.Messages()
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 {
			t.Fatalf("got %d messages, want 1", len(msgs))
		}
		m := msgs[0]
		if m.MessageID != "<ended.1.2@refundd>" || m.Subject != "Your refund of €5.00 <b>" || m.To != "c@example.com" {
			t.Errorf("got id %q subject %q to %q", m.MessageID, m.Subject, m.To)
		}
		if want := "Refunded €5.00. <script>alert(1)</script>\r\n"; m.Text != want {
			t.Errorf("text = %q, want %q", m.Text, want)
		}
	})
	t.Run("page escapes the text", func(t *testing.T) {
		again, err := mailbox.Start(context.Background(), "127.0.0.1:0", dir)
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		elsewhere := httptest.NewRecorder()
		again.Handler().ServeHTTP(elsewhere, httptest.NewRequest("GET", "http://rebound.example.com/", nil))
		if elsewhere.Code != http.StatusMisdirectedRequest || strings.Contains(elsewhere.Body.String(), "ended.1.2") {
			t.Errorf("a request to another name = %d %q, want 421 and no mail", elsewhere.Code, elsewhere.Body.String())
		}
		rec := httptest.NewRecorder()
		again.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:8025/", nil))
		body, _ := io.ReadAll(rec.Body)
		page := string(body)
		if strings.Contains(page, "<script>") || strings.Contains(page, "<b>") {
			t.Errorf("the page shows the mail's text as HTML:\n%s", page)
		}
		for _, want := range []string{"&lt;ended.1.2@refundd&gt;", "Refunded €5.00.", "c@example.com", "4 Dec 2026, 02:00:00 UTC"} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %q:\n%s", want, page)
			}
		}
	})
}

func TestMailbox_RefusesWhenTold(t *testing.T) {
	t.Parallel()
	mb, err := mailbox.Start(context.Background(), "127.0.0.1:0", t.TempDir(), mailbox.RefuseRecipients(func(string) error {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	err = send(t, mb.Addr(), "nobody@example.com", quotedPrintable)
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code != 550 {
		t.Fatalf("send = %v, want a 550 refusal", err)
	}
	if msgs, _ := mb.Messages(); len(msgs) != 0 {
		t.Errorf("kept %d refused mails, want 0", len(msgs))
	}
}

func TestMailbox_LoopbackOnly(t *testing.T) {
	t.Parallel()
	if mb, err := mailbox.Start(context.Background(), "0.0.0.0:0", t.TempDir()); err == nil {
		mb.Close()
		t.Fatal("listening on every interface: want an error")
	}
}

func TestMailbox_StopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	mb, err := mailbox.Start(ctx, "127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	mb.Close() // returns once the server has stopped
	if err := send(t, mb.Addr(), "c@example.com", quotedPrintable); err == nil {
		t.Fatal("sent to a stopped mailbox")
	}
}
