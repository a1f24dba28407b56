package outbound

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/refundd/refundd/store"
)

// maxResponse bounds what is read of a receiver's answer: it is only read
// so the connection can be reused, never kept.
const maxResponse = 64 << 10

// userAgent names refundd's deliveries to their receivers.
const userAgent = "refundd-webhooks"

// maxErrorLen bounds the words of a failure kept for the admin.
const maxErrorLen = 500

// Payload is the body of a delivery: the event exactly as the API streams
// it, with its type and commit time beside it for receivers that route
// before they decode (Standard Webhooks' envelope).
type Payload struct {
	Type      string      `json:"type"`
	Timestamp string      `json:"timestamp"` // RFC 3339, the event's commit time
	Data      store.Event `json:"data"`
}

// newClient is the deliveries' HTTP client: every connection through the
// policy's dialer (the address checked after DNS, at connect time), no
// proxy, no redirect followed (a 3xx is the receiver's answer, a failure),
// and each attempt bounded by timeout, the answer's body included.
func newClient(p Policy, timeout time.Duration, perEndpoint int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           p.Dialer(timeout),
			ForceAttemptHTTP2:     true,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
			MaxIdleConnsPerHost:   perEndpoint,
			MaxConnsPerHost:       perEndpoint,
			IdleConnTimeout:       90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       timeout,
	}
}

// attempt is what one POST came to.
type attempt struct {
	status     int
	err        error // nil: a 2xx
	refused    bool  // the policy refused the address
	retryAfter time.Duration
	hasAfter   bool // the answer carried a Retry-After
	took       time.Duration
}

// post sends one delivery, signed with every secret it carries. The
// webhook-id is the event's ID, the same on every retry, so a receiver
// dedupes by it; the timestamp is this attempt's. Nothing secret is ever
// put in an error.
func post(ctx context.Context, client *http.Client, d store.Delivery, now time.Time) attempt {
	body, err := json.Marshal(Payload{Type: d.Event.Type, Timestamp: d.Event.CreatedAt.UTC().Format(time.RFC3339Nano), Data: d.Event})
	if err != nil {
		return attempt{err: fmt.Errorf("encode the event: %w", err)}
	}
	id := d.Event.EventID.String()
	sig, err := Sign(d.Secrets, id, now, body)
	if err != nil {
		return attempt{err: errors.New("the endpoint's secret cannot sign")}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return attempt{err: errors.New("the endpoint's URL is not one a request can be sent to")}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return attempt{err: transportError(err, client.Timeout), refused: errors.Is(err, ErrRefusedURL), took: time.Since(start)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	resp.Body.Close()
	a := attempt{status: resp.StatusCode, took: time.Since(start)}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return a
	}
	a.retryAfter, a.hasAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	a.err = fmt.Errorf("the endpoint answered %s", statusWords(resp.StatusCode))
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		a.err = fmt.Errorf("the endpoint answered %s, a redirect, which is not followed", statusWords(resp.StatusCode))
	}
	return a
}

func statusWords(code int) string {
	return strings.TrimSpace(strconv.Itoa(code) + " " + http.StatusText(code))
}

// transportError words a failure to get an answer, without the URL that
// url.Error repeats (the admin sees it beside).
func transportError(err error, timeout time.Duration) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("no answer within %s", timeout)
		}
		err = ue.Err
	}
	return err
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, int64(365*24*time.Hour/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}

// errorWords is err's text as the admin reads it, bounded.
func errorWords(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > maxErrorLen {
		s = s[:maxErrorLen]
	}
	return strings.ToValidUTF8(s, "")
}
