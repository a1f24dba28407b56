package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"
	"golang.org/x/sync/errgroup"
)

// QueuedEvent is a business event in the outbox (outbound_queue), waiting
// to be fanned out to its destinations.
type QueuedEvent struct {
	ID            int64         `db:"id"`
	RunID         uuid.UUID     `db:"run_id"`
	Seq           int64         `db:"seq"`
	EventID       uuid.UUID     `db:"event_id"`
	Type          string        `db:"type"`
	CorrelationID uuid.UUID     `db:"correlation_id"`
	ParentRunID   uuid.NullUUID `db:"parent_run_id"`
	CreatedAt     time.Time     `db:"created_at"`
}

// Mail kinds (mails.kind).
const (
	MailEnded   = "ended"   // to the customer: their request ended
	MailWaiting = "waiting" // to an approver: a request waits for a decision
)

// NewMail is an email the outbound engine records in the mail ledger
// before it sends it. MessageID is deterministic (from the run, the kind
// and the recipient), so a resend after a crash carries the same one;
// (RunID, Kind, Recipient) is unique: one email per ending, per waiting
// request and per person.
type NewMail struct {
	MessageID string
	RunID     uuid.UUID // the request's root run
	Kind      string
	UserID    int64
	Recipient string
	Subject   string
	Body      string
}

// MailPlanner says which emails one business event causes (none, mostly):
// outbound's planner, which words them with the one words table.
type MailPlanner interface {
	Plan(ctx context.Context, ev QueuedEvent) ([]NewMail, error)
}

// Mail is a row of the mail ledger.
type Mail struct {
	MessageID   string         `db:"message_id"`
	RunID       uuid.UUID      `db:"run_id"`
	Kind        string         `db:"kind"`
	UserID      sql.NullInt64  `db:"user_id"`
	Recipient   string         `db:"recipient"`
	Subject     string         `db:"subject"`
	Body        string         `db:"body"`
	State       string         `db:"state"` // pending, sent, failed
	Attempts    int            `db:"attempts"`
	NextAt      time.Time      `db:"next_at"`
	LeasedUntil sql.NullTime   `db:"leased_until"`
	LastError   sql.NullString `db:"last_error"`
	CreatedAt   time.Time      `db:"created_at"`
	SentAt      sql.NullTime   `db:"sent_at"`
}

// fanOutLock is the advisory lock one dispatcher holds while it fans out:
// one at a time across every process, so a run's events reach their
// destinations in seq order ("refundd outbound" as a number).
const fanOutLock int64 = 0x7266_6464_6f75_7462

// FanOut moves up to limit events from the outbox to their destinations,
// oldest first: a webhook delivery for every endpoint that wants the
// event's type and existed when it was committed, and the emails planner
// plans (planner may be nil: no email). It plans first, outside any
// transaction (the planner reads runs through the pool, and a fan-out
// transaction that waited for them held the lock every dispatcher needs);
// then, in one transaction under the lock, it writes the deliveries and
// the emails of the events still in the outbox and removes them from it,
// so each is fanned out once. Only one dispatcher works at a time: when
// another holds the lock, FanOut returns 0 at once. It returns how many
// events it fanned out.
func (s *Store) FanOut(ctx context.Context, limit int, planner MailPlanner) (int, error) {
	// A dispatcher at work now has these events: leave them to it.
	var free bool
	if err := s.db.GetContext(ctx, &free, `SELECT pg_try_advisory_xact_lock($1)`, fanOutLock); err != nil {
		return 0, fmt.Errorf("store: fan out: lock: %w", err)
	}
	if !free {
		return 0, nil
	}
	var evs []QueuedEvent
	if err := s.db.SelectContext(ctx, &evs, `SELECT id, run_id, seq, event_id, type, correlation_id, parent_run_id, created_at
        FROM outbound_queue ORDER BY id LIMIT $1`, limit); err != nil {
		return 0, fmt.Errorf("store: fan out: read outbox: %w", err)
	}
	if len(evs) == 0 {
		return 0, nil
	}
	planned, err := planAll(ctx, planner, evs)
	if err != nil {
		return 0, err
	}
	ids := make([]int64, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	var n int
	err = s.inTx(ctx, func(tx *txn) error {
		var locked bool
		if err := tx.GetContext(ctx, &locked, `SELECT pg_try_advisory_xact_lock($1)`, fanOutLock); err != nil {
			return fmt.Errorf("store: fan out: lock: %w", err)
		}
		if !locked {
			return nil
		}
		// A later statement than the lock's: it sees every delete the
		// previous dispatcher committed before it let go. What another
		// dispatcher fanned out since the read is not here any more.
		var left []int64
		if err := tx.SelectContext(ctx, &left, `SELECT id FROM outbound_queue WHERE id = ANY ($1) ORDER BY id`, pq.Array(ids)); err != nil {
			return fmt.Errorf("store: fan out: read outbox: %w", err)
		}
		if len(left) == 0 {
			return nil
		}
		// An event behind one of its run's that waits for a retry is due
		// no sooner than that one: the claims never read it before.
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (endpoint_id, run_id, seq, event_id, type, event_at, next_at)
            SELECT e.id, q.run_id, q.seq, q.event_id, q.type, q.created_at,
                GREATEST(now(), (SELECT max(p.next_at) FROM webhook_deliveries p
                    WHERE p.endpoint_id = e.id AND p.run_id = q.run_id AND p.state = 'pending'))
            FROM outbound_queue q JOIN webhook_endpoints e
              ON (e.event_types IS NULL OR cardinality(e.event_types) = 0 OR q.type = ANY (e.event_types))
             AND e.created_at <= q.created_at
            WHERE q.id = ANY ($1)
            ON CONFLICT DO NOTHING`, pq.Array(left)); err != nil {
			return fmt.Errorf("store: fan out: deliveries: %w", err)
		}
		var mails []NewMail
		for _, id := range left {
			mails = append(mails, planned[id]...)
		}
		if err := recordMails(ctx, tx, mails); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM outbound_queue WHERE id = ANY ($1)`, pq.Array(left)); err != nil {
			return fmt.Errorf("store: fan out: drain outbox: %w", err)
		}
		n = len(left)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// planners is how many events FanOut plans at once: each plan is a few
// reads, which wait for the pool's connections behind the runs' work.
const planners = 8

// planAll is the emails planner plans for each of evs, by outbox ID.
func planAll(ctx context.Context, planner MailPlanner, evs []QueuedEvent) (map[int64][]NewMail, error) {
	planned := make(map[int64][]NewMail, len(evs))
	if planner == nil {
		return planned, nil
	}
	var mu sync.Mutex
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(planners)
	for _, ev := range evs {
		g.Go(func() error {
			mails, err := planner.Plan(ctx, ev)
			if err != nil {
				return fmt.Errorf("store: fan out: plan mail of %s %d: %w", ev.RunID, ev.Seq, err)
			}
			mu.Lock()
			planned[ev.ID] = mails
			mu.Unlock()
			return nil
		})
	}
	return planned, g.Wait()
}

// Delivery is a webhook delivery a worker leased to send: where, signed
// with what, and the event exactly as the API streams it.
type Delivery struct {
	EndpointID uuid.UUID
	URL        string
	// Secrets sign the delivery: the endpoint's current secret, and its
	// previous one while a rotation overlaps.
	Secrets []string
	Event   Event
	// Attempts were made before this one.
	Attempts int
	// Resend: an admin asked to send an acknowledged delivery again; it is
	// sent outside the run's order and its outcome changes no state.
	Resend bool
	// Pruned: retention removed the event before it was delivered (Event
	// holds only its run, seq and ID); there is nothing left to send.
	Pruned bool
	// Follows: the delivery is in the lane of the one before it in the
	// claim (the same endpoint and run, the next pending seq): it is sent
	// only once that one is acknowledged.
	Follows bool
}

// DeliveryClaim says how many deliveries a worker can take now.
type DeliveryClaim struct {
	Limit int           // deliveries in all
	Lease time.Duration // how long the worker holds each
	// PerEndpoint caps the deliveries of one endpoint; Busy are the ones
	// the worker already has in flight, by endpoint (an endpoint with
	// PerEndpoint of them is not claimed from).
	PerEndpoint int
	Busy        map[uuid.UUID]int
	// Lane is how many of a run's pending deliveries to an endpoint one
	// claim may lease together, in seq order, as one lane (one of Limit):
	// the worker sends them one after the other. 0 or 1: one at a time.
	Lane int
}

// claimDeliveriesSQL leases due deliveries. A pending delivery is due when
// its time has come, no lease holds it, its endpoint is enabled, and no
// earlier event of its run still waits for that endpoint: per run in seq
// order, runs in parallel. A resend an admin asked for is due at its
// resend_at, in no order. Each endpoint gives at most its room, oldest due
// first; a disabled endpoint's backlog is never read. Behind each head it
// leases its lane: the run's next pending deliveries to that endpoint, in
// seq order, up to the first that is not due or is leased (none are
// skipped); they count as their head's one of the limit.
const claimDeliveriesSQL = `
WITH room AS (
    SELECT * FROM unnest($3::uuid[], $4::int[]) AS r(endpoint_id, room)
), eps AS (
    SELECT * FROM (
        SELECT e.id, LEAST(COALESCE(room.room, $5), $1) AS room
        FROM webhook_endpoints e LEFT JOIN room ON room.endpoint_id = e.id
        WHERE e.disabled_at IS NULL) e
    WHERE room > 0
), heads AS (
    SELECT h.endpoint_id, h.run_id, h.seq, false AS resend, h.next_at AS due_at
    FROM eps CROSS JOIN LATERAL (
        SELECT d.endpoint_id, d.run_id, d.seq, d.next_at FROM webhook_deliveries d
        WHERE d.endpoint_id = eps.id AND d.state = 'pending' AND d.next_at <= now()
          AND (d.leased_until IS NULL OR d.leased_until < now())
          AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p
              WHERE p.endpoint_id = d.endpoint_id AND p.run_id = d.run_id AND p.seq < d.seq AND p.state = 'pending')
        ORDER BY d.next_at
        LIMIT eps.room
        FOR UPDATE OF d SKIP LOCKED
    ) h
), resends AS (
    SELECT d.endpoint_id, d.run_id, d.seq, true AS resend, d.resend_at AS due_at
    FROM webhook_deliveries d JOIN eps ON eps.id = d.endpoint_id
    WHERE d.resend_at <= now() AND d.state <> 'pending' AND (d.leased_until IS NULL OR d.leased_until < now())
    ORDER BY d.resend_at
    LIMIT $1
    FOR UPDATE OF d SKIP LOCKED
), picked AS (
    SELECT * FROM (SELECT * FROM heads UNION ALL SELECT * FROM resends) c
    ORDER BY due_at
    LIMIT $1
), lanes AS (
    SELECT f.endpoint_id, f.run_id, f.seq, false AS resend, true AS follows
    FROM picked h CROSS JOIN LATERAL (
        SELECT n.endpoint_id, n.run_id, n.seq,
            bool_and(n.next_at <= now() AND (n.leased_until IS NULL OR n.leased_until < now())) OVER (ORDER BY n.seq) AS ready
        FROM (SELECT d.endpoint_id, d.run_id, d.seq, d.next_at, d.leased_until FROM webhook_deliveries d
            WHERE d.endpoint_id = h.endpoint_id AND d.run_id = h.run_id AND d.seq > h.seq AND d.state = 'pending'
            ORDER BY d.seq
            LIMIT $6) n
    ) f
    WHERE NOT h.resend AND f.ready
), claimed AS (
    SELECT endpoint_id, run_id, seq, resend, false AS follows FROM picked
    UNION ALL SELECT * FROM lanes
), leased AS (
    UPDATE webhook_deliveries d SET leased_until = now() + $2::interval
    FROM claimed c WHERE d.endpoint_id = c.endpoint_id AND d.run_id = c.run_id AND d.seq = c.seq
    RETURNING d.endpoint_id, d.run_id, d.seq, d.event_id, d.attempts, c.resend, c.follows
)
SELECT l.attempts, l.resend, l.follows, ev.run_id IS NULL AS pruned,
    e.id, e.url, e.description, e.event_types, e.secret, e.previous_secret, e.previous_until,
    e.created_by, e.created_at, e.disabled_at, e.disabled_reason, e.failing_since,
    l.run_id AS "ev.run_id", ev.parent_run_id AS "ev.parent_run_id", COALESCE(ev.correlation_id, l.run_id) AS "ev.correlation_id",
    l.seq AS "ev.seq", l.event_id AS "ev.event_id", COALESCE(ev.type, '') AS "ev.type", COALESCE(ev.class, '') AS "ev.class",
    COALESCE(ev.payload, 'null'::jsonb) AS "ev.payload", COALESCE(ev.created_at, now()) AS "ev.created_at"
FROM leased l
JOIN webhook_endpoints e ON e.id = l.endpoint_id
LEFT JOIN run_events ev ON ev.run_id = l.run_id AND ev.seq = l.seq
ORDER BY l.endpoint_id, l.run_id, l.resend, l.seq`

// ClaimDeliveries leases the deliveries due now, up to c's limits, for
// c.Lease (FOR UPDATE SKIP LOCKED: any number of workers claim side by
// side). A lane's deliveries come in seq order right after its head, each
// marked Follows. The worker records each one's outcome (RecordDeliveries), which
// ends its lease; a worker that dies leaves it to be claimed again once
// the lease runs out.
func (s *Store) ClaimDeliveries(ctx context.Context, c DeliveryClaim) ([]Delivery, error) {
	if c.Limit <= 0 {
		return nil, nil
	}
	var busyIDs []string
	var rooms []int64
	for id, n := range c.Busy {
		busyIDs, rooms = append(busyIDs, id.String()), append(rooms, int64(c.PerEndpoint-n))
	}
	var rows []struct {
		Attempts int  `db:"attempts"`
		Resend   bool `db:"resend"`
		Follows  bool `db:"follows"`
		Pruned   bool `db:"pruned"`
		WebhookEndpoint
		Ev Event `db:"ev"`
	}
	err := s.db.SelectContext(ctx, &rows, claimDeliveriesSQL, c.Limit, interval(c.Lease),
		pq.Array(busyIDs), pq.Array(rooms), c.PerEndpoint, max(c.Lane-1, 0))
	if err != nil {
		return nil, fmt.Errorf("store: claim deliveries: %w", err)
	}
	now := time.Now()
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = Delivery{EndpointID: r.ID, URL: r.URL, Secrets: r.Secrets(now), Event: r.Ev,
			Attempts: r.Attempts, Resend: r.Resend, Pruned: r.Pruned, Follows: r.Follows}
	}
	return out, nil
}

// Outcomes of one delivery attempt (DeliveryResult.Outcome).
const (
	DeliveryDelivered = "delivered" // a 2xx: acknowledged
	DeliveryRetry     = "retry"     // anything else: tried again at NextAt
	DeliveryGone      = "gone"      // 410 Gone: the endpoint is disabled
	DeliveryPruned    = "pruned"    // the event is no longer kept: skipped
	// DeliveryUnsent: not attempted, its lane stopped before it (an
	// earlier event failed, the lease's time or the engine ran out); its
	// lease ends and nothing else changes.
	DeliveryUnsent = "unsent"
)

// DeliveryResult is what one attempt of a claimed delivery came to.
type DeliveryResult struct {
	EndpointID uuid.UUID
	RunID      uuid.UUID
	Seq        int64
	EventID    uuid.UUID
	Resend     bool
	Outcome    string
	Status     int    // the HTTP status; 0 when no answer came
	Error      string // why it failed, for the admin; "" when delivered
	Duration   time.Duration
	At         time.Time // when the attempt began
	NextAt     time.Time // the next try, for DeliveryRetry
}

// recordDeliveriesSQL ends the leases of the attempted deliveries and
// records each attempt. A delivery another worker delivered meanwhile (its
// lease ran out) stays delivered; a resend changes no state, and a failed
// resend is tried again at its next time.
const recordDeliveriesSQL = `
WITH o AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::bool[], $5::text[], $6::int[], $7::text[],
        $8::int[], $9::timestamptz[], $10::timestamptz[])
        AS o(endpoint_id, run_id, seq, resend, outcome, status, error, duration_ms, at, next_at)
), u AS (
    UPDATE webhook_deliveries d SET
        state = CASE WHEN o.outcome = 'delivered' AND d.state = 'pending' THEN 'delivered'
                     WHEN o.outcome = 'pruned' AND d.state = 'pending' THEN 'skipped' ELSE d.state END,
        delivered_at = CASE WHEN o.outcome = 'delivered' AND d.state = 'pending' THEN now() ELSE d.delivered_at END,
        next_at = CASE WHEN o.outcome = 'retry' AND NOT o.resend AND d.state = 'pending' THEN o.next_at ELSE d.next_at END,
        resend_at = CASE WHEN o.resend AND o.outcome = 'retry' THEN o.next_at
                         WHEN o.resend OR o.outcome = 'delivered' THEN NULL ELSE d.resend_at END,
        attempts = d.attempts + CASE WHEN o.outcome = 'pruned' THEN 0 ELSE 1 END,
        last_status = NULLIF(o.status, 0), last_error = NULLIF(o.error, ''), last_duration_ms = o.duration_ms,
        last_attempt_at = o.at, leased_until = NULL
    FROM o
    WHERE d.endpoint_id = o.endpoint_id AND d.run_id = o.run_id AND d.seq = o.seq
    RETURNING d.endpoint_id, d.run_id, d.seq, d.event_id, d.attempts
)
INSERT INTO webhook_attempts (endpoint_id, run_id, seq, event_id, attempt, status, error, duration_ms, next_at, at)
SELECT u.endpoint_id, u.run_id, u.seq, u.event_id, u.attempts, NULLIF(o.status, 0), NULLIF(o.error, ''), o.duration_ms,
    CASE WHEN o.outcome = 'retry' THEN o.next_at END, o.at
FROM u JOIN o ON o.endpoint_id = u.endpoint_id AND o.run_id = u.run_id AND o.seq = u.seq
WHERE o.outcome <> 'pruned'`

// RecordDeliveries records the outcomes of many attempts in one
// transaction: the deliveries' new states and leases ended, an attempt row
// each, and what they say of their endpoints: a success clears an
// endpoint's failing_since, a failure sets it if unset, an endpoint failing
// for disableAfter (or answering 410 Gone) is disabled. An unsent
// delivery's lease ends and nothing else. It returns the endpoints it
// disabled.
func (s *Store) RecordDeliveries(ctx context.Context, results []DeliveryResult, disableAfter time.Duration) ([]uuid.UUID, error) {
	if len(results) == 0 {
		return nil, nil
	}
	var tried, unsent []DeliveryResult
	for _, r := range results {
		if r.Outcome == DeliveryUnsent {
			unsent = append(unsent, r)
		} else {
			tried = append(tried, r)
		}
	}
	var disabled []uuid.UUID
	err := s.inTx(ctx, func(tx *txn) error {
		if len(tried) > 0 {
			a := deliveryArraysOf(tried)
			if _, err := tx.ExecContext(ctx, recordDeliveriesSQL, a.eps, a.runs, a.seqs, a.resends,
				a.outcomes, a.statuses, a.errs, a.millis, a.ats, a.nexts); err != nil {
				return fmt.Errorf("store: record deliveries: %w", err)
			}
		}
		if len(unsent) > 0 {
			a := deliveryArraysOf(unsent)
			if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries d SET leased_until = NULL
                FROM unnest($1::uuid[], $2::uuid[], $3::bigint[]) AS o(endpoint_id, run_id, seq)
                WHERE d.endpoint_id = o.endpoint_id AND d.run_id = o.run_id AND d.seq = o.seq`,
				a.eps, a.runs, a.seqs); err != nil {
				return fmt.Errorf("store: record deliveries: unsent: %w", err)
			}
		}
		// The events behind a delivery that waits for a retry wait as
		// long, so that the claims do not read them at every turn; once
		// it is delivered they are due. A run's last attempt in the batch
		// says which (a lane stops at its first failure). A later
		// statement: a fan-out that committed meanwhile is seen.
		a := deliveryArraysOf(lastTried(tried))
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries d
            SET next_at = CASE WHEN o.outcome = 'retry' THEN o.next_at ELSE now() END
            FROM unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::text[], $5::timestamptz[])
                AS o(endpoint_id, run_id, seq, outcome, next_at)
            WHERE d.endpoint_id = o.endpoint_id AND d.run_id = o.run_id AND d.seq > o.seq
              AND d.state = 'pending'
              AND ((o.outcome = 'retry' AND d.next_at < o.next_at)
                OR (o.outcome IN ('delivered', 'pruned') AND d.next_at > now()))`,
			a.eps, a.runs, a.seqs, a.outcomes, a.nexts); err != nil {
			return fmt.Errorf("store: record deliveries: hold back: %w", err)
		}
		var err error
		disabled, err = noteEndpoints(ctx, tx, endpointNewsOf(tried), disableAfter)
		return err
	})
	if err != nil {
		return nil, err
	}
	return disabled, nil
}

// lastTried is, of each run's deliveries to an endpoint in results (not
// resends), the one with the highest seq.
func lastTried(results []DeliveryResult) []DeliveryResult {
	type key struct{ ep, run uuid.UUID }
	last := map[key]int{}
	var out []DeliveryResult
	for _, r := range results {
		if r.Resend {
			continue
		}
		k := key{r.EndpointID, r.RunID}
		if i, ok := last[k]; !ok {
			last[k] = len(out)
			out = append(out, r)
		} else if r.Seq > out[i].Seq {
			out[i] = r
		}
	}
	return out
}

// deliveryArrays are results as the columns of unnest's arguments.
type deliveryArrays struct {
	eps, runs, seqs, resends, outcomes, statuses, errs, millis, ats, nexts any
}

func deliveryArraysOf(results []DeliveryResult) deliveryArrays {
	n := len(results)
	var (
		eps, runs        = make([]string, n), make([]string, n)
		seqs             = make([]int64, n)
		resends          = make([]bool, n)
		outcomes, errs   = make([]string, n), make([]string, n)
		statuses, millis = make([]int64, n), make([]int64, n)
		ats, nexts       = make([]string, n), make([]string, n)
	)
	for i, r := range results {
		eps[i], runs[i], seqs[i], resends[i] = r.EndpointID.String(), r.RunID.String(), r.Seq, r.Resend
		outcomes[i], errs[i], statuses[i], millis[i] = r.Outcome, r.Error, int64(r.Status), r.Duration.Milliseconds()
		at, next := cmp.Or(r.At, time.Now()), r.NextAt
		if next.IsZero() {
			next = at
		}
		ats[i], nexts[i] = at.UTC().Format(time.RFC3339Nano), next.UTC().Format(time.RFC3339Nano)
	}
	return deliveryArrays{pq.Array(eps), pq.Array(runs), pq.Array(seqs), pq.Array(resends), pq.Array(outcomes),
		pq.Array(statuses), pq.Array(errs), pq.Array(millis), pq.Array(ats), pq.Array(nexts)}
}

// endpointNews is what a batch of attempts says of each endpoint.
type endpointNews struct {
	ok bool // a success came
	// failingSince is the first failure after the batch's last success
	// (zero if none): the endpoint fails since then, or since earlier if
	// no success came.
	failingSince time.Time
	gone         bool
}

func endpointNewsOf(results []DeliveryResult) map[uuid.UUID]*endpointNews {
	sorted := slices.Clone(results)
	slices.SortStableFunc(sorted, func(a, b DeliveryResult) int { return a.At.Compare(b.At) })
	news := map[uuid.UUID]*endpointNews{}
	for _, r := range sorted {
		n := news[r.EndpointID]
		if n == nil {
			n = &endpointNews{}
			news[r.EndpointID] = n
		}
		switch r.Outcome {
		case DeliveryDelivered:
			n.ok, n.failingSince = true, time.Time{}
		case DeliveryRetry:
			if n.failingSince.IsZero() {
				n.failingSince = cmp.Or(r.At, time.Now())
			}
		case DeliveryGone:
			n.gone = true
		}
	}
	return news
}

// noteEndpoints writes what a batch of attempts says of their endpoints
// and disables those gone or failing for disableAfter; it returns those
// it disabled.
func noteEndpoints(ctx context.Context, tx *txn, news map[uuid.UUID]*endpointNews, disableAfter time.Duration) ([]uuid.UUID, error) {
	var ids []string
	var oks, gones []bool
	var since []sql.NullString
	for id, n := range news {
		ids, oks, gones = append(ids, id.String()), append(oks, n.ok), append(gones, n.gone)
		s := sql.NullString{String: n.failingSince.UTC().Format(time.RFC3339Nano), Valid: !n.failingSince.IsZero()}
		since = append(since, s)
	}
	var disabled []uuid.UUID
	// One UPDATE: a row a statement has updated cannot be updated again
	// by the same statement, so the new failing_since and what it means
	// are computed beside it, from the row as it was.
	err := tx.SelectContext(ctx, &disabled, `
WITH n AS (
    SELECT n.id, n.gone, cur.disabled_at IS NULL AS enabled, CASE
            WHEN n.since IS NULL AND n.ok THEN NULL
            WHEN n.since IS NULL THEN cur.failing_since
            WHEN n.ok THEN n.since
            ELSE COALESCE(cur.failing_since, n.since) END AS failing_since
    FROM unnest($1::uuid[], $2::bool[], $3::timestamptz[], $4::bool[]) AS n(id, ok, since, gone)
    JOIN webhook_endpoints cur ON cur.id = n.id
), x AS (
    SELECT n.*, COALESCE(n.enabled AND (n.gone OR n.failing_since < now() - $5::interval), false) AS disable FROM n
), u AS (
    UPDATE webhook_endpoints e SET failing_since = x.failing_since,
        disabled_at = CASE WHEN x.disable THEN now() ELSE e.disabled_at END,
        disabled_reason = CASE WHEN NOT x.disable THEN e.disabled_reason
            WHEN x.gone THEN '`+WebhookGone+`' ELSE '`+WebhookFailing+`' END
    FROM x
    WHERE e.id = x.id
    RETURNING e.id, x.disable
)
SELECT id FROM u WHERE disable`, pq.Array(ids), pq.Array(oks), pq.Array(since), pq.Array(gones), interval(disableAfter))
	if err != nil {
		return nil, fmt.Errorf("store: note webhook endpoints: %w", err)
	}
	return disabled, nil
}

// WebhookLag is, for every endpoint, when its oldest event not yet
// acknowledged was committed (zero when it has none): its lag is the time
// since. Each endpoint is read through its own index.
func (s *Store) WebhookLag(ctx context.Context) (map[uuid.UUID]time.Time, error) {
	var rows []struct {
		ID     uuid.UUID    `db:"id"`
		Oldest sql.NullTime `db:"oldest"`
	}
	err := s.db.SelectContext(ctx, &rows, `SELECT e.id, (SELECT min(d.event_at) FROM webhook_deliveries d
            WHERE d.endpoint_id = e.id AND d.state = 'pending') AS oldest
        FROM webhook_endpoints e`)
	if err != nil {
		return nil, fmt.Errorf("store: webhook lag: %w", err)
	}
	out := make(map[uuid.UUID]time.Time, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Oldest.Time
	}
	return out, nil
}
