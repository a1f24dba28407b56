package payments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultTimeout bounds one provider request when the Client is given none.
const DefaultTimeout = 10 * time.Second

// Client talks to a provider that speaks the simulated provider's HTTP API.
type Client struct {
	base    string
	timeout time.Duration
	http    *http.Client
	secret  string // sent as a bearer token; never logged
}

var _ Provider = (*Client)(nil)

// NewClient returns a client for the provider at baseURL (for example
// "http://127.0.0.1:8081"). Every request is bounded by timeout, or by
// DefaultTimeout when timeout is zero or negative.
func NewClient(baseURL string, timeout time.Duration) *Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// Its own transport, so connections (and their failures) are not shared
	// with unrelated HTTP traffic in the process.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &Client{
		base:    strings.TrimRight(baseURL, "/"),
		timeout: timeout,
		http:    &http.Client{Transport: tr},
	}
}

// WithSecret makes the client send the provider's shared secret (see
// Sim.Secret), which its writes and fault switch require, and returns it.
func (c *Client) WithSecret(secret string) *Client {
	c.secret = secret
	return c
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

type refundBody struct {
	OrderRef string `json:"order_ref"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// Refund submits req. On success the receipt may say StatusFailed: the
// provider committed a declined refund, which is a final answer. On error,
// check Uncertain before anything else.
func (c *Client) Refund(ctx context.Context, req RefundRequest) (Receipt, error) {
	if req.Key == "" {
		return Receipt{}, &Error{Kind: ErrInvalid, Op: "refund", Message: "missing idempotency key"}
	}
	body, err := json.Marshal(refundBody{OrderRef: req.OrderRef, Amount: req.Amount, Currency: req.Currency})
	if err != nil {
		return Receipt{}, &Error{Kind: ErrInvalid, Op: "refund", Key: req.Key, Err: err}
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Idempotency-Key", req.Key)
	status, data, err := c.exchange(ctx, "refund", req.Key, http.MethodPost, "/refunds", h, body)
	if err != nil {
		return Receipt{}, err
	}
	rc, err := readReceipt("refund", req.Key, status, data)
	if err != nil {
		return Receipt{}, err
	}
	// A receipt for something else would be a provider bug; we cannot tell
	// what was committed for our key, so reconcile.
	if rc.Amount != req.Amount || rc.Currency != req.Currency {
		return Receipt{}, &Error{Kind: ErrUncertain, Op: "refund", Key: req.Key,
			Message: fmt.Sprintf("receipt does not match the request (key %q, %d %s)", rc.Key, rc.Amount, rc.Currency)}
	}
	return rc, nil
}

// Lookup asks what the provider committed under key. ErrNotFound means
// nothing and nothing in flight; ErrInFlight means ask again later.
func (c *Client) Lookup(ctx context.Context, key string) (Receipt, error) {
	if key == "" {
		return Receipt{}, &Error{Kind: ErrInvalid, Op: "lookup", Message: "missing idempotency key"}
	}
	status, data, err := c.exchange(ctx, "lookup", key, http.MethodGet, "/refunds/"+url.PathEscape(key), nil, nil)
	if err != nil {
		return Receipt{}, err
	}
	return readReceipt("lookup", key, status, data)
}

// Ledger returns every refund the provider committed, oldest first. It is
// for tests, support and `refundd verify`, not for the executor.
func (c *Client) Ledger(ctx context.Context) ([]Receipt, error) {
	var out struct {
		Refunds []Receipt `json:"refunds"`
	}
	if err := c.do(ctx, "ledger", "", http.MethodGet, "/refunds", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Refunds, nil
}

// SetFaults replaces the provider's fault injection settings (simulated
// provider only).
func (c *Client) SetFaults(ctx context.Context, f Faults) error {
	body, err := json.Marshal(f)
	if err != nil {
		return err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return c.do(ctx, "set faults", "", http.MethodPut, "/admin/faults", h, body, nil)
}

// Release lets every response held by HoldAfterCommit go (simulated
// provider only).
func (c *Client) Release(ctx context.Context) error {
	return c.do(ctx, "release", "", http.MethodPost, "/admin/release", nil, nil, nil)
}

func (c *Client) do(ctx context.Context, op, key, method, path string, h http.Header, body []byte, out any) error {
	status, data, err := c.exchange(ctx, op, key, method, path, h, body)
	if err != nil {
		return err
	}
	return answer(op, key, status, data, out)
}

// Answer is what a caller learns about the HTTP answer to one call,
// whatever the call returns: its status, 0 when none was read.
type Answer struct{ Status int }

type answerKey struct{}

// WithAnswer returns a context whose next call through a Client notes its
// answer in the returned *Answer, for a caller that records its calls.
func WithAnswer(ctx context.Context) (context.Context, *Answer) {
	a := &Answer{}
	return context.WithValue(ctx, answerKey{}, a), a
}

// exchange sends one request and reads its answer's status and body. Its
// error is one from before an answer was read.
func (c *Client) exchange(ctx context.Context, op, key, method, path string, h http.Header, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, &Error{Kind: ErrInvalid, Op: op, Key: key, Err: err}
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	if c.secret != "" {
		req.Header.Set("Authorization", "Bearer "+c.secret)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, &Error{Kind: transportKind(err), Op: op, Key: key, Err: err}
	}
	defer resp.Body.Close()
	if a, ok := ctx.Value(answerKey{}).(*Answer); ok {
		a.Status = resp.StatusCode
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		// The status line arrived but the body did not: for a 2xx the
		// refund is committed and its receipt lost.
		return 0, nil, &Error{Kind: ErrUncertain, Op: op, Key: key, Status: resp.StatusCode, Err: err}
	}
	return resp.StatusCode, data, nil
}

// readReceipt reads the provider's answer to a refund or a lookup of key:
// the receipt it committed, or the error the answer means. A 2xx whose
// receipt cannot be read in full (another key, no reference, a status that
// is neither outcome) says something was committed but not what, so it is
// uncertain: recording it as failed would be a guess.
func readReceipt(op, key string, status int, data []byte) (Receipt, error) {
	var rc Receipt
	if err := answer(op, key, status, data, &rc); err != nil {
		return Receipt{}, err
	}
	uncertain := func(format string, args ...any) (Receipt, error) {
		return Receipt{}, &Error{Kind: ErrUncertain, Op: op, Key: key, Status: status, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case rc.Key != key:
		return uncertain("receipt is for key %q", rc.Key)
	case rc.Status != StatusSucceeded && rc.Status != StatusFailed:
		return uncertain("receipt has the status %q", rc.Status)
	case rc.Ref == "":
		return uncertain("receipt has no reference")
	}
	return rc, nil
}

// answer reads the provider's answer to op on key: nil for a 2xx whose
// body decodes into out (when out is not nil), or the *Error it means.
func answer(op, key string, status int, data []byte, out any) error {
	if status/100 == 2 {
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return &Error{Kind: ErrUncertain, Op: op, Key: key, Status: status,
				Err: fmt.Errorf("decode response: %w", err)}
		}
		return nil
	}
	e := &Error{Kind: statusKind(status), Op: op, Key: key, Status: status}
	var eb errorBody
	if json.Unmarshal(data, &eb) == nil {
		e.Code, e.Message = eb.Error.Code, eb.Error.Message
	}
	if e.Kind == ErrNotFound && (op != "lookup" || e.Code != CodeNotFound) {
		// "Never committed" licenses a second submission, so it must come
		// from the provider itself about this key, not from a wrong URL or a
		// proxy's 404 page.
		e.Kind = ErrUncertain
		if op != "lookup" {
			e.Kind = ErrInvalid
		}
	}
	return e
}

// statusKind maps a provider's HTTP status to what it tells us about
// commitment. Only answers that promise nothing was committed are definite;
// a 500, 502 or 504 may come from behind a commit, so it is uncertain.
func statusKind(status int) error {
	switch {
	case status == http.StatusNotFound:
		return ErrNotFound
	case status == http.StatusConflict:
		return ErrInFlight
	case status == http.StatusUnprocessableEntity:
		return ErrMismatch
	case status == http.StatusServiceUnavailable, status == http.StatusTooManyRequests,
		// A 401 or 421: the provider refused us, not the refund (a missing
		// or wrong PROVIDER_SECRET, a wrong Host): nothing was committed,
		// and it is fixed by configuration, within the outage budget.
		status == http.StatusUnauthorized, status == http.StatusMisdirectedRequest:
		return ErrUnavailable
	case status == http.StatusRequestTimeout:
		return ErrUncertain
	case status/100 == 4:
		return ErrInvalid
	default:
		return ErrUncertain
	}
}

// transportKind classifies an error from http.Client.Do. Only a failed dial
// proves the request never left this process; anything later (a timeout, a
// reset, an EOF while waiting for the answer) may follow a commit.
func transportKind(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return ErrUnavailable
	}
	return ErrUncertain
}

// errorBody is the provider's error answer: {"error":{"code","message"}}.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}
