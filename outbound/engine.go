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
	Workers     int // lanes in flight per process (WEBHOOK_WORKERS), default 64
	PerEndpoint int // lanes in flight per endpoint per process, default 16
	// Lane is how many of a run's due events one worker sends to an
	// endpoint in a row under one lease, each after the one before it is
	// acknowledged; default 32. A lane is one of Workers.
	Lane    int
	Timeout time.Duration // one attempt, the answer included, default 10s
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
	if c.Lane < 1 {
		c.Lane = 32
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
	results chan []outcome // a lane's outcomes, in seq order

	mu       sync.Mutex
	inFlight int               // lanes
	busy     map[uuid.UUID]int // lanes in flight by endpoint

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
		kick: make(chan struct{}, 1), results: make(chan []outcome, cfg.Workers), busy: map[uuid.UUID]int{}}
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

// lease is how long a claimed lane is held: its first attempt and the
// recording of its outcomes fit well inside.
func (e *Engine) lease() time.Duration { return 2*e.cfg.Timeout + 30*time.Second }

// recordMargin is the part of a lease kept for recording a lane's
// outcomes: no attempt starts that could end later than lease-recordMargin
// after the claim.
const recordMargin = 10 * time.Second

func (e *Engine) claim(ctx, sendCtx context.Context) (claimed, free int, err error) {
	e.mu.Lock()
	free = e.cfg.Workers - e.inFlight
	busy := maps.Clone(e.busy)
	e.mu.Unlock()
	if free <= 0 {
		return 0, 0, nil
	}
	// The last attempt of a lane starts early enough to end, and be
	// recorded, before the lease does.
	lastStart := time.Now().Add(e.lease() - recordMargin - e.cfg.Timeout)
	ds, err := e.store.ClaimDeliveries(ctx, store.DeliveryClaim{Limit: free, Lease: e.lease(),
		PerEndpoint: e.cfg.PerEndpoint, Busy: busy, Lane: e.cfg.Lane})
	if err != nil {
		return 0, free, err
	}
	lanes := lanesOf(ds)
	e.mu.Lock()
	e.inFlight += len(lanes)
	for _, l := range lanes {
		e.busy[l[0].EndpointID]++
	}
	e.mu.Unlock()
	for _, l := range lanes {
		e.sends.Go(func() { e.results <- e.sendLane(sendCtx, l, lastStart) })
	}
	return len(lanes), free, nil
}

// lanesOf groups a claim's deliveries into lanes: each head with the
// deliveries that follow it.
func lanesOf(ds []store.Delivery) [][]store.Delivery {
	var lanes [][]store.Delivery
	for _, d := range ds {
		if n := len(lanes); d.Follows && n > 0 {
			if h := lanes[n-1][0]; h.EndpointID == d.EndpointID && h.Event.RunID == d.Event.RunID {
				lanes[n-1] = append(lanes[n-1], d)
				continue
			}
		}
		lanes = append(lanes, []store.Delivery{d})
	}
	return lanes
}

// sendLane sends a lane's deliveries one after the other, each once the
// one before it is acknowledged. After the first that is not (or once the
// engine stops, or the lease's time for attempts is over) the rest are
// unsent: their leases end and they are claimed again in order.
func (e *Engine) sendLane(ctx context.Context, lane []store.Delivery, lastStart time.Time) []outcome {
	out := make([]outcome, 0, len(lane))
	stop := false
	for i, d := range lane {
		if i > 0 && (stop || e.stopping() || time.Now().After(lastStart)) {
			out = append(out, outcome{DeliveryResult: store.DeliveryResult{EndpointID: d.EndpointID, RunID: d.Event.RunID,
				Seq: d.Event.Seq, EventID: d.Event.EventID, Outcome: store.DeliveryUnsent, At: time.Now()}})
			continue
		}
		o := e.deliver(ctx, d)
		out = append(out, o)
		stop = o.Outcome != store.DeliveryDelivered && o.Outcome != store.DeliveryPruned
	}
	return out
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

// maxRecord bounds the lanes recorded in one transaction.
const maxRecord = 64

// recordLoop records lanes' outcomes in batches, as many lanes as are
// waiting, until the webhook loop has stopped and every lane has ended;
// then it frees their slots and wakes the webhook loop (the runs' next
// events may be due).
func (e *Engine) recordLoop() {
	for {
		lanes, ok := gather(e.results, maxRecord)
		if len(lanes) > 0 {
			var batch []outcome
			for _, l := range lanes {
				batch = append(batch, l...)
			}
			e.record(batch)
			e.mu.Lock()
			e.inFlight -= len(lanes)
			for _, l := range lanes {
				id := l[0].EndpointID
				if e.busy[id]--; e.busy[id] <= 0 {
					delete(e.busy, id)
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

// gather waits for one lane's outcomes, then takes what else waits, up to
// max lanes; ok is false once the channel is closed.
func gather(c <-chan []outcome, max int) (lanes [][]outcome, ok bool) {
	l, ok := <-c
	if !ok {
		return nil, false
	}
	lanes = append(lanes, l)
	for len(lanes) < max {
		select {
		case l, ok := <-c:
			if !ok {
				return lanes, false
			}
			lanes = append(lanes, l)
		default:
			return lanes, true
		}
	}
	return lanes, true
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
