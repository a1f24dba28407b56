package outbound

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/store"
)

// DefaultSchedule is Standard Webhooks' retry schedule: the waits after
// the first, second, … failed attempt; after the last step the delivery
// is tried again every last step, until the endpoint has failed for
// DisableAfter and is disabled.
var DefaultSchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// Config is the engine's settings; zero values take the defaults.
type Config struct {
	Workers     int           // concurrent deliveries per process (WEBHOOK_WORKERS), default 64
	PerEndpoint int           // deliveries in flight per endpoint per process, default 16
	Timeout     time.Duration // one attempt, the answer included, default 10s
	// Schedule is the retry schedule, DefaultSchedule when empty (a
	// setting shortens it for the demo and tests).
	Schedule     []time.Duration
	DisableAfter time.Duration // an endpoint failing this long is disabled, default 72h
	Policy       Policy        // which addresses deliveries may reach
	// Planner plans the emails each business event causes; nil: none.
	Planner store.MailPlanner
	// Sinks are the engine's other destinations (email): each runs in a
	// goroutine of its own until the engine stops.
	Sinks []Sink
	Poll  time.Duration // how often an idle engine looks for work, default 200ms
}

// Sink is a destination the engine runs besides webhooks: Run blocks
// until ctx ends.
type Sink interface {
	Run(ctx context.Context)
}

func (c *Config) fill() {
	if c.Workers < 1 {
		c.Workers = 64
	}
	if c.PerEndpoint < 1 {
		c.PerEndpoint = 16
	}
	c.Timeout = cmp.Or(c.Timeout, 10*time.Second)
	if len(c.Schedule) == 0 {
		c.Schedule = DefaultSchedule
	}
	c.DisableAfter = cmp.Or(c.DisableAfter, 72*time.Hour)
	c.Poll = cmp.Or(c.Poll, 200*time.Millisecond)
}

// Engine is the one outbound engine of a process: a dispatcher that fans
// the outbox out to destinations, webhook workers that deliver, the sinks,
// and the lag gauge. Any number of processes run one each on the same
// database.
type Engine struct {
	cfg    Config
	store  *store.Store
	logger *slog.Logger
	client *http.Client

	// kick wakes the webhook loop: new deliveries fanned out, or a result
	// recorded (the run's next event may be due, a slot is free).
	kick    chan struct{}
	results chan outcome

	mu       sync.Mutex
	inFlight int
	busy     map[uuid.UUID]int // in flight by endpoint

	stop    context.CancelCauseFunc
	stopped <-chan struct{} // closed once the engine is told to stop
	wg      sync.WaitGroup  // the loops and sinks
	sends   sync.WaitGroup  // deliveries in flight
}

// outcome is one attempt's result, as recorded and as counted.
type outcome struct {
	store.DeliveryResult
	metric string // refundd_webhook_deliveries_total's outcome
}

// New builds an engine; Start runs it.
func New(cfg Config, st *store.Store, logger *slog.Logger) *Engine {
	cfg.fill()
	if logger == nil {
		logger = slog.Default()
	}
	return &Engine{cfg: cfg, store: st, logger: logger, client: newClient(cfg.Policy, cfg.Timeout, cfg.PerEndpoint),
		kick: make(chan struct{}, 1), results: make(chan outcome, cfg.Workers), busy: map[uuid.UUID]int{}}
}

// errStopped is the cause given to the engine's work when it stops.
var errStopped = errors.New("outbound: engine stopped")

// fanOutBatch is how many outbox events one fan-out moves.
const fanOutBatch = 500

// lagEvery is how often the lag gauge is read.
const lagEvery = 5 * time.Second

// Start runs the engine until ctx ends or Stop.
func (e *Engine) Start(ctx context.Context) {
	ctx, e.stop = context.WithCancelCause(ctx)
	e.stopped = ctx.Done()
	e.wg.Go(func() { e.dispatch(ctx) })
	e.wg.Go(func() { e.deliverLoop(ctx) })
	e.wg.Go(e.recordLoop)
	e.wg.Go(func() { e.watchLag(ctx) })
	for _, s := range e.cfg.Sinks {
		e.wg.Go(func() { s.Run(ctx) })
	}
}

// Stop ends the loops and waits for them: no delivery is claimed after it
// is called, those in flight end within Timeout and their outcomes are
// recorded. Safe to call twice.
func (e *Engine) Stop() {
	if e.stop != nil {
		e.stop(errStopped)
	}
	e.wg.Wait()
}

func (e *Engine) wake() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// dispatch fans the outbox out, at once again after a full batch, else
// after Poll. One dispatcher works at a time across processes (the
// store's lock); the others find nothing to do.
func (e *Engine) dispatch(ctx context.Context) {
	failing := false
	for {
		n, err := e.store.FanOut(ctx, fanOutBatch, e.cfg.Planner)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				e.logger.Error("outbound: fan out; will retry", "err", err)
			}
			failing = true
		case err == nil:
			failing = false
		}
		if n > 0 {
			e.wake()
		}
		if n == fanOutBatch {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(e.cfg.Poll):
		}
	}
}

// deliverLoop claims what is due up to the free slots and sends each in a
// goroutine of its own; it looks again at once after a claim that filled
// every slot, when woken, or after Poll.
func (e *Engine) deliverLoop(ctx context.Context) {
	defer func() {
		e.sends.Wait()
		close(e.results)
	}()
	t := time.NewTicker(e.cfg.Poll)
	defer t.Stop()
	// Sends outlive Stop by at most Timeout, so what reached a receiver is
	// recorded rather than sent again.
	sendCtx := context.WithoutCancel(ctx)
	failing := false
	for {
		n, free, err := e.claim(ctx, sendCtx)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				e.logger.Error("outbound: claim webhook deliveries; will retry", "err", err)
			}
			failing = true
		case err == nil:
			failing = false
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil && n > 0 && n == free {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-e.kick:
		case <-t.C:
		}
	}
}

// lease is how long a claimed delivery is held: its attempt and the
// recording of its outcome fit well inside.
func (e *Engine) lease() time.Duration { return 2*e.cfg.Timeout + 30*time.Second }

func (e *Engine) claim(ctx, sendCtx context.Context) (claimed, free int, err error) {
	e.mu.Lock()
	free = e.cfg.Workers - e.inFlight
	busy := maps.Clone(e.busy)
	e.mu.Unlock()
	if free <= 0 {
		return 0, 0, nil
	}
	ds, err := e.store.ClaimDeliveries(ctx, store.DeliveryClaim{Limit: free, Lease: e.lease(),
		PerEndpoint: e.cfg.PerEndpoint, Busy: busy})
	if err != nil {
		return 0, free, err
	}
	e.mu.Lock()
	e.inFlight += len(ds)
	for _, d := range ds {
		e.busy[d.EndpointID]++
	}
	e.mu.Unlock()
	for _, d := range ds {
		e.sends.Go(func() { e.results <- e.deliver(sendCtx, d) })
	}
	return len(ds), free, nil
}

// deliver makes one attempt of d and says what it came to.
func (e *Engine) deliver(ctx context.Context, d store.Delivery) outcome {
	now := time.Now()
	r := store.DeliveryResult{EndpointID: d.EndpointID, RunID: d.Event.RunID, Seq: d.Event.Seq,
		EventID: d.Event.EventID, Resend: d.Resend, At: now}
	if d.Pruned {
		r.Outcome, r.Error = store.DeliveryPruned, "the event was removed by retention before it was delivered"
		return outcome{DeliveryResult: r}
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	a := post(ctx, e.client, d, now)
	r.Status, r.Duration, r.Error = a.status, a.took, errorWords(a.err)
	switch {
	case a.err == nil:
		r.Outcome = store.DeliveryDelivered
		return outcome{r, store.DeliveryDelivered}
	case a.status == http.StatusGone:
		r.Outcome = store.DeliveryGone
		return outcome{r, store.DeliveryGone}
	}
	r.Outcome = store.DeliveryRetry
	r.NextAt = time.Now().Add(e.retryIn(d.Attempts+1, a))
	e.logger.Debug("outbound: webhook attempt failed", "endpoint", d.EndpointID, "run", d.Event.RunID, "seq", d.Event.Seq,
		"attempt", d.Attempts+1, "err", r.Error, "next", r.NextAt)
	if a.refused {
		return outcome{r, "refused"}
	}
	return outcome{r, store.DeliveryRetry}
}

// retryIn is the wait after the attempts-th attempt failed: the
// receiver's Retry-After when it gave one (at most the schedule's last
// step), else the schedule's step, jittered by ±10% so that the deliveries
// that failed together do not come back together.
func (e *Engine) retryIn(attempts int, a attempt) time.Duration {
	s := e.cfg.Schedule
	last := s[len(s)-1]
	if a.hasAfter {
		return min(a.retryAfter, last)
	}
	step := s[min(max(attempts, 1), len(s))-1]
	return step + time.Duration((rand.Float64()*0.2-0.1)*float64(step))
}

// maxRecord bounds the outcomes recorded in one statement.
const maxRecord = 256

// recordLoop records outcomes in batches, as many as are waiting, until
// the webhook loop has stopped and every send has answered; then it frees
// their slots and wakes the webhook loop (the runs' next events may be
// due).
func (e *Engine) recordLoop() {
	for {
		batch, ok := gather(e.results, maxRecord)
		if len(batch) > 0 {
			e.record(batch)
			e.mu.Lock()
			e.inFlight -= len(batch)
			for _, o := range batch {
				if e.busy[o.EndpointID]--; e.busy[o.EndpointID] <= 0 {
					delete(e.busy, o.EndpointID)
				}
			}
			e.mu.Unlock()
			e.wake()
		}
		if !ok {
			return
		}
	}
}

// gather waits for one outcome, then takes what else waits, up to max;
// ok is false once the channel is closed.
func gather(c <-chan outcome, max int) (batch []outcome, ok bool) {
	o, ok := <-c
	if !ok {
		return nil, false
	}
	batch = append(batch, o)
	for len(batch) < max {
		select {
		case o, ok := <-c:
			if !ok {
				return batch, false
			}
			batch = append(batch, o)
		default:
			return batch, true
		}
	}
	return batch, true
}

// record writes a batch of outcomes, retrying while the database does not
// answer: the slots stay taken meanwhile, so nothing more is claimed. It
// gives up after recordTries; the leases then run out and the deliveries
// are sent again (at least once).
func (e *Engine) record(batch []outcome) {
	results := make([]store.DeliveryResult, len(batch))
	for i, o := range batch {
		results[i] = o.DeliveryResult
	}
	wait := 100 * time.Millisecond
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		disabled, err := e.store.RecordDeliveries(ctx, results, e.cfg.DisableAfter)
		cancel()
		if err == nil {
			for _, o := range batch {
				if o.metric != "" {
					metrics.WebhookDeliveries.WithLabelValues(o.metric).Inc()
				}
			}
			for _, id := range disabled {
				e.logger.Warn("outbound: webhook endpoint disabled", "endpoint", id)
			}
			return
		}
		if try == recordTries || (try >= recordTriesStopping && e.stopping()) {
			e.logger.Error("outbound: record webhook deliveries; they will be sent again when their lease ends",
				"err", err, "deliveries", len(batch))
			return
		}
		e.logger.Warn("outbound: record webhook deliveries; will retry", "err", err)
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Second)
	}
}

// recordTries bounds the tries of one batch's record (about a minute);
// recordTriesStopping, once the engine is stopping, so Stop is prompt.
const (
	recordTries         = 15
	recordTriesStopping = 3
)

func (e *Engine) stopping() bool {
	select {
	case <-e.stopped:
		return true
	default:
		return false
	}
}

// watchLag sets each endpoint's lag gauge every lagEvery, and removes the
// gauges of endpoints that are gone.
func (e *Engine) watchLag(ctx context.Context) {
	t := time.NewTicker(lagEvery)
	defer t.Stop()
	shown := map[uuid.UUID]bool{}
	for {
		lags, err := e.store.WebhookLag(ctx)
		if err == nil {
			for id, oldest := range lags {
				lag := time.Duration(0)
				if !oldest.IsZero() {
					lag = max(0, time.Since(oldest))
				}
				metrics.WebhookLag.WithLabelValues(id.String()).Set(lag.Seconds())
				shown[id] = true
			}
			for id := range shown {
				if _, ok := lags[id]; !ok {
					metrics.WebhookLag.DeleteLabelValues(id.String())
					delete(shown, id)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
