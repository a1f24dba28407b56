package handlers

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/refundd/refundd/internal/metrics"
)

// pinger writes the heartbeat of every detached stream (sse.go) from one
// goroutine: an idle stream's heartbeat is one write, and no goroutine of
// the stream's wakes for it (its loop waits only for events, re-checks,
// and the client going). It ticks a quarter of the heartbeat, so a stream
// hears something between one and one and a quarter heartbeats after its
// last write. The goroutine runs while any detached stream is open.
type pinger struct {
	ctx   context.Context // ends the goroutine at shutdown
	every time.Duration

	mu      sync.Mutex
	streams map[*sseWriter]context.CancelCauseFunc
	idle    chan struct{} // closed when the last stream leaves
}

// pingTimeout bounds a heartbeat's write: an idle stream's socket buffer
// full means its client stopped reading long ago, and one stuck write
// must not hold up every other stream's heartbeat.
const pingTimeout = 100 * time.Millisecond

func newPinger(ctx context.Context, every time.Duration) *pinger {
	return &pinger{ctx: ctx, every: every, streams: map[*sseWriter]context.CancelCauseFunc{}}
}

// add pings w until remove; a client that does not take the heartbeat
// ends the stream through cancel.
func (p *pinger) add(w *sseWriter, cancel context.CancelCauseFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.streams[w] = cancel
	if len(p.streams) == 1 {
		p.idle = make(chan struct{})
		go p.loop(p.idle)
	}
}

func (p *pinger) remove(w *sseWriter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.streams[w]; !ok {
		return
	}
	delete(p.streams, w)
	if len(p.streams) == 0 {
		close(p.idle)
	}
}

func (p *pinger) loop(idle <-chan struct{}) {
	t := time.NewTicker(max(p.every/4, time.Millisecond))
	defer t.Stop()
	var due []*sseWriter
	var cancels []context.CancelCauseFunc
	for {
		select {
		case <-idle:
			return
		case <-p.ctx.Done():
			return
		case now := <-t.C:
			due, cancels = due[:0], cancels[:0]
			p.mu.Lock()
			for w, cancel := range p.streams {
				if now.UnixNano()-w.lastWrite.Load() >= int64(p.every) {
					due, cancels = append(due, w), append(cancels, cancel)
				}
			}
			p.mu.Unlock()
			for i, w := range due {
				if err := w.ping(now, p.every, pingTimeout); err != nil {
					cause := errClientGone
					if errors.Is(err, os.ErrDeadlineExceeded) {
						metrics.StreamSlowCuts.Inc()
						cause = errSlowReader
					}
					cancels[i](cause)
				}
			}
		}
	}
}
