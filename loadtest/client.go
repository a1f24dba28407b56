package main

// The load test's HTTP side: a signed-in client of refundd's JSON API and
// the SSE reader its watchers use. Everything goes over HTTP, as any
// program of a customer's would.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"time"
)

// newTransport allows as many connections to one host as there are
// streams: every open stream holds one.
func newTransport() *http.Transport {
	return &http.Transport{
		MaxIdleConns:        1000,
		MaxIdleConnsPerHost: 1000,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
}

// apiClient is one signed-in user of refundd: a session (login) or a
// bearer token.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

func newAPIClient(base string, transport *http.Transport) *apiClient {
	jar, _ := cookiejar.New(nil)
	return &apiClient{base: strings.TrimRight(base, "/"), http: &http.Client{Transport: transport, Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// login signs in through the login form; success is a 303 to /.
func (c *apiClient) login(ctx context.Context, email, password string) error {
	form := url.Values{"email": {email}, "password": {password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("log in as %s: %w", email, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return fmt.Errorf("log in as %s: refundd answered %s, want 303 (wrong email or password?)", email, resp.Status)
	}
	return nil
}

func (c *apiClient) request(ctx context.Context, method, path string, body any, header http.Header) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// do sends a JSON request and decodes a 2xx answer into out; any other
// status is an error carrying refundd's message.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any, header http.Header) (int, error) {
	req, err := c.request(ctx, method, path, body, header)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			return resp.StatusCode, fmt.Errorf("%s %s: %s: %s (%s)", method, path, resp.Status, e.Error.Message, e.Error.Code)
		}
		return resp.StatusCode, fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: unreadable answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

type order struct {
	ID         int64  `json:"id"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
	Refundable int64  `json:"refundable"`
}

func (c *apiClient) orders(ctx context.Context) ([]order, error) {
	var out []order
	_, err := c.do(ctx, http.MethodGet, "/api/orders", nil, &out, nil)
	return out, err
}

type runJSON struct {
	ID         string     `json:"id"`
	State      string     `json:"state"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// startRun is POST /api/runs with a fresh idempotency key.
func (c *apiClient) startRun(ctx context.Context, key string, orderID, amount int64) (runJSON, error) {
	var out runJSON
	body := map[string]any{"order_id": orderID, "amount": amount, "reason": "load test"}
	_, err := c.do(ctx, http.MethodPost, "/api/runs", body, &out, http.Header{"Idempotency-Key": {key}})
	return out, err
}

// page is an HTML page's body; any status but 200 is an error.
func (c *apiClient) page(ctx context.Context, path string) (string, error) {
	req, err := c.request(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), err
}

func (c *apiClient) run(ctx context.Context, id string) (runJSON, error) {
	var out struct {
		Run runJSON `json:"run"`
	}
	_, err := c.do(ctx, http.MethodGet, "/api/runs/"+id, nil, &out, nil)
	return out.Run, err
}

// terminal says whether a run state is one of the three final ones.
func terminal(state string) bool {
	return state == "completed" || state == "failed" || state == "canceled"
}

// openStream opens an SSE stream at path and returns its body once the
// server answered 200 with text/event-stream.
func (c *apiClient) openStream(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := c.request(ctx, http.MethodGet, path, nil, http.Header{"Accept": {"text/event-stream"}})
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s %s: %s", path, resp.Status, resp.Header.Get("Content-Type"), bytes.TrimSpace(b))
	}
	return resp.Body, nil
}

// sseMessage is one message of an event stream. retry is its "retry:"
// field (the reconnection time in ms), as sent.
type sseMessage struct {
	event, id, retry string
	data             []byte
}

// readSSE calls fn for each message of r until r ends or fn returns false.
// A message that carries only an id or a retry hint is passed on too: an
// EventSource takes both from it.
func readSSE(r io.Reader, fn func(sseMessage) bool) error {
	br := bufio.NewReaderSize(r, 16*1024)
	var m sseMessage
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long data line: gather it whole.
			rest, err2 := br.ReadBytes('\n')
			line, err = append(append([]byte(nil), line...), rest...), err2
		}
		if err != nil {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if m.data != nil || m.event != "" || m.id != "" || m.retry != "" {
				if !fn(m) {
					return nil
				}
			}
			m = sseMessage{}
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				m.event = string(value)
			case "id":
				m.id = string(value)
			case "retry":
				m.retry = string(value)
			case "data":
				if m.data != nil {
					m.data = append(m.data, '\n')
				}
				m.data = append(m.data, value...)
			}
		}
	}
}
