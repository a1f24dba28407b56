// Package mailbox is a real SMTP server on loopback that accepts every
// mail and keeps it as an .eml file, with a page that shows what it
// received: `refundd dev` runs one so a newcomer sees the emails refundd
// sends, and tests send to one.
package mailbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// MaxMessageBytes is the largest mail the server takes.
const MaxMessageBytes = 1 << 20

// Mailbox is a running SMTP server and the directory it keeps mails in.
type Mailbox struct {
	dir    string
	srv    *smtp.Server
	ln     net.Listener
	done   chan struct{}
	once   sync.Once
	refuse func(rcpt string) error
	kept   func()
}

// Option changes how a Mailbox answers.
type Option func(*Mailbox)

// RefuseRecipients makes the server answer RCPT TO with what refuse
// returns for the recipient (nil accepts it): a test's way to have mails
// refused, for good (*smtp.SMTPError, code 5xx) or for now (4xx).
func RefuseRecipients(refuse func(rcpt string) error) Option {
	return func(m *Mailbox) { m.refuse = refuse }
}

// AfterKeeping calls kept after each mail is kept, before the server
// answers that it accepted it: a test's way to cut a sender between the
// server's accept and the sender's record of it.
func AfterKeeping(kept func()) Option {
	return func(m *Mailbox) { m.kept = kept }
}

// Start listens on addr, which must be a loopback address ("127.0.0.1:0":
// any free port), and keeps every mail it receives under dir (made if
// missing), where they outlive a restart. It serves until ctx ends or
// Close.
func Start(ctx context.Context, addr, dir string, opts ...Option) (*Mailbox, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("mailbox: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("mailbox: address %q: only a loopback address is served", addr)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mailbox: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mailbox: %w", err)
	}
	m := &Mailbox{dir: dir, ln: ln, done: make(chan struct{})}
	for _, o := range opts {
		o(m)
	}
	m.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{m: m}, nil }))
	m.srv.Domain = "localhost"
	m.srv.MaxMessageBytes = MaxMessageBytes
	m.srv.MaxRecipients = 50
	m.srv.ReadTimeout, m.srv.WriteTimeout = time.Minute, time.Minute
	m.srv.ErrorLog = discard{}
	go func() {
		defer close(m.done)
		m.srv.Serve(ln)
	}()
	go func() {
		select {
		case <-ctx.Done():
			m.Close()
		case <-m.done:
		}
	}()
	return m, nil
}

// Addr is where the server listens: host:port.
func (m *Mailbox) Addr() string { return m.ln.Addr().String() }

// URL is the SMTP_URL that sends to this server.
func (m *Mailbox) URL() string { return "smtp://" + m.Addr() }

// Dir is where the mails are kept.
func (m *Mailbox) Dir() string { return m.dir }

// Close stops the server and waits for it; safe to call twice. The mails
// stay in Dir.
func (m *Mailbox) Close() {
	m.once.Do(func() {
		// The listener too: a Close right after Start may come before
		// Serve has taken it up, and the server's Close would miss it.
		m.ln.Close()
		m.srv.Close()
	})
	<-m.done
}

// store keeps one received mail as dir/<nanoseconds>-<random>.eml, written
// whole under another name first, so a listing never reads half a mail.
func (m *Mailbox) store(r io.Reader) error {
	name := strconv.FormatInt(time.Now().UnixNano(), 10) + "-" + rand.Text()[:8] + ".eml"
	tmp, err := os.CreateTemp(m.dir, ".receiving-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(m.dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// session is one SMTP conversation: every sender, every recipient (unless
// refused), every mail.
type session struct{ m *Mailbox }

func (s *session) Reset()        {}
func (s *session) Logout() error { return nil }

func (s *session) Mail(string, *smtp.MailOptions) error { return nil }

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.m.refuse != nil {
		return s.m.refuse(to)
	}
	return nil
}

func (s *session) Data(r io.Reader) error {
	if err := s.m.store(r); err != nil {
		if errors.Is(err, smtp.ErrDataTooLarge) {
			return err
		}
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "could not keep the mail"}
	}
	if s.m.kept != nil {
		s.m.kept()
	}
	return nil
}

// discard drops the server's log: a dev tool's connection errors are noise.
type discard struct{}

func (discard) Printf(string, ...any) {}
func (discard) Println(...any)        {}
