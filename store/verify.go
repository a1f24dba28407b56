package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
)

// invariant is one rule checked over the whole database: a query that
// returns one human-readable line per violation.
type invariant struct {
	name  string
	query string
}

// seqEpochGapSQL is seqEpochGap in a query's text.
var seqEpochGapSQL = strconv.Itoa(seqEpochGap)

var invariants = []invariant{
	// Seqs a restart skipped (seq_gaps, seqEpochGap each) hold no event.
	{"contiguous seqs above the replay floor, but for the gaps restarts skipped", `
SELECT format('run %s: %s events above floor %s, want %s (last_seq %s, highest stored %s, skipped after %s)',
              r.id, count(e.seq), r.replay_floor, r.last_seq - r.replay_floor - gap.n, r.last_seq, max(e.seq), r.seq_gaps)
FROM runs r
CROSS JOIN LATERAL (
    SELECT COALESCE(sum(GREATEST(0, LEAST(g + ` + seqEpochGapSQL + `, r.last_seq) - GREATEST(g, r.replay_floor))), 0) AS n
    FROM unnest(r.seq_gaps) g
) gap
LEFT JOIN run_events e ON e.run_id = r.id AND e.seq > r.replay_floor
GROUP BY r.id, gap.n
HAVING count(e.seq) <> r.last_seq - r.replay_floor - gap.n
    OR COALESCE(max(e.seq), r.replay_floor) <> r.last_seq
    OR bool_or(EXISTS (SELECT 1 FROM unnest(r.seq_gaps) g WHERE e.seq > g AND e.seq <= g + ` + seqEpochGapSQL + `))`},
	{"event class follows type", `
SELECT format('run %s seq %s: %s is %s', run_id, seq, type, class) FROM run_events
WHERE (type IN ('narration.delta', 'step.attempt')) <> (class = 'presentation')`},
	{"one terminal event per finished run, matching its state", `
SELECT format('run %s is %s with terminal events [%s]', r.id, r.state, string_agg(e.type, ', '))
FROM runs r LEFT JOIN run_events e ON e.run_id = r.id
    AND e.type IN ('run.completed', 'run.failed', 'run.canceled')
GROUP BY r.id
HAVING count(e.seq) > 1
    OR (count(e.seq) = 1 AND min(e.type) <> CASE r.state WHEN 'completed' THEN 'run.completed'
        WHEN 'failed' THEN 'run.failed' WHEN 'canceled' THEN 'run.canceled' END)
    OR (count(e.seq) = 0 AND r.state IN ('completed', 'failed', 'canceled')
        -- the terminal event may be gone only if business history was pruned
        AND EXISTS (SELECT 1 FROM run_events c WHERE c.run_id = r.id AND c.seq = 1))
    OR (count(e.seq) = 1 AND r.state NOT IN ('completed', 'failed', 'canceled'))`},
	{"one final message per finished run", `
SELECT format('run %s is %s but has no final message', r.id, r.state) FROM runs r
WHERE r.state IN ('completed', 'failed', 'canceled')
  AND NOT EXISTS (SELECT 1 FROM final_messages m WHERE m.run_id = r.id)
UNION ALL
SELECT format('run %s is %s but already has a final message', r.id, r.state) FROM runs r
JOIN final_messages m ON m.run_id = r.id
WHERE r.state NOT IN ('completed', 'failed', 'canceled')`},
	{"refunds of an order within what was paid", `
SELECT format('order %s: operations total %s, paid %s', o.id, sum(op.amount), o.amount)
FROM orders o JOIN operations op ON op.order_id = o.id AND op.state <> 'failed'
GROUP BY o.id HAVING sum(op.amount) > o.amount
UNION ALL
SELECT format('order %s: live and completed runs reserve %s, paid %s', o.id, sum(r.amount), o.amount)
FROM orders o JOIN runs r ON r.order_id = o.id AND r.state NOT IN ('failed', 'canceled')
GROUP BY o.id HAVING sum(r.amount) > o.amount`},
	{"every succeeded operation has a provider reference", `
SELECT format('operation %s succeeded without a provider reference', id) FROM operations
WHERE state = 'succeeded' AND COALESCE(provider_ref, '') = ''`},
	{"a canceled run's refund never reached the provider: each of its operations is failed and unsent", `
SELECT format('run %s is canceled but its operation %s is %s%s', r.id, op.id, op.state,
              CASE WHEN op.unsent THEN '' ELSE ' and may have reached the provider' END)
FROM runs r JOIN operations op ON op.run_id = r.id
WHERE r.state = 'canceled' AND (op.state <> 'failed' OR NOT op.unsent)`},
	{"a completed refund run has a succeeded operation", `
SELECT format('run %s completed but its operation is %s', r.id, op.state) FROM runs r
JOIN operations op ON op.run_id = r.id
WHERE r.state = 'completed' AND op.state <> 'succeeded'`},
	{"a family's parent has ended exactly when every child has", `
SELECT format('request %s is %s while %s of its %s children have ended', p.id, p.state,
              count(c.id) FILTER (WHERE c.state IN ('completed', 'failed', 'canceled')), count(c.id))
FROM runs p LEFT JOIN runs c ON c.parent_run_id = p.id
WHERE p.kind = 'request'
GROUP BY p.id
HAVING count(c.id) = 0
    OR (p.state IN ('completed', 'failed', 'canceled')) <> bool_and(c.state IN ('completed', 'failed', 'canceled'))`},
	{"one child.started per child, and one child.finished per ended child, in its parent's log", `
SELECT format('child %s of %s (%s): %s child.started, %s child.finished', c.id, c.parent_run_id, c.state, x.started, x.finished)
FROM runs c CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE e.type = 'child.started') AS started,
           count(*) FILTER (WHERE e.type = 'child.finished') AS finished
    FROM run_events e WHERE e.run_id = c.parent_run_id AND e.payload->>'child_run_id' = c.id::text
) x
WHERE c.parent_run_id IS NOT NULL
  AND (x.started <> 1 OR x.finished <> CASE WHEN c.state IN ('completed', 'failed', 'canceled') THEN 1 ELSE 0 END)`},
	{"a family is one request and its refunds: the children's amounts sum to it, and what each child.finished says was refunded its ledger confirms", `
SELECT format('child %s of %s: its parent is %s, correlation %s', c.id, c.parent_run_id, COALESCE(p.kind, 'missing'), c.correlation_id)
FROM runs c LEFT JOIN runs p ON p.id = c.parent_run_id
WHERE c.parent_run_id IS NOT NULL AND (p.id IS NULL OR p.kind <> 'request' OR p.parent_run_id IS NOT NULL
    OR c.correlation_id <> p.correlation_id OR c.kind <> 'refund' OR c.owner_id <> p.owner_id)
UNION ALL
SELECT format('request %s asks for %s, its children for %s', p.id, p.amount, sum(c.amount))
FROM runs p JOIN runs c ON c.parent_run_id = p.id
WHERE p.kind = 'request' GROUP BY p.id HAVING sum(c.amount) <> p.amount
UNION ALL
SELECT format('child %s: child.finished says %s refunded, its ledger %s', c.id, e.payload->>'refunded', COALESCE(op.amount, 0))
FROM runs c JOIN run_events e ON e.run_id = c.parent_run_id AND e.type = 'child.finished' AND e.payload->>'child_run_id' = c.id::text
LEFT JOIN operations op ON op.run_id = c.id AND op.state = 'succeeded'
WHERE (e.payload->>'refunded')::bigint <> COALESCE(op.amount, 0)`},
	{"a run asks again only for its owner's run that ended without a refund", `
SELECT format('run %s asks again for run %s, which %s', n.id, o.id, CASE
    WHEN o.owner_id <> n.owner_id THEN 'is another owner''s'
    WHEN o.state NOT IN ('completed', 'failed', 'canceled') THEN 'has not ended (' || o.state || ')'
    ELSE 'refunded all it asked for' END)
FROM runs n JOIN runs o ON o.id = n.retry_of
WHERE o.owner_id <> n.owner_id
   OR o.state NOT IN ('completed', 'failed', 'canceled')
   OR (o.kind = 'refund' AND o.state = 'completed')
   OR (o.kind = 'request' AND NOT EXISTS (SELECT 1 FROM runs c WHERE c.parent_run_id = o.id AND c.state <> 'completed'))`},
	// Decisions end: one way only, and an expired one moved no money.
	{"a decision is approved or expired, never both: an expired one ended its run canceled, by no one, after its deadline, with nothing sent to the provider", `
SELECT format('run %s (%s): approval %s by %s at %s (deadline %s), %s approval.granted, %s approval.expired, %s operations',
              r.id, r.state, COALESCE(a.decision, 'undecided'), COALESCE(a.decided_by::text, 'no one'), a.decided_at, a.deadline,
              x.granted, x.expired, x.ops)
FROM approvals a JOIN runs r ON r.id = a.run_id
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE e.type = 'approval.granted') AS granted,
           count(*) FILTER (WHERE e.type = 'approval.expired') AS expired,
           (SELECT count(*) FROM operations op WHERE op.run_id = r.id) AS ops
    FROM run_events e WHERE e.run_id = r.id AND e.type IN ('approval.granted', 'approval.expired')
) x
WHERE x.granted + x.expired > 1
   OR (x.expired = 1 AND a.decision IS DISTINCT FROM 'expired')
   -- the event may be gone only if business history was pruned
   OR (a.decision = 'expired' AND x.expired = 0 AND EXISTS (SELECT 1 FROM run_events c WHERE c.run_id = r.id AND c.seq = 1))
   OR (a.decision = 'expired' AND (r.state <> 'canceled' OR a.decided_by IS NOT NULL OR a.decided_at < a.deadline OR x.ops > 0))`},
}

// outboundInvariants are the outbound engine's: what a webhook endpoint
// acknowledged is a prefix of each run's events it wants (DESIGN rule 18).
var outboundInvariants = []invariant{
	{"no webhook endpoint's cursor is past an event it has not acknowledged", `
SELECT format('webhook %s: run %s seq %s acknowledged while seq %s waits', d.endpoint_id, d.run_id, d.seq, p.seq)
FROM webhook_deliveries d JOIN webhook_deliveries p
    ON p.endpoint_id = d.endpoint_id AND p.run_id = d.run_id AND p.seq < d.seq AND p.state = 'pending'
WHERE d.state = 'delivered'
UNION ALL
SELECT format('webhook %s: run %s seq %s (%s) was never queued for it', w.id, e.run_id, e.seq, e.type)
FROM webhook_endpoints w JOIN run_events e ON e.class = 'business' AND e.created_at >= w.created_at
    AND (w.event_types IS NULL OR e.type = ANY (w.event_types))
WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = w.id AND d.run_id = e.run_id AND d.seq = e.seq)
  AND NOT EXISTS (SELECT 1 FROM outbound_queue q WHERE q.run_id = e.run_id AND q.seq = e.seq)`},
}

// mailInvariants hold when email is configured (WithMailCheck), from the
// first email the ledger holds on: a request that ended, or began to wait
// for a decision, once its event was fanned out, has its email.
var mailInvariants = []invariant{
	{"every ended request has its email recorded", `
SELECT format('request %s ended %s at %s without an email to its customer', r.id, r.state, r.finished_at)
FROM runs r
WHERE r.parent_run_id IS NULL AND r.state IN ('completed', 'failed', 'canceled')
  AND r.finished_at >= (SELECT min(created_at) FROM mails)
  AND NOT EXISTS (SELECT 1 FROM mails m WHERE m.run_id = r.id AND m.kind = 'ended')
  AND NOT EXISTS (SELECT 1 FROM outbound_queue q WHERE q.run_id = r.id)`},
	{"every request that waited for a decision has its approvers' email recorded", `
SELECT DISTINCT format('request %s waited for an approver from %s without an email to one', e.correlation_id, e.created_at)
FROM run_events e
WHERE e.type = 'approval.requested' AND e.created_at >= (SELECT min(created_at) FROM mails)
  AND NOT EXISTS (SELECT 1 FROM mails m WHERE m.run_id = e.correlation_id AND m.kind = 'waiting')
  AND NOT EXISTS (SELECT 1 FROM outbound_queue q WHERE q.run_id = e.run_id AND q.seq = e.seq)`},
}

// VerifyOption adds checks to Verify.
type VerifyOption func(*[]invariant)

// WithMailCheck checks the mail ledger too: for a database whose workers
// send email (SMTP_URL set).
func WithMailCheck() VerifyOption {
	return func(invs *[]invariant) { *invs = append(*invs, mailInvariants...) }
}

// Verify checks every invariant over the whole database and returns one line
// per violation; none means the database is consistent.
func (s *Store) Verify(ctx context.Context, opts ...VerifyOption) ([]string, error) {
	var problems []string
	invs := append(slices.Clip(invariants), outboundInvariants...)
	for _, o := range opts {
		o(&invs)
	}
	for _, inv := range invs {
		var rows []string
		if err := s.db.SelectContext(ctx, &rows, inv.query); err != nil {
			return nil, fmt.Errorf("store: verify %s: %w", inv.name, err)
		}
		for _, r := range rows {
			problems = append(problems, inv.name+": "+r)
		}
	}
	return problems, nil
}
