package mailbox

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Message is one received mail as the page shows it.
type Message struct {
	File      string // its .eml file's name in Dir
	Date      time.Time
	From, To  string
	Subject   string
	MessageID string
	Text      string // the text/plain body, decoded
}

// Messages are the mails received, newest first. A file that does not
// parse as a mail is shown by its name, its text the parse error.
func (m *Mailbox) Messages() ([]Message, error) {
	names, err := filepath.Glob(filepath.Join(m.dir, "*.eml"))
	if err != nil {
		return nil, fmt.Errorf("mailbox: %w", err)
	}
	// Names begin with the nanosecond they arrived: newest first.
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(filepath.Base(b), filepath.Base(a)) })
	out := make([]Message, 0, len(names))
	for _, name := range names {
		msg, err := readMessage(name)
		if err != nil {
			msg = Message{File: filepath.Base(name), Text: err.Error()}
		}
		out = append(out, msg)
	}
	return out, nil
}

// readMessage parses one .eml file.
func readMessage(path string) (Message, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Message{}, err
	}
	raw, err := mail.ReadMessage(bytes.NewReader(b))
	if err != nil {
		return Message{}, fmt.Errorf("not a mail: %w", err)
	}
	h := raw.Header
	dec := new(mime.WordDecoder)
	header := func(name string) string {
		v, err := dec.DecodeHeader(h.Get(name))
		if err != nil {
			return h.Get(name)
		}
		return v
	}
	msg := Message{File: filepath.Base(path), From: header("From"), To: header("To"), Subject: header("Subject"),
		MessageID: strings.TrimSpace(h.Get("Message-Id"))}
	msg.Date, _ = h.Date()
	text, err := textBody(h.Get("Content-Type"), h.Get("Content-Transfer-Encoding"), raw.Body)
	if err != nil {
		return msg, fmt.Errorf("body: %w", err)
	}
	msg.Text = text
	return msg, nil
}

// textBody is the text/plain part of a body, decoded: the body itself, or
// the first text/plain part of a multipart one.
func textBody(contentType, encoding string, body io.Reader) (string, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = "text/plain" // no Content-Type: plain text (RFC 2045)
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return "", fmt.Errorf("no text/plain part: %w", err)
			}
			ct := p.Header.Get("Content-Type")
			if ct == "" || strings.HasPrefix(ct, "text/plain") || strings.HasPrefix(ct, "multipart/") {
				return textBody(orPlain(ct), p.Header.Get("Content-Transfer-Encoding"), p)
			}
		}
	}
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	case "base64":
		body = base64.NewDecoder(base64.StdEncoding, &lineless{r: body})
	}
	b, err := io.ReadAll(io.LimitReader(body, MaxMessageBytes))
	return string(b), err
}

// orPlain is a part's content type, text/plain when it names none.
func orPlain(contentType string) string {
	if contentType != "" {
		return contentType
	}
	return "text/plain"
}

// lineless drops the line breaks of a base64 body.
type lineless struct{ r io.Reader }

func (l *lineless) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	k := 0
	for _, c := range p[:n] {
		if c != '\r' && c != '\n' {
			p[k] = c
			k++
		}
	}
	return k, err
}

// Handler shows the mails received, newest first, as a plain page, to a
// request addressed to a loopback name only: a web page elsewhere cannot
// read the mails by pointing a name of its own at 127.0.0.1 (DNS
// rebinding).
func (m *Mailbox) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackName(r.Host) {
			http.Error(w, "the mailbox answers to 127.0.0.1 and localhost only", http.StatusMisdirectedRequest)
			return
		}
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		msgs, err := m.Messages()
		if err != nil {
			http.Error(w, "could not read the mailbox", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := page.Execute(w, msgs); err != nil {
			return // the client went away
		}
	})
}

// loopbackName reports whether a Host header names this machine.
func loopbackName(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

var page = template.Must(template.New("mailbox").Funcs(template.FuncMap{
	"date": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2 Jan 2006, 15:04:05 UTC")
	},
}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Local mail server: what it received</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; }
article { border: 1px solid #ccc; border-radius: 6px; padding: 1rem; margin: 1rem 0; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0 0 1rem; }
dt { font-weight: 600; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: .8rem; margin: 0; }
</style>
</head>
<body>
<h1>Local mail server: what it received</h1>
{{if not .}}<p>No mail yet.</p>{{else}}<p>{{len .}} mail{{if ne (len .) 1}}s{{end}}, newest first.</p>{{end}}
{{range .}}<article>
<h2>{{.Subject}}</h2>
<dl>
<dt>Date</dt><dd>{{date .Date}}</dd>
<dt>From</dt><dd>{{.From}}</dd>
<dt>To</dt><dd>{{.To}}</dd>
<dt>Message-ID</dt><dd><code>{{.MessageID}}</code></dd>
<dt>File</dt><dd><code>{{.File}}</code></dd>
</dl>
<pre>{{.Text}}</pre>
</article>
{{end}}
</body>
</html>
`))
