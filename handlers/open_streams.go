package handlers

import (
	"context"
	"errors"
	"sync"
)

// errShuttingDown is the cause a stream ends with when the server stops.
var errShuttingDown = errors.New("handlers: server shutting down")

// openStreams tracks the open streams so shutdown can end them: Close ends
// them all at once (graceful shutdown registers it) and refuses new ones.
// Without it, e.Shutdown would wait for every stream until its deadline.
type openStreams struct {
	ctx  context.Context // done once Close is called
	stop context.CancelCauseFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func newOpenStreams() *openStreams {
	ctx, stop := context.WithCancelCause(context.Background())
	return &openStreams{ctx: ctx, stop: stop}
}

// begin registers a stream; false once closed. A true begin needs an end.
func (o *openStreams) begin() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.wg.Add(1)
	return true
}

func (o *openStreams) end() { o.wg.Done() }

// endOnShutdown cancels a stream with errShuttingDown when Close is
// called; the function it returns stops watching.
func (o *openStreams) endOnShutdown(cancel context.CancelCauseFunc) (stop func() bool) {
	return context.AfterFunc(o.ctx, func() { cancel(context.Cause(o.ctx)) })
}

// Close ends every open stream now and waits until their handlers have
// returned. Safe to call twice.
func (o *openStreams) Close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.stop(errShuttingDown)
	o.wg.Wait()
}
