package handlers

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

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
