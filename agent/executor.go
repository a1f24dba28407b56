// Package agent is refundd's executor: it claims runs with leases, walks
// each through its state machine, narrates, moves money only through the
// operation ledger, reconciles whatever it is unsure of, and honours cancel
// at safe boundaries. It never decides anything from model text.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// The defaults of the settings refundd's configuration (config.go) also
// reads from the environment: written once, here, where they are used.
const (
	DefaultLease        = 3 * time.Second // WORKER_LEASE
	DefaultOutageBudget = time.Minute     // PROVIDER_OUTAGE_BUDGET
	DefaultRetryMax     = 3 * time.Second // Config.RetryMax

	DefaultApprovalDeadline = 48 * time.Hour // APPROVAL_DEADLINE
)

// Config tunes an Executor. Zero values take the defaults, except
// Concurrency, which has none here: the process's default lives with its
// other settings (WORKER_SLOTS in config.go), and New refuses zero.
type Config struct {
	WorkerID    string        // names this process in leases; default host-pid
	Concurrency int           // runs worked on at once; at least 1
	Lease       time.Duration // default 3s, renewed every third of it; a dead worker's runs resume this much later
	Poll        time.Duration // look for work at least this often; default 1s
	// ApprovalThreshold: refunds of at least this many minor units need an
	// approver. Zero (the demo policy) means every refund does.
	ApprovalThreshold int64
	// ApprovalDeadline: how long an approver may take to decide; a run
	// still waiting then ends canceled by the system, nothing refunded.
	// Zero means no deadline (APPROVAL_DEADLINE's default,
	// DefaultApprovalDeadline, is config.go's to give).
	ApprovalDeadline time.Duration
	// MaxAmount: the policy refuses refunds above this many minor units
	// (a person in support handles those). Zero means no limit.
	MaxAmount int64
	// OutageBudget: how long the provider may go on refusing an operation
	// (answering that it committed nothing), counted from its first
	// refusal, before the run fails; default 60s. Resumes and reconcile
	// passes do not spend it.
	OutageBudget    time.Duration
	ProviderTimeout time.Duration // one provider call; default 5s
	RetryBase       time.Duration // first retry delay, doubled each time, jittered; default 500ms
	// RetryMax caps a retry delay; default 3s, so that after an outage the
	// next try comes within RetryMax and a Poll (4 s) of the provider
	// answering again.
	RetryMax       time.Duration
	ChunkEvery     time.Duration // narration chunking; default 100ms (≤10 rows/s)
	NarrationDelay time.Duration // built-in narrator's delay per word
	// Answers words each run's final answer from the facts of its end:
	// the words table's (views.Answers). Required.
	Answers Answers
}

// Answers words the final answers the agent writes, from what it knows of
// a run's end; views.Answers is the words table's.
type Answers interface {
	OrderMissing() store.Answer
	DoesNotFit(amount int64, currency string, orderID, paid int64, paidCurrency string) store.Answer
	OverLimit(limit int64, currency string) store.Answer
	OverPaid() store.Answer
	Declined(amount int64, currency, reason string) store.Answer
	ProviderRefused(outage bool) store.Answer
	Refunded(amount int64, currency, ref string, tooLate bool) store.Answer
	Canceled(providerAsked bool) store.Answer
	FoundOther(amount int64, currency, orderRef, ref string) store.Answer
	FoundRefunded(amount int64, currency, ref string, tooLate bool) store.Answer
	FoundDeclined(amount int64, currency, reason string, canceled bool) store.Answer
	// Words: the built-in narrator's lines; Money: an amount as the
	// language writes it (the narration's facts).
	Words
	Money(lang string, minor int64, currency string) string
}

func (c *Config) fill() {
	// Without a hostname the ID stays unique by its pid and random suffix.
	host, _ := os.Hostname()
	c.WorkerID = cmp.Or(c.WorkerID, fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8]))
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.Poll = cmp.Or(c.Poll, time.Second)
	c.ProviderTimeout = cmp.Or(c.ProviderTimeout, 5*time.Second)
	c.OutageBudget = cmp.Or(c.OutageBudget, DefaultOutageBudget)
	c.RetryBase = cmp.Or(c.RetryBase, 500*time.Millisecond)
	c.RetryMax = cmp.Or(c.RetryMax, DefaultRetryMax)
	c.ChunkEvery = cmp.Or(c.ChunkEvery, 100*time.Millisecond)
}

// Executor works on runs until stopped.
type Executor struct {
	cfg      Config
	store    *store.Store
	provider payments.Provider
	narrator Narrator
	listener *store.Listener // optional: wakes workers at once on new work
	logger   *slog.Logger

	// kick hands a wake-up from one loop to the next idle one: a claim that
	// saw more work due passes it on, so a burst fills the slots one claim
	// at a time instead of every idle loop asking at every wake-up.
	kick   chan struct{}
	claims atomic.Int64
	// asked tells the deadline alarm (watchDeadlines) that this executor
	// asked for a decision with a deadline, which may be the next one.
	asked chan struct{}

	stop context.CancelCauseFunc
	wg   sync.WaitGroup
}

// Claims counts the claim queries this executor has sent, found work or not.
func (e *Executor) Claims() int64 { return e.claims.Load() }

// New builds an executor. listener may be nil (then it polls). A Config
// without Concurrency or Answers is a programming error, and New panics
// saying so: an executor with no slots would start and never work, one
// without words could end no run.
func New(cfg Config, st *store.Store, provider payments.Provider, narrator Narrator, listener *store.Listener, logger *slog.Logger) *Executor {
	if cfg.Concurrency < 1 {
		panic(fmt.Sprintf("agent: Config.Concurrency is %d, want at least 1 (WORKER_SLOTS)", cfg.Concurrency))
	}
	if cfg.Answers == nil {
		panic("agent: Config.Answers is nil: give it the words table's final answers (views.Answers)")
	}
	cfg.fill()
	if narrator == nil {
		narrator = Builtin{Delay: cfg.NarrationDelay, Words: cfg.Answers}
	}
	return &Executor{cfg: cfg, store: st, provider: provider, narrator: narrator, listener: listener,
		logger: logger.With("worker", cfg.WorkerID), kick: make(chan struct{}, 1), asked: make(chan struct{}, 1)}
}

// errNotCalled marks a provider call that was never made (it could not be
// recorded first): it is a step that failed, not an answer to reconcile.
var errNotCalled = errors.New("agent: provider not called")

// errStopped is the cause given to work interrupted by Stop.
var errStopped = errors.New("agent: executor stopped")

// Start launches the worker loops. They wake for work only: a start, an
// approval or a cancel (the listener's Work topic), a wake-up handed on by
// another loop, a decision's deadline passing (watchDeadlines), or the
// poll, which finds due retries and expired leases.
// Narration never wakes them.
func (e *Executor) Start(ctx context.Context) {
	ctx, e.stop = context.WithCancelCause(ctx)
	var wake <-chan struct{}
	if e.listener != nil {
		var unsubscribe func()
		wake, unsubscribe = e.listener.Subscribe(store.Work)
		context.AfterFunc(ctx, unsubscribe)
	}
	// One poll for all loops: each tick wakes one, which hands it on only
	// if it found more, so an idle process asks once per Poll, not once per
	// slot.
	poll := time.NewTicker(e.cfg.Poll)
	context.AfterFunc(ctx, poll.Stop)
	// Work left from before this start is looked for at once.
	e.handOn()
	for range e.cfg.Concurrency {
		e.wg.Go(func() { e.loop(ctx, wake, poll.C) })
	}
	e.wg.Go(func() { e.watchDeadlines(ctx) })
	e.wg.Go(func() { e.watchTimeline(ctx) })
}

// watchTimeline checks the database's timeline at start and every Poll
// (store.CheckTimeline). The first check after a promotion marks every
// unfinished run to ask the provider before anything else; no run is
// claimed on a timeline no check has recorded yet (store.ClaimNext).
func (e *Executor) watchTimeline(ctx context.Context) {
	t := time.NewTicker(e.cfg.Poll)
	defer t.Stop()
	failing := false
	for {
		c, err := e.store.CheckTimeline(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			// A database that does not answer, or a standby, is checked
			// again at the next tick; said once, not every second.
			if !failing {
				e.logger.Warn("database timeline not checked; will retry", "err", err)
			}
			failing = true
		case err == nil:
			failing = false
			if c.New {
				e.logger.Warn("the database writes on a new timeline (a standby was promoted, or a backup restored): "+
					"every unfinished run asks the payment provider before anything else", "timeline", c.Timeline, "runs", c.Marked)
				e.handOn()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchDeadlines wakes a loop when the earliest deadline of a decision
// still awaited passes, so the run is claimed and expired then, not at the
// next poll. It reads that deadline at start, each time one passes, and
// when this executor asks for a decision with a deadline; one asked for by
// another process is that process's alarm's (and at worst this one's
// poll's, should that process be gone).
func (e *Executor) watchDeadlines(ctx context.Context) {
	// Stopped until a deadline lies ahead. (Since Go 1.23 a stopped or
	// reset timer never delivers a stale tick, so there is nothing to drain.)
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		left, ok, err := e.store.NextDeadline(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.logger.Warn("read the next decision deadline; will try again", "err", err)
			left, ok = e.cfg.Poll, true
		}
		if ok {
			t.Reset(left)
		}
		select {
		case <-ctx.Done():
			return
		case <-e.asked:
		case <-t.C:
			e.handOn()
		}
		t.Stop()
	}
}

// Stop ends the loops and waits for them. A run being worked on is left
// where its last commit put it and released, so any worker resumes it at
// once. Safe to call twice.
func (e *Executor) Stop() {
	if e.stop != nil {
		e.stop(errStopped)
	}
	e.wg.Wait()
}

func (e *Executor) loop(ctx context.Context, wake <-chan struct{}, poll <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-e.kick:
		case <-poll:
		}
		// The lease may start as soon as the claim is sent.
		claimed := time.Now()
		e.claims.Add(1)
		metrics.ClaimQueries.Inc()
		run, more, err := e.store.ClaimNext(ctx, e.cfg.WorkerID, e.cfg.Lease)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				e.logger.Error("claim run", "err", err)
			}
			continue
		}
		metrics.Claims.Inc()
		if more {
			e.handOn()
		}
		e.work(ctx, run, claimed)
	}
}

// handOn wakes one idle loop to claim; if none is idle, the first to finish
// takes it.
func (e *Executor) handOn() {
	select {
	case e.kick <- struct{}{}:
	default: // a wake-up is already waiting; one is enough
	}
}

// work holds the lease on one claimed run (claimed when the claim was
// sent) while it takes steps, and gives it back with the time it next needs
// attention.
func (e *Executor) work(ctx context.Context, run *store.Run, claimed time.Time) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	log := e.logger.With("run", run.ID)

	// Keep the lease alive; losing it stops this worker's steps at once.
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		e.keepLease(ctx, cancel, log, run.ID, claimed)
	}()

	after, seen := e.steps(ctx, log, run)
	cancel(nil)
	<-renewed
	if errors.Is(context.Cause(ctx), store.ErrLeaseLost) {
		log.Warn("lease lost or not renewable; leaving the run to whoever claims it next", "err", context.Cause(ctx))
		return
	}
	// Release even when stopping, so another worker need not wait out the
	// lease.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if err := e.store.ReleaseRun(rctx, run.ID, e.cfg.WorkerID, seen, after); err != nil {
		log.Error("release run", "err", err)
	}
}

// keepLease renews the lease on runID every third of it until ctx ends. A
// renewal the database refuses (ErrLeaseLost) stops the work at once. One
// that fails otherwise (a dropped connection, a stalled database) is tried
// again at the next tick, unless the lease could run out before then: the
// work stops while the lease is still surely held (held is when the last
// successful renewal, or the claim, was sent), so two workers never act on
// one run even when this one cannot reach the database.
func (e *Executor) keepLease(ctx context.Context, cancel context.CancelCauseFunc, log *slog.Logger, runID uuid.UUID, held time.Time) {
	every := e.cfg.Lease / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A slow renewal may still land in time; past the lease it is moot.
		sent := time.Now()
		rctx, rcancel := context.WithDeadline(ctx, held.Add(e.cfg.Lease))
		err := e.store.RenewLease(rctx, runID, e.cfg.WorkerID, e.cfg.Lease)
		rcancel()
		switch {
		case err == nil:
			held = sent
		case errors.Is(err, store.ErrLeaseLost):
			cancel(err)
			return
		case ctx.Err() != nil:
			return
		case time.Until(held.Add(e.cfg.Lease)) <= every:
			cancel(fmt.Errorf("%w: not renewed since %s: %w", store.ErrLeaseLost, held.Format(time.RFC3339Nano), err))
			return
		default:
			log.Warn("renew lease failed; will try again", "err", err)
		}
	}
}

// steps advances the run as far as it can go now. It returns when the run
// is finished, waits for a person, or must wait before the next try, with
// that wait (zero: wait for a person) and the last seq it looked at.
//
// Each step starts from the run as last read or written: the claim's row,
// or the row a step's own change returned (read under its lock, as fresh
// as a read after it), and otherwise the run read again.
func (e *Executor) steps(ctx context.Context, log *slog.Logger, run *store.Run) (after time.Duration, seen int64) {
	now := &latest{run: run}
	for ctx.Err() == nil {
		if run = now.take(); run == nil {
			var err error
			if run, err = e.store.RunByID(ctx, now.id); err != nil {
				log.Error("load run", "err", err)
				return e.cfg.RetryBase, 0
			}
		}
		seen = run.LastSeq
		if store.Terminal(run.State) {
			return 0, seen
		}
		wait, done, err := e.step(ctx, log, run, now)
		switch {
		case err != nil && ctx.Err() != nil:
			return e.cfg.RetryBase, seen
		case err != nil:
			log.Error("step failed", "state", run.State, "err", err)
			return e.backoff(1), seen
		case done:
			return wait, seen
		}
	}
	return e.cfg.RetryBase, seen
}

// latest is the run as a step's change left it, for the next step to start
// from without reading it again; id is the run's, for when there is none.
// opless says the change was this worker's own move from planning to
// submitting, which began the submitting step's first attempt: the run has
// no operation yet (only a submitting run's step makes one), so settle
// need not read its ledger, nor begin the attempt.
type latest struct {
	id     uuid.UUID
	run    *store.Run
	opless bool
}

// take returns the run kept, once, or nil (and then forgets opless: the
// run is read again).
func (l *latest) take() *store.Run {
	r := l.run
	if r != nil {
		l.id = r.ID
	} else {
		l.opless = false
	}
	l.run = nil
	return r
}

// keep keeps the run a change returned (none after an error).
func (l *latest) keep(r *store.Run, err error) error {
	l.opless = false
	if err == nil && r != nil {
		l.run = r
	}
	return err
}

// noOperation reports, once, whether the run taken has no operation yet.
func (l *latest) noOperation() bool {
	o := l.opless
	l.opless = false
	return o
}

// step takes one step; done means stop for now and come back after wait.
// A panic in a step is recovered: it fails that step, not the worker. A
// change that ends the step keeps the run it returned in now.
func (e *Executor) step(ctx context.Context, log *slog.Logger, run *store.Run, now *latest) (wait time.Duration, done bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("step panicked", "state", run.State, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("agent: step %s panicked: %v", run.State, p)
		}
	}()
	// Before anything else, even a cancel: the provider may hold a refund
	// of this request that the database forgot. A new run asks too: its
	// start may be a client's retry of a request a failover made us forget.
	if run.ProviderCheck || run.State == store.StateCreated {
		if ended, retryIn, err := e.checkProvider(ctx, log, run); ended || retryIn > 0 || err != nil {
			return retryIn, retryIn > 0, err
		}
	}
	if run.CancelRequested() {
		ops, err := e.store.OperationsByRun(ctx, run.ID)
		if err != nil {
			return 0, false, err
		}
		if !store.CancelTooLate(ops) {
			return e.cancel(ctx, log, run, ops)
		}
		// Too late: the run goes on to whatever the provider decides.
	}
	switch run.State {
	case store.StateCreated:
		return 0, false, ignoreDone(now.keep(e.store.Transition(ctx, run.ID, store.StateCreated, store.StatePlanning, store.EventOf(store.RunPlanning{}))))
	case store.StatePlanning:
		return 0, false, e.plan(ctx, run, now)
	case store.StateAwaitingApproval:
		// A person decides (Approve or cancel wakes us), or nobody does
		// by the deadline: ReleaseRun makes the run due then.
		expired, err := e.store.ExpireApproval(ctx, run.ID)
		return 0, !expired, err
	case store.StateSubmitting, store.StateReconciling:
		return e.settle(ctx, log, run, now.noOperation())
	}
	return 0, true, fmt.Errorf("agent: no step for state %q", run.State)
}

// plan checks the request against the order and policy, narrates, and asks
// for approval (or proceeds when the policy needs none).
func (e *Executor) plan(ctx context.Context, run *store.Run, now *latest) error {
	order, err := e.store.OrderByID(ctx, run.OrderID)
	if errors.Is(err, store.ErrNotFound) {
		return e.finish(ctx, run, store.StateFailed, e.cfg.Answers.OrderMissing())
	}
	if err != nil {
		return err
	}
	if run.Currency != order.Currency || run.Amount > order.Amount {
		return e.finish(ctx, run, store.StateFailed, e.cfg.Answers.DoesNotFit(run.Amount, run.Currency, order.ID, order.Amount, order.Currency))
	}
	if e.cfg.MaxAmount > 0 && run.Amount > e.cfg.MaxAmount {
		return e.finish(ctx, run, store.StateFailed, e.cfg.Answers.OverLimit(e.cfg.MaxAmount, run.Currency))
	}
	needsOK := store.NeedsApproval(run.Amount, e.cfg.ApprovalThreshold)
	if err := e.beginAttempt(ctx, run, "planning"); err != nil {
		return err
	}
	money := e.cfg.Answers.Money
	if err := e.narrate(ctx, run, Facts{Stage: "planning", Language: run.Language, OrderID: order.ID, Description: order.Description,
		Paid: money(run.Language, order.Amount, order.Currency), Amount: money(run.Language, run.Amount, run.Currency),
		Reason: run.Reason, NeedsOK: needsOK}); err != nil {
		return err
	}
	proposal := store.ActionProposed{Action: "refund", OrderID: order.ID, Amount: run.Amount, Currency: run.Currency}
	if needsOK {
		err := now.keep(e.store.RequestApprovalWithin(ctx, run.ID, proposal, e.cfg.ApprovalDeadline))
		if errors.Is(err, store.ErrProviderCheck) {
			return nil // marked meanwhile: the next step asks the provider
		}
		if err == nil && e.cfg.ApprovalDeadline > 0 {
			select {
			case e.asked <- struct{}{}:
			default: // the alarm will read the deadlines anyway
			}
		}
		return ignoreDone(err)
	}
	// The submitting step's first attempt begins in the same change: the
	// run was planning until now, so it has had none.
	err = now.keep(e.store.Transition(ctx, run.ID, store.StatePlanning, store.StateSubmitting,
		store.EventOf(proposal),
		store.EventOf(store.ApprovalGranted{DecidedBy: store.DecidedBy{By: store.DeciderRef{Policy: true}}}),
		store.EventOf(store.StepAttempt{Step: stepSubmitting, Attempt: 1})))
	now.opless = err == nil
	return ignoreDone(err)
}

// settle gets the run's refund to a known outcome through the ledger:
// record intent, call the provider, record what it confirmed; or, when an
// earlier attempt's outcome is unknown, ask the provider before anything else.
// The step is narrated before the operation exists. Until a call about it
// may have reached the provider, a cancel stops the refund (and is answered
// so): no operation is created, and no call begun, after it (the store
// refuses both under the run's lock). From then on a cancel is too late,
// and the refund goes on to whatever the provider decides. opless: the
// caller knows the run has no operation yet and began the step's attempt,
// so its ledger is not read.
func (e *Executor) settle(ctx context.Context, log *slog.Logger, run *store.Run, opless bool) (time.Duration, bool, error) {
	op, err := e.operation(ctx, run, opless)
	fresh := err == nil
	switch {
	case errors.Is(err, store.ErrCancelRequested):
		return 0, false, nil // the next step honours it
	case err != nil && !errors.Is(err, store.ErrAlreadyDone):
		if store.ErrorCode(err) == store.CodeConflict {
			return 0, false, e.finish(ctx, run, store.StateFailed, e.cfg.Answers.OverPaid())
		}
		return 0, false, err
	}
	if ended, done, err := e.ended(ctx, run, op); ended {
		return 0, done, err
	}
	if fresh {
		return e.submit(ctx, log, run, op)
	}
	// Nothing about the operation can have reached the provider unseen, so
	// nothing needs verifying: call (again) with the same key.
	if idle, err := e.nothingInFlight(ctx, op); err != nil || idle {
		if err != nil {
			return 0, false, err
		}
		return e.submit(ctx, log, run, op)
	}
	// An operation we did not just create whose latest call may have
	// reached the provider (a worker died mid-call). Never re-run it blind:
	// say we are verifying, and ask the provider first.
	if op.State == store.OpSubmitted {
		if _, err := e.store.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpReconciling,
			Reason: "resuming: asking the payment provider whether an earlier attempt went through"}); ignoreDone(err) != nil {
			return 0, false, err
		}
	}
	rc, err := e.lookup(ctx, op)
	switch {
	case err == nil:
		return 0, false, e.record(ctx, op, rc)
	case errors.Is(err, payments.ErrNotFound):
		// Only now may it be submitted again, with the same key.
		return e.submit(ctx, log, run, op)
	case ctx.Err() != nil, errors.Is(err, errNotCalled):
		return 0, false, err
	default:
		// One warning per backoff step, never an error: an unanswered
		// lookup is what reconciling exists to ride out.
		n, nerr := e.store.NoteAttempt(ctx, op.ID, err.Error())
		if nerr != nil {
			return 0, false, nerr
		}
		wait := e.backoff(n)
		log.Warn("reconcile: provider lookup failed; will retry", "op", op.ID, "attempt", n, "retry_in", wait, "err", err)
		return wait, true, nil
	}
}

// checkProvider asks the payment provider what it holds under the run's
// key (store.RefundKey) before the run's next step, as a new run and every
// unfinished run after a failover must (store.Run.ProviderCheck): a
// failover to a standby that lacked the primary's last seconds may have
// made the database forget that the refund was made, and the customer's
// retried start, or an approver deciding again, must not make it twice.
// A refund the provider holds ends the run as the provider says, with
// words that tell what happened (recordFound): ended. When the provider
// holds nothing under the key, the step goes on. A run whose ledger has an
// operation needs no lookup here: that operation is reconciled under its
// own key before anything is sent again. For a run marked after a
// failover, a lookup without an answer is tried again in retryIn, and the
// run waits: nobody is asked to decide it meanwhile. A new run goes on.
func (e *Executor) checkProvider(ctx context.Context, log *slog.Logger, run *store.Run) (ended bool, retryIn time.Duration, err error) {
	checked := func() (bool, time.Duration, error) {
		if !run.ProviderCheck {
			return false, 0, nil
		}
		return false, 0, e.store.ProviderChecked(ctx, run.ID)
	}
	// A new run has no operation yet (SubmitOperation makes one only once
	// it is submitting): only a marked run's ledger needs reading.
	if run.ProviderCheck {
		ops, err := e.store.OperationsByRun(ctx, run.ID)
		if err != nil {
			return false, 0, err
		}
		if len(ops) > 0 {
			return checked()
		}
	}
	key, err := e.store.RefundKey(ctx, run)
	if err != nil {
		return false, 0, err
	}
	cctx, cancel := context.WithTimeout(ctx, e.cfg.ProviderTimeout)
	cctx, answer := payments.WithAnswer(cctx)
	start := time.Now()
	rc, err := e.provider.Lookup(cctx, key.String())
	took := time.Since(start)
	cancel()
	switch {
	case errors.Is(err, payments.ErrNotFound):
		metrics.ProviderChecks.WithLabelValues("not_found").Inc()
		return checked()
	case err == nil:
		metrics.ProviderChecks.WithLabelValues("found").Inc()
		log.Warn("the payment provider holds a refund under this run's key that the database has no record of (lost in a failover?); recording what it holds",
			"key", key, "ref", rc.Ref, "status", rc.Status)
		return true, 0, e.recordFound(ctx, run, key, rc, store.FoundCall{HTTPStatus: answer.Status, Took: took, Result: callResult(rc, nil)})
	case ctx.Err() != nil:
		return false, 0, ctx.Err()
	}
	metrics.ProviderChecks.WithLabelValues("error").Inc()
	if !run.ProviderCheck {
		// A new run goes on without the answer, as it did before there was
		// a check: its refund's key keeps the provider from making it a
		// second time whatever we forgot, and a provider outage is ridden
		// out (or not) by the refund's own calls and their budget.
		log.Warn("provider check: lookup failed; the new run goes on (its key keeps the refund from being made twice)", "key", key, "err", err)
		return false, 0, nil
	}
	// No attempt count to back off by (there is no ledger row yet): wait
	// the longest retry, which an outage's end is within.
	wait := e.backoff(maxBackoffSteps)
	log.Warn("provider check: lookup failed; will retry", "key", key, "retry_in", wait, "err", err)
	return false, wait, nil
}

// maxBackoffSteps is a backoff step past which the wait is RetryMax's.
const maxBackoffSteps = 64

// recordFound records what the provider holds under the run's key, which
// our ledger lacks, and ends the run as the provider says. A refund made
// under the key for other details (the request's key reused after we
// forgot it) is not this run's: it is never adopted, the run ends without
// a refund, and `refundd verify` lists the provider's refund as one no
// operation of ours explains.
func (e *Executor) recordFound(ctx context.Context, run *store.Run, key uuid.UUID, rc payments.Receipt, call store.FoundCall) error {
	if rc.Amount != run.Amount || rc.Currency != run.Currency || rc.OrderRef != fmt.Sprint(run.OrderID) {
		return e.finish(ctx, run, store.StateFailed, e.cfg.Answers.FoundOther(rc.Amount, rc.Currency, rc.OrderRef, rc.Ref))
	}
	f := store.Found{Outcome: store.Outcome{State: store.OpSucceeded, ProviderRef: rc.Ref}, Call: call, End: store.StateCompleted,
		Message: e.cfg.Answers.FoundRefunded(run.Amount, run.Currency, rc.Ref, run.CancelRequested())}
	if rc.Status != payments.StatusSucceeded {
		reason := cmp.Or(rc.FailureReason, "declined by the payment provider")
		f.Outcome = store.Outcome{State: store.OpFailed, Reason: reason}
		f.End, f.Message = store.StateFailed, e.cfg.Answers.FoundDeclined(run.Amount, run.Currency, reason, run.CancelRequested())
		if run.CancelRequested() {
			f.End = store.StateCanceled
		}
	}
	_, err := e.store.RecordFound(ctx, run.ID, key, f)
	return ignoreDone(err)
}

// nothingInFlight says whether no call about op can be in flight or have
// committed unseen: the provider refused the latest one and none has begun
// since, or none was ever begun (each call is recorded before it is made,
// so a step that failed before its call leaves none).
func (e *Executor) nothingInFlight(ctx context.Context, op *store.Operation) (bool, error) {
	if op.LastCallRefused {
		return true, nil
	}
	if op.State != store.OpSubmitted {
		return false, nil
	}
	n, err := e.store.ProviderCallsBegun(ctx, op.ID)
	return n == 0, err
}

// submit calls the provider for op and records what is known afterwards.
func (e *Executor) submit(ctx context.Context, log *slog.Logger, run *store.Run, op *store.Operation) (time.Duration, bool, error) {
	rc, ended, err := e.callUnended(ctx, op, store.CallSubmit, func(ctx context.Context) (payments.Receipt, error) {
		return e.provider.Refund(ctx, payments.RefundRequest{Key: op.ID.String(),
			OrderRef: fmt.Sprint(run.OrderID), Amount: op.Amount, Currency: op.Currency})
	})
	if err == nil {
		return e.answered(ctx, run, op, rc, ended)
	}
	if ended != nil {
		e.endCall(ctx, op, *ended)
	}
	switch {
	case ctx.Err() != nil:
		// We are stopping or lost the lease: whoever goes on reconciles.
		return 0, false, ctx.Err()
	case errors.Is(err, store.ErrCancelRequested):
		return 0, false, nil // not called: the next step honours the cancel
	case errors.Is(err, errNotCalled):
		return 0, false, err
	case payments.Uncertain(err):
		_, rerr := e.store.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpReconciling,
			Reason: "no answer from the payment provider: " + err.Error()})
		return 0, false, ignoreDone(rerr)
	}
	return e.refused(ctx, log, run, op, err)
}

// refused handles a call the provider refused without committing anything.
// An outage (ErrUnavailable) is ridden out, backing off, until the provider
// has refused this operation for longer than the outage budget; a request
// it calls wrong fails at once, as asking again cannot change the answer.
func (e *Executor) refused(ctx context.Context, log *slog.Logger, run *store.Run, op *store.Operation, err error) (time.Duration, bool, error) {
	r, nerr := e.store.NoteRefusal(ctx, op.ID, err.Error())
	if nerr != nil {
		return 0, false, ignoreDone(nerr)
	}
	outage := errors.Is(err, payments.ErrUnavailable)
	if outage && r.For < e.cfg.OutageBudget {
		// The last try falls at the end of the budget, not a backoff later.
		wait := min(e.backoff(r.Count), e.cfg.OutageBudget-r.For)
		log.Warn("provider refused; will retry", "op", op.ID, "refusals", r.Count, "refusing_for", r.For, "retry_in", wait, "err", err)
		return wait, true, nil
	}
	log.Warn("provider refused; giving up", "op", op.ID, "refusals", r.Count, "refusing_for", r.For, "err", err)
	reason := "the payment provider refused the request"
	if outage {
		reason = fmt.Sprintf("the payment provider was unavailable for %s", r.For.Round(time.Second))
	}
	if _, err := e.store.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpFailed, Reason: reason}); ignoreDone(err) != nil {
		return 0, false, err
	}
	return 0, false, e.finish(ctx, run, store.StateFailed, e.cfg.Answers.ProviderRefused(outage))
}

func (e *Executor) lookup(ctx context.Context, op *store.Operation) (payments.Receipt, error) {
	rc, err := e.call(ctx, op, store.CallLookup, func(ctx context.Context) (payments.Receipt, error) {
		return e.provider.Lookup(ctx, op.ID.String())
	})
	outcome := "error"
	switch {
	case err == nil && rc.Status == payments.StatusSucceeded:
		outcome = "succeeded"
	case err == nil:
		outcome = "failed"
	case errors.Is(err, payments.ErrNotFound):
		outcome = "not_found"
	}
	metrics.Reconciliations.WithLabelValues(outcome).Inc()
	return rc, err
}

// call makes one provider call about op, bounded by ProviderTimeout, and
// records it for support: a row before the call (a worker that dies
// mid-call leaves a call with no answer), its answer and duration after.
// A submit is begun through store.BeginSubmit, which refuses it once a
// cancel came in time. If the call cannot be recorded it is not made: the
// error is errNotCalled (with store.ErrCancelRequested when that was why),
// which says nothing about the provider.
func (e *Executor) call(ctx context.Context, op *store.Operation, kind string, do func(context.Context) (payments.Receipt, error)) (payments.Receipt, error) {
	rc, ended, err := e.callUnended(ctx, op, kind, do)
	if ended != nil {
		e.endCall(ctx, op, *ended)
	}
	return rc, err
}

// endCall records how a call ended, even when stopping: the call was made.
func (e *Executor) endCall(ctx context.Context, op *store.Operation, c store.EndedCall) {
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if err := e.store.EndProviderCall(rctx, c.ID, c.HTTPStatus, c.Took, c.Result); err != nil {
		e.logger.Warn("record provider call", "op", op.ID, "err", err)
	}
}

// callUnended is call with how the call ended left for the caller to
// record (nil when no call was made), for an answer recorded together
// with what it says (store.Outcome.Call).
func (e *Executor) callUnended(ctx context.Context, op *store.Operation, kind string, do func(context.Context) (payments.Receipt, error)) (payments.Receipt, *store.EndedCall, error) {
	var (
		id  int64
		err error
	)
	if kind == store.CallSubmit {
		id, err = e.store.BeginSubmit(ctx, op.ID)
	} else {
		id, err = e.store.BeginProviderCall(ctx, op.ID, kind)
	}
	if err != nil {
		return payments.Receipt{}, nil, fmt.Errorf("%w: %w", errNotCalled, err)
	}
	cctx, cancel := context.WithTimeout(ctx, e.cfg.ProviderTimeout)
	cctx, answer := payments.WithAnswer(cctx)
	start := time.Now()
	rc, cerr := do(cctx)
	took := time.Since(start)
	cancel()
	return rc, &store.EndedCall{ID: id, FoundCall: store.FoundCall{HTTPStatus: answer.Status, Took: took, Result: callResult(rc, cerr)}}, cerr
}

// callResult is what a provider call's answer meant, in words.
func callResult(rc payments.Receipt, err error) string {
	switch {
	case err == nil && rc.Status == payments.StatusSucceeded:
		return "refunded (reference " + rc.Ref + ")"
	case err == nil:
		return "declined: " + cmp.Or(rc.FailureReason, "no reason given")
	case errors.Is(err, payments.ErrNotFound):
		return "the provider has no such refund"
	}
	return err.Error()
}

// answered records the provider's answer to a submit, the call's end and,
// when the refund was made, the run's end, all in one transaction: the run
// ends without reading either again. A declined refund ends the run after.
func (e *Executor) answered(ctx context.Context, run *store.Run, op *store.Operation, rc payments.Receipt, call *store.EndedCall) (time.Duration, bool, error) {
	out := outcomeOf(rc)
	out.Call = call
	out.Refunded = func(r *store.Run) (store.Answer, []store.NewEvent) { return e.refundedWords(r, op, rc.Ref) }
	now, err := e.store.RecordOutcome(ctx, op.ID, out)
	if err != nil {
		e.endCall(ctx, op, *call) // the outcome's transaction did not
		return 0, false, ignoreDone(err)
	}
	if now.State == store.OpSucceeded {
		return 0, true, nil
	}
	_, done, err := e.ended(ctx, run, now)
	return 0, done, err
}

// operation returns the run's refund as its ledger holds it (with
// store.ErrAlreadyDone: the one just read, as asking the store to record
// it would only read it again under the lock), or records it now, after
// beginning and narrating the step (see settle for opless).
func (e *Executor) operation(ctx context.Context, run *store.Run, opless bool) (*store.Operation, error) {
	var ops []store.Operation
	if !opless {
		var err error
		if ops, err = e.store.OperationsByRun(ctx, run.ID); err != nil {
			return nil, err
		}
	}
	if i := slices.IndexFunc(ops, func(o store.Operation) bool { return o.Kind == store.KindRefund }); i >= 0 {
		return &ops[i], store.ErrAlreadyDone
	}
	if len(ops) == 0 {
		if !opless {
			if err := e.beginAttempt(ctx, run, stepSubmitting); err != nil {
				return nil, err
			}
		}
		if err := e.narrate(ctx, run, Facts{Stage: stepSubmitting, Language: run.Language,
			Amount: e.cfg.Answers.Money(run.Language, run.Amount, run.Currency)}); err != nil {
			return nil, err
		}
	}
	return e.store.SubmitOperation(ctx, run.ID)
}

// ended ends the run as its refund's known outcome says: refunded, or
// failed when the provider declined it. ended is false while the outcome
// is not known.
func (e *Executor) ended(ctx context.Context, run *store.Run, op *store.Operation) (ended, done bool, err error) {
	switch op.State {
	case store.OpSucceeded:
		return true, true, e.finishRefunded(ctx, run, op)
	case store.OpFailed:
		return true, false, e.finish(ctx, run, store.StateFailed, e.cfg.Answers.Declined(op.Amount, op.Currency, op.LastError))
	}
	return false, false, nil
}

// record commits the provider's receipt for op.
func (e *Executor) record(ctx context.Context, op *store.Operation, rc payments.Receipt) error {
	_, err := e.store.RecordOutcome(ctx, op.ID, outcomeOf(rc))
	return ignoreDone(err)
}

// outcomeOf is what the provider's receipt says of a refund.
func outcomeOf(rc payments.Receipt) store.Outcome {
	if rc.Status != payments.StatusSucceeded {
		return store.Outcome{State: store.OpFailed, Reason: cmp.Or(rc.FailureReason, "declined by the payment provider")}
	}
	return store.Outcome{State: store.OpSucceeded, ProviderRef: rc.Ref}
}

// cancel ends a run whose cancel came in time (not store.CancelTooLate,
// the rule RequestCancel answered it by): no call about its refund can
// have reached the provider, and none begins now (store.BeginSubmit
// refuses it). An operation the run has is looked up by its key first, so
// that the run ends saying what the provider confirmed: nothing, and the
// run ends canceled; or, against every expectation, a refund, which is
// recorded, and the run then ends as the provider says (too late for the
// cancel). A lookup the provider does not answer is asked again, backing
// off; the refund is never sent again. A cancel that came too late is
// not honoured here: the run goes on, and ends as the provider decides,
// completed with cancel.too_late (finishRefunded) or failed, never canceled.
func (e *Executor) cancel(ctx context.Context, log *slog.Logger, run *store.Run, ops []store.Operation) (time.Duration, bool, error) {
	for i := range ops {
		op := &ops[i]
		rc, err := e.lookup(ctx, op)
		switch {
		case errors.Is(err, payments.ErrNotFound):
			continue
		case err == nil && rc.Status == payments.StatusSucceeded:
			// Recorded, it makes the cancel too late: the next step ends
			// the run refunded, saying so.
			log.Error("cancel: the provider holds a refund under a key no call may have reached it with", "op", op.ID, "ref", rc.Ref)
			return 0, false, e.record(ctx, op, rc)
		case err == nil:
			// Declined: no money moved, and the cancel ends the run.
			if err := e.record(ctx, op, rc); err != nil {
				return 0, false, err
			}
			continue
		case ctx.Err() != nil, errors.Is(err, errNotCalled):
			return 0, false, err
		}
		n, nerr := e.store.NoteAttempt(ctx, op.ID, err.Error())
		if nerr != nil {
			return 0, false, nerr
		}
		wait := e.backoff(n)
		log.Warn("cancel: provider lookup failed; will retry", "op", op.ID, "attempt", n, "retry_in", wait, "err", err)
		return wait, true, nil
	}
	_, err := e.store.FinishCanceled(ctx, run.ID,
		"canceled before it reached the payment provider, which confirmed it made no refund", e.cfg.Answers.Canceled(len(ops) > 0))
	return 0, false, ignoreDone(err)
}

// beginAttempt records the start of a narrating step before it speaks, so
// a retried step's narration starts afresh on every page instead of
// continuing the text of the attempt that died.
func (e *Executor) beginAttempt(ctx context.Context, run *store.Run, step string) error {
	n, err := e.store.BeginAttempt(ctx, run.ID, step)
	if err == nil && n > 1 {
		e.logger.Info("step restarted", "run", run.ID, "step", step, "attempt", n)
	}
	return err
}

func (e *Executor) finishRefunded(ctx context.Context, run *store.Run, op *store.Operation) error {
	// Worded under the run's lock: the cancel may have come after the run
	// was claimed, up to the moment it ends.
	_, err := e.store.FinishRunAs(ctx, run.ID, store.StateCompleted, func(r *store.Run) (store.Answer, []store.NewEvent) {
		return e.refundedWords(r, op, op.ProviderRef.String)
	})
	return ignoreDone(err)
}

// refundedWords is a refunded run's final answer, as the run locked stands:
// a cancel that came is too late, and the words say so.
func (e *Executor) refundedWords(r *store.Run, op *store.Operation, ref string) (store.Answer, []store.NewEvent) {
	var extra []store.NewEvent
	if r.CancelRequested() {
		extra = append(extra, store.EventOf(store.CancelTooLatePayload{OperationID: op.ID}))
	}
	return e.cfg.Answers.Refunded(op.Amount, op.Currency, ref, r.CancelRequested()), extra
}

// finish ends the run in state with msg. A cancel that came in time
// keeps it from ending any way but canceled (store.ErrCancelRequested): it
// is left for the next step to honour, so the caller must not stop there.
func (e *Executor) finish(ctx context.Context, run *store.Run, state string, msg store.Answer) error {
	_, err := e.store.FinishRun(ctx, run.ID, state, msg)
	if errors.Is(err, store.ErrCancelRequested) {
		return nil
	}
	return ignoreDone(err)
}

// stepSubmitting is the step that gets the refund to a known outcome.
const stepSubmitting = "submitting"

// backoff is the wait before the nth retry: doubling from RetryBase, capped
// at RetryMax, then drawn at random from its upper half, so runs refused
// together do not all come back together.
func (e *Executor) backoff(n int) time.Duration {
	d := e.cfg.RetryBase
	for i := 1; i < n && d < e.cfg.RetryMax; i++ {
		d *= 2
	}
	d = min(d, e.cfg.RetryMax)
	return d/2 + rand.N(d/2+1)
}

func ignoreDone(err error) error {
	if errors.Is(err, store.ErrAlreadyDone) {
		return nil
	}
	return err
}
