package outbound

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	netmail "net/mail"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	mail "github.com/wneessen/go-mail"

	"github.com/refundd/refundd/store"
)

// Mailer sends one email of the mail ledger, as it is recorded there (its
// Message-ID, recipient, subject and body). An error wrapping a
// *PermanentError means the server refused it for good; any other error
// may pass.
type Mailer interface {
	Send(ctx context.Context, m store.Mail) error
}

// PermanentError is a refusal that sending again cannot change: the SMTP
// server answered 5xx to the mail's recipient or content, or the
// recipient is not an address.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// IsPermanent reports whether err is a PermanentError.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// SMTPConfig is a parsed SMTP_URL. Password is never logged: String
// shows the URL without it.
type SMTPConfig struct {
	Host     string
	Port     int
	Username string
	Password string
	// ImplicitTLS: smtps://, TLS from the first byte.
	ImplicitTLS bool
	// RequireTLS: smtp:// to anything but a loopback address must
	// STARTTLS, or nothing is sent; to a loopback address TLS is used
	// when the server offers it.
	RequireTLS bool
	redacted   string
}

// String is the URL, password redacted, for the start log.
func (c SMTPConfig) String() string { return c.redacted }

// ParseSMTPURL reads SMTP_URL: smtp://[user[:pass]@]host[:port] (port
// 587, STARTTLS, required except to a loopback address) or
// smtps://[user[:pass]@]host[:port] (port 465, implicit TLS).
func ParseSMTPURL(raw string) (SMTPConfig, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url's error quotes the URL, password and all.
		return SMTPConfig{}, errors.New("SMTP_URL is not a URL")
	}
	c := SMTPConfig{redacted: u.Redacted()}
	switch u.Scheme {
	case "smtp":
		c.Port = 587
	case "smtps":
		c.Port, c.ImplicitTLS = 465, true
	default:
		return SMTPConfig{}, fmt.Errorf("SMTP_URL %s: the scheme must be smtp:// (STARTTLS) or smtps:// (implicit TLS)", c.redacted)
	}
	if c.Host = u.Hostname(); c.Host == "" {
		return SMTPConfig{}, fmt.Errorf("SMTP_URL %s: no host", c.redacted)
	}
	if p := u.Port(); p != "" {
		if c.Port, err = strconv.Atoi(p); err != nil || c.Port < 1 || c.Port > 65535 {
			return SMTPConfig{}, fmt.Errorf("SMTP_URL %s: bad port %q", c.redacted, p)
		}
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return SMTPConfig{}, fmt.Errorf("SMTP_URL %s: only scheme, user, password, host and port are read", c.redacted)
	}
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	c.RequireTLS = !c.ImplicitTLS && !loopbackHost(c.Host)
	return c, nil
}

// loopbackHost reports whether host names this machine without DNS:
// "localhost" or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// SMTPMailer sends the ledger's mails over SMTP, one connection per mail.
type SMTPMailer struct {
	cfg  SMTPConfig
	from string
	// Timeout bounds one send, connection included.
	Timeout time.Duration
}

var _ Mailer = (*SMTPMailer)(nil)

// NewSMTPMailer is a Mailer to SMTP_URL raw, sending from MAIL_FROM from
// (an address, with or without a name).
func NewSMTPMailer(raw, from string) (*SMTPMailer, error) {
	cfg, err := ParseSMTPURL(raw)
	if err != nil {
		return nil, err
	}
	if _, err := netmail.ParseAddress(from); err != nil {
		return nil, fmt.Errorf("MAIL_FROM %q is not an email address: %w", from, err)
	}
	return &SMTPMailer{cfg: cfg, from: from, Timeout: 30 * time.Second}, nil
}

// Config is the mailer's SMTP_URL, parsed (String hides the password).
func (s *SMTPMailer) Config() SMTPConfig { return s.cfg }

// Send sends m with the ledger's Message-ID, so a mail sent again after a
// crash is the same email to the recipient's client. Emails are in their
// recipient's language: the body is UTF-8 (Content-Type text/plain;
// charset=UTF-8, quoted-printable), and a subject that is not plain ASCII
// ("已退款", "€5.00") goes out RFC 2047-encoded (=?UTF-8?q?…?=, folded),
// as go-mail writes every header it is given as text.
func (s *SMTPMailer) Send(ctx context.Context, m store.Mail) error {
	msg := mail.NewMsg(mail.WithCharset(mail.CharsetUTF8), mail.WithEncoding(mail.EncodingQP))
	if err := msg.From(s.from); err != nil {
		return fmt.Errorf("mail from: %w", err)
	}
	if err := msg.To(m.Recipient); err != nil {
		return &PermanentError{Err: fmt.Errorf("mail to: %w", err)}
	}
	msg.Subject(m.Subject)
	msg.SetMessageIDWithValue(strings.TrimSuffix(strings.TrimPrefix(m.MessageID, "<"), ">"))
	msg.SetDate()
	msg.SetBodyString(mail.TypeTextPlain, m.Body)
	host := s.cfg.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // go-mail joins host and port with a colon
	}
	client, err := mail.NewClient(host, s.options()...)
	if err != nil {
		return fmt.Errorf("smtp client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(s.Timeout, 30*time.Second))
	defer cancel()
	return classify(client.DialAndSendWithContext(ctx, msg))
}

// options are go-mail's settings for the configured server.
func (s *SMTPMailer) options() []mail.Option {
	opts := []mail.Option{mail.WithPort(s.cfg.Port), mail.WithTimeout(cmp.Or(s.Timeout, 30*time.Second)),
		mail.WithTLSConfig(&tls.Config{ServerName: s.cfg.Host, MinVersion: tls.VersionTLS12})}
	switch {
	case s.cfg.ImplicitTLS:
		opts = append(opts, mail.WithSSL())
	case s.cfg.RequireTLS:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	default:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic))
	}
	if s.cfg.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover),
			mail.WithUsername(s.cfg.Username), mail.WithPassword(s.cfg.Password))
	}
	return opts
}

// classify marks the server's refusals of the mail itself (a 5xx answer
// to its recipient or its content) as permanent. Anything else
// (connecting, TLS, authentication, the sender MAIL_FROM names) is the
// server's or the configuration's state, the same for every mail, and is
// tried again: a misconfiguration must not fail every mail for good.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var se *mail.SendError
	if errors.As(err, &se) {
		switch se.Reason {
		case mail.ErrGetRcpts:
			return &PermanentError{Err: err}
		case mail.ErrSMTPRcptTo, mail.ErrSMTPData, mail.ErrSMTPDataClose, mail.ErrWriteContent:
			if c := se.ErrorCode(); c >= 500 && c < 600 {
				return &PermanentError{Err: err}
			}
		}
	}
	return err
}

// MailSink sends the mail ledger's pending mails: it claims those due
// under a lease, sends each, then records it sent, due again after a
// backoff, or refused for good. The row was written before (at fan-out)
// and is completed only after the server answered, so a sender that dies
// in between leaves it to be sent again, with the same Message-ID, once
// its lease runs out.
type MailSink struct {
	Store   *store.Store
	Mailer  Mailer
	Logger  *slog.Logger
	Workers int           // mails sent at once; default 4
	Lease   time.Duration // how long a claimed mail is this sender's; default 2 min
	// Backoff is the pause before each next try after a failure that may
	// pass; past its end the last pause repeats. Default 10 s, 1 min,
	// 5 min, 30 min, 2 h.
	Backoff []time.Duration
	Poll    time.Duration // how often to look for due mails; default 1 s
}

// DefaultMailBackoff is MailSink's Backoff unless set.
var DefaultMailBackoff = []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour}

// Run sends due mails until ctx ends.
func (s *MailSink) Run(ctx context.Context) {
	workers := cmp.Or(s.Workers, 4)
	poll := cmp.Or(s.Poll, time.Second)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A full batch: more may be due, so look again at once.
		if s.round(ctx, workers) == workers {
			t.Reset(0)
		} else {
			t.Reset(poll)
		}
	}
}

// round claims up to workers due mails and sends them side by side,
// returning how many it claimed.
func (s *MailSink) round(ctx context.Context, workers int) int {
	mails, err := s.Store.ClaimMails(ctx, cmp.Or(s.Lease, 2*time.Minute), workers)
	if err != nil {
		if ctx.Err() == nil {
			s.logger().Error("mail: claim", "err", err)
		}
		return 0
	}
	var wg sync.WaitGroup
	for _, m := range mails {
		wg.Go(func() { s.deliver(ctx, m) })
	}
	wg.Wait()
	return len(mails)
}

// deliver sends one claimed mail and records what came of it. The record
// outlives a shutdown that began during the send: a mail the server
// accepted is recorded sent.
func (s *MailSink) deliver(ctx context.Context, m store.Mail) {
	err := s.Mailer.Send(ctx, m)
	rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	log := s.logger().With("message_id", m.MessageID, "kind", m.Kind, "attempt", m.Attempts)
	var rerr error
	switch {
	case err == nil:
		rerr = s.Store.MailSent(rec, m.MessageID)
		log.Info("mail sent")
	case IsPermanent(err):
		rerr = s.Store.MailFailed(rec, m.MessageID, errText(err))
		log.Warn("mail refused for good", "err", errText(err))
	default:
		at := time.Now().Add(s.backoff(m.Attempts))
		rerr = s.Store.MailRetry(rec, m.MessageID, at, errText(err))
		log.Warn("mail not sent, will retry", "err", errText(err), "next_at", at)
	}
	if rerr != nil {
		// The lease runs out and the mail is sent again, as after a crash.
		log.Error("mail: record", "err", rerr)
	}
}

// backoff is the pause after the attempt-th failed try (1-based).
func (s *MailSink) backoff(attempt int) time.Duration {
	b := s.Backoff
	if len(b) == 0 {
		b = DefaultMailBackoff
	}
	return b[min(max(attempt, 1), len(b))-1]
}

func (s *MailSink) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// errText is an error as the ledger keeps it: bounded, for support's page.
func errText(err error) string {
	const most = 500
	t := err.Error()
	if len(t) > most {
		t = strings.ToValidUTF8(t[:most], "") + "…"
	}
	return t
}
