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
	"strconv"
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
			// The handler has returned: its buffer is written out and free.
			err := buf.copyTo(c.Response())
			buf.release()
			if err != nil {
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
	body   *bytes.Buffer // from pages, at the first write (release)
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
	if b.body == nil {
		b.body = pages.Get().(*bytes.Buffer)
	}
	return b.body.Write(p)
}

// bytes is what the handler wrote.
func (b *bufferedResponse) bytes() []byte {
	if b.body == nil {
		return nil
	}
	return b.body.Bytes()
}

// release gives the body's buffer back, once nothing writes to it or
// reads it any more.
func (b *bufferedResponse) release() {
	if b.body != nil {
		putPage(b.body)
		b.body = nil
	}
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
	_, err := res.Write(b.bytes())
	return err
}

// streamDeadline bounds a stream's opening by cfg.RequestTimeout: a stream
// whose user, run or start cannot be read in time (a stalled PostgreSQL)
// gets the 503 and Retry-After every other request gets, instead of
// hanging without headers. The stream itself is not bounded: once its
// handler begins the response, it is the handler's for as long as the
// client watches.
//
// Unlike deadline, the handler runs in the request's own goroutine, with
// echo's own context: opening streams is the busy path of a restart's
// reconnect wave, where a goroutine, an echo context and a request copy per
// open are work to spare. Its writes go through a gate instead; if
// the deadline passes first, a timer answers on the connection, whole
// (Content-Length, Connection: close), so the client has its 503 while the
// handler is still stuck, and the handler, when it comes back, finds its
// response gone.
//
// The request's context gets no deadline: it is what tells an open stream
// that its client went away.
func (h *Handler) streamDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		o := h.beginOpening(c)
		defer func() { err = o.end(c, err) }()
		return next(c)
	}
}

// opening is one stream's open under streamDeadline: the gate, the timer
// and what the timer answers with, in one struct. Its setup and end are
// functions of their own, so that their frames are not on the stack while
// the handler runs (see logRequest).
type opening struct {
	gate     gatedResponse
	w        http.ResponseWriter // the response's own writer
	req      http.Request        // the timer's own copy: the session store writes its own into *req
	path     string
	answered chan struct{}
	timer    *time.Timer
}

func (h *Handler) beginOpening(c echo.Context) *opening {
	res := c.Response()
	o := &opening{w: res.Writer, req: *c.Request(), path: c.Path(), answered: make(chan struct{})}
	o.gate = gatedResponse{w: o.w, header: res.Header().Clone()}
	e := c.Echo()
	o.timer = time.AfterFunc(h.cfg.RequestTimeout, func() {
		defer close(o.answered)
		if o.gate.expire() {
			h.answerLate(e, &o.req, o.path, o.w)
		}
	})
	res.Writer = &o.gate
	return o
}

// end gives the response its own writer back, and says what became of it.
func (o *opening) end(c echo.Context, err error) error {
	res := c.Response()
	res.Writer = o.w
	if !o.timer.Stop() {
		<-o.answered
	}
	status, state := o.gate.decided()
	switch {
	case state == gateExpired:
		// Answered by the timer, which logged why; what the handler met
		// since is its own.
		res.Status, res.Committed, err = http.StatusServiceUnavailable, true, nil
	case state == gateHandler && !res.Committed:
		// Hijacked without a header written through echo: the error
		// handler must not answer on top of it.
		res.Status, res.Committed = status, true
	case state == gateUndecided:
		// The error's answer carries what the handler set.
		maps.Copy(o.w.Header(), o.gate.header)
	}
	return err
}

// answerLate answers 503 for a stream whose handler is stuck past the
// deadline, from a context of its own (the handler still has echo's).
func (h *Handler) answerLate(e *echo.Echo, req *http.Request, path string, w http.ResponseWriter) {
	buf := &bufferedResponse{header: w.Header()}
	ec := e.NewContext(req, buf)
	ec.SetPath(path)
	h.handleError(fmt.Errorf("stream not opened within %s: %w", h.cfg.RequestTimeout, context.DeadlineExceeded), ec)
	if buf.status == 0 {
		return
	}
	w.Header().Set(echo.HeaderContentLength, strconv.Itoa(len(buf.bytes())))
	w.Header().Set(echo.HeaderConnection, "close")
	w.WriteHeader(buf.status)
	// A client gone by now has nobody to tell.
	if _, err := w.Write(buf.bytes()); err == nil {
		_ = http.NewResponseController(w).Flush()
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
	state  int // gateUndecided, gateHandler or gateExpired
	status int
}

const (
	gateUndecided = iota
	gateHandler
	gateExpired
)

// claim gives the response to the handler, unless the deadline has it.
func (g *gatedResponse) claim(status int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == gateUndecided {
		g.state, g.status = gateHandler, status
		maps.Copy(g.w.Header(), g.header)
	}
	return g.state == gateHandler
}

// expire gives the response to the deadline, unless the handler has it.
func (g *gatedResponse) expire() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == gateUndecided {
		g.state = gateExpired
	}
	return g.state == gateExpired
}

// decided says who has the response: gateUndecided (nobody yet),
// gateHandler (with the status it began) or gateExpired.
func (g *gatedResponse) decided() (status, state int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.status, g.state
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
