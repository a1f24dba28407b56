package handlers

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// deadline bounds a request by cfg.RequestTimeout: its context gets that
// deadline, and a handler that has not answered by then is not waited for;
// the client gets 503 at once. A deadline on the context alone is not
// enough: lib/pq gives up a query only when the server answers its cancel
// request, so a stalled PostgreSQL would hold the request for as long as it
// stalls. The handler runs in a goroutine of its own, with a context and a
// buffered response of its own (echo reuses a request's context once the
// request is answered); a late handler's response is dropped.
//
// Why not the standard ones: http.TimeoutHandler answers with one fixed
// body and status for every route (a page needs HTML and the API its JSON
// error with a code, both with Retry-After), and it does not hand the
// handler echo's context, so the user and session that earlier middleware
// put there would be lost. echo's middleware.ContextTimeout only sets the
// context's deadline, which (see above) a stalled PostgreSQL ignores; its
// middleware.Timeout is deprecated by echo for racing on the response.
//
// Streams are not bounded: they live as long as their client watches.
func (h *Handler) deadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), h.cfg.RequestTimeout)
		defer cancel()
		buf := &bufferedResponse{header: c.Response().Header().Clone()}
		inner := c.Echo().NewContext(c.Request().WithContext(ctx), buf)
		inner.SetPath(c.Path())
		inner.SetParamNames(c.ParamNames()...)
		inner.SetParamValues(c.ParamValues()...)

		type result struct {
			err      error
			panicked any
		}
		done := make(chan result, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- result{panicked: p}
				}
			}()
			done <- result{err: next(inner)}
		}()

		select {
		case r := <-done:
			if r.panicked != nil {
				// Re-raised here, where middleware.Recover can catch it.
				panic(r.panicked)
			}
			// The user is what the log line and an error page show.
			if u := inner.Get(ctxUser); u != nil {
				c.Set(ctxUser, u)
			}
			if err := buf.copyTo(c.Response()); err != nil {
				return err
			}
			if r.err != nil && ctx.Err() == context.DeadlineExceeded {
				// The store's error may be the server's "canceling
				// statement": what happened is the deadline.
				return fmt.Errorf("request deadline passed: %w: %w", context.DeadlineExceeded, r.err)
			}
			return r.err
		case <-ctx.Done():
			return fmt.Errorf("no answer within %s: %w", h.cfg.RequestTimeout, context.Cause(ctx))
		}
	}
}

// bufferedResponse holds a bounded handler's response until it is known to
// be in time.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// copyTo sends the held response: its headers always (a handler that
// returns an error may have set a cookie), its status and body if it wrote
// any.
func (b *bufferedResponse) copyTo(res *echo.Response) error {
	hdr := res.Header()
	clear(hdr)
	for k, v := range b.header {
		hdr[k] = v
	}
	if b.status == 0 {
		return nil
	}
	res.WriteHeader(b.status)
	_, err := res.Write(b.body.Bytes())
	return err
}

// streamDeadline bounds a stream's opening by cfg.RequestTimeout: a stream
// whose user, run or start cannot be read in time (a stalled PostgreSQL)
// gets the 503 and Retry-After every other request gets, instead of
// hanging without headers. The stream itself is not bounded: once its
// handler begins the response, it is the handler's for as long as the
// client watches. As in deadline, the handler runs in a goroutine of its
// own with a context of its own, and a late one finds its response gone.
//
// The request's context gets no deadline: it is what tells an open stream
// that its client went away.
func (h *Handler) streamDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		res := c.Response()
		gate := &gatedResponse{w: res.Writer, header: res.Header().Clone()}
		// A copy of the request: the session store writes its own into it.
		req := c.Request()
		inner := c.Echo().NewContext(req.WithContext(req.Context()), gate)
		inner.SetPath(c.Path())
		inner.SetParamNames(c.ParamNames()...)
		inner.SetParamValues(c.ParamValues()...)
		type result struct {
			err      error
			panicked any
		}
		done := make(chan result, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- result{panicked: p}
				}
			}()
			done <- result{err: next(inner)}
		}()
		timer := time.NewTimer(h.cfg.RequestTimeout)
		defer timer.Stop()
		var r result
		select {
		case r = <-done:
		case <-timer.C:
			if gate.expire() {
				return fmt.Errorf("stream not opened within %s: %w", h.cfg.RequestTimeout, context.DeadlineExceeded)
			}
			// The stream began in time; it is its handler's now.
			r = <-done
		}
		if r.panicked != nil {
			panic(r.panicked)
		}
		if u := inner.Get(ctxUser); u != nil {
			c.Set(ctxUser, u)
		}
		if status, begun := gate.begun(); begun {
			// The error handler must not answer on top of it.
			res.Status, res.Committed = status, true
		} else {
			maps.Copy(res.Header(), gate.header)
		}
		return r.err
	}
}

// errStreamTimedOut is what a stream's handler gets when it writes after
// streamDeadline answered for it.
var errStreamTimedOut = errors.New("stream: answered 503 before it opened")

// gatedResponse is a stream handler's response writer under
// streamDeadline: the first to act, the handler (by writing) or the
// deadline (expire), owns the response, and the other is refused.
type gatedResponse struct {
	w      http.ResponseWriter
	header http.Header // the handler's own until it begins
	mu     sync.Mutex
	state  int // 0: undecided, gateHandler or gateExpired
	status int
}

const (
	gateHandler = 1
	gateExpired = 2
)

// claim gives the response to the handler, unless the deadline has it.
func (g *gatedResponse) claim(status int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == 0 {
		g.state, g.status = gateHandler, status
		maps.Copy(g.w.Header(), g.header)
	}
	return g.state == gateHandler
}

// expire gives the response to the deadline, unless the handler has it.
func (g *gatedResponse) expire() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == 0 {
		g.state = gateExpired
	}
	return g.state == gateExpired
}

func (g *gatedResponse) begun() (int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.status, g.state == gateHandler
}

func (g *gatedResponse) Header() http.Header { return g.header }

func (g *gatedResponse) WriteHeader(status int) {
	if g.claim(status) {
		g.w.WriteHeader(status)
	}
}

func (g *gatedResponse) Write(p []byte) (int, error) {
	if !g.claim(http.StatusOK) {
		return 0, errStreamTimedOut
	}
	return g.w.Write(p)
}

// FlushError, Hijack and SetWriteDeadline are what streams use through an
// http.ResponseController.
func (g *gatedResponse) FlushError() error {
	if !g.claim(http.StatusOK) {
		return errStreamTimedOut
	}
	return http.NewResponseController(g.w).Flush()
}

func (g *gatedResponse) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if !g.claim(http.StatusOK) {
		return nil, nil, errStreamTimedOut
	}
	return http.NewResponseController(g.w).Hijack()
}

func (g *gatedResponse) SetWriteDeadline(t time.Time) error {
	if !g.claim(http.StatusOK) {
		return errStreamTimedOut
	}
	return http.NewResponseController(g.w).SetWriteDeadline(t)
}
