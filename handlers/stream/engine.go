// Package stream is refundd's one stream engine: every server-sent stream
// (a run's log, several runs' logs on one connection, a family's logs as
// one stream with one cursor (family.go), the approval queue, a customer's
// run list) is served here, with one rule for each of what
// they share: resume by cursor or reset, caps and refusals, heartbeats,
// the slow-client cut, access re-checks, shutdown.
//
// A stream follows one of two kinds of thing:
//
//   - a run's log (log.go): replayed strictly after the cursor from the
//     store, then handed over live by the run's shared tail (tail.go); a
//     cursor that cannot resume gets event: reset with a snapshot;
//   - a state (state.go), such as the approval queue: its cursor is a
//     version; the same version resumes, any other gets the whole state
//     (reset), and each change is one message with its new version as id.
//
// What a stream is about is an adapter's business (handlers/): which run
// or state, who may see it, and the fragments it sends (RunView,
// StateView). One connection (conn.go) carries one or more streams, with
// one goroutine that, once the start is sent, owns the connection detached
// from the HTTP server (writer.go).
package stream

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
)

// Engine is the process's streams: their registry (caps, re-checks,
// shutdown) and the runs' shared tails.
type Engine struct {
	cfg      Config
	store    *store.Store
	listener *store.Listener // nil: every stream polls
	log      *slog.Logger
	reg      *registry
	tails    *tails
}

// New builds the engine. recheck re-decides, in one batch, the access of
// the runs' streams (each Sub's Cred and Access) and wakes (Sub.Recheck)
// those whose access the database now says otherwise.
func New(cfg Config, st *store.Store, l *store.Listener, log *slog.Logger, recheck func(context.Context, []*Sub)) *Engine {
	cfg.Fill()
	e := &Engine{cfg: cfg, store: st, listener: l, log: log}
	e.reg = newRegistry(&e.cfg, recheck)
	e.tails = newTails(e.reg.ctx, st, l, &e.cfg, log)
	return e
}

// Config is the engine's settings, defaults filled.
func (e *Engine) Config() *Config { return &e.cfg }

// Close refuses new streams and ends the open ones over the Drain window,
// each at a random moment, after telling it to reconnect (event: restart
// with a fresh retry hint), so their clients come back spread out, here
// or elsewhere. It returns once all have ended. Safe to call twice.
func (e *Engine) Close() { e.reg.Close() }

// Answer answers a stream request with one event and ends the stream: the
// close event for a viewer who may not follow, or a refusal's busy event.
// retry (when not zero) is the SSE hint the browser reconnects after.
func (e *Engine) Answer(c echo.Context, retry time.Duration, event string, data []byte) error {
	w, err := beginStream(c, &e.cfg)
	if err != nil {
		return err
	}
	if retry > 0 {
		w.retry(retry)
	}
	w.message(event, -1, data)
	return w.flush()
}

// Reason says why a stream ends for good. It is also the error a stream's
// adapter returns to end it.
type Reason int

// The reasons a stream ends. All but Restarting end it for good (event:
// close); Restarting tells the client to reconnect (event: restart).
const (
	Finished Reason = iota
	Denied
	SignedOut
	Restarting
)

func (r Reason) String() string {
	switch r {
	case Denied:
		return "denied"
	case SignedOut:
		return "signed_out"
	case Restarting:
		return "restarting"
	}
	return "finished"
}

func (r Reason) Error() string { return "stream: closes: " + r.String() }

// logEnd notes why a stream ended, when it is worth a line.
func (e *Engine) logEnd(what string, err error) {
	switch {
	case errors.Is(err, errSlowReader):
		// Cut for not reading (counted where the cut was decided).
		e.log.Info("stream closed: subscriber too slow", "stream", what)
	case err == nil, errors.Is(err, errShuttingDown), errors.Is(err, errClientGone), errors.Is(err, context.Canceled):
	default:
		// Mostly clients gone mid-write; they reconnect and replay.
		e.log.Info("stream ended", "stream", what, "err", err)
	}
}
