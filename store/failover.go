package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// A failover to a standby that lacked the primary's last seconds makes the
// database forget what it committed in them, refunds included; the
// payment provider forgets nothing. So the key the provider sees for a
// refund is derived from what the customer asked, not from a row a
// failover can lose (RefundKey), and a run asks the provider what it holds
// under that key before anything else (Run.ProviderCheck): when it is new,
// and again after the database changed timeline (CheckTimeline). README's
// "Database failover" tells the whole story.

// refundKeyVersion is the derivation's version, part of what is hashed:
// a new derivation must never produce an old one's keys.
const refundKeyVersion = "refund/v1"

// RefundKey is the payment provider's idempotency key for run r's refund:
// a UUIDv5, in the installation's namespace (installation.id), of
// "refund/v1/<owner>/<client request ID>/<order>". A family's child has
// its family's client request ID and its own order. The same request asked
// again (its client's retry after a failover made us forget it) has the
// same key, and the provider gives back the refund it already made instead
// of making a second.
func (s *Store) RefundKey(ctx context.Context, r *Run) (uuid.UUID, error) {
	ns, err := s.installation(ctx, s.db)
	if err != nil {
		return uuid.Nil, err
	}
	return refundKey(ns, r), nil
}

func refundKey(ns uuid.UUID, r *Run) uuid.UUID {
	name := refundKeyVersion + "/" + strconv.FormatInt(r.OwnerID, 10) + "/" + r.ClientRequestID + "/" + strconv.FormatInt(r.OrderID, 10)
	return uuid.NewSHA1(ns, []byte(name))
}

// installation reads the installation's ID once; it never changes.
func (s *Store) installation(ctx context.Context, q sqlx.QueryerContext) (uuid.UUID, error) {
	if id := s.install.Load(); id != nil {
		return *id, nil
	}
	var id uuid.UUID
	if err := sqlx.GetContext(ctx, q, &id, `SELECT id FROM installation`); err != nil {
		return uuid.Nil, fmt.Errorf("store: installation id: %w", err)
	}
	s.install.Store(&id)
	return id, nil
}

// currentTimelineSQL is the timeline the server writes WAL on now: the
// first eight hex digits of the current WAL file's name. It is the new
// timeline from the moment a promotion ends (pg_control_checkpoint() says
// so only after the next checkpoint, which may be minutes away). A standby
// refuses it: it writes nothing.
const currentTimelineSQL = `('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int`

// TimelineCheck is what CheckTimeline found.
type TimelineCheck struct {
	Timeline int   // the timeline the database writes on
	New      bool  // first seen by this check: the database was promoted (or restored) since the last one
	Marked   int64 // unfinished runs marked for a provider check
}

// CheckTimeline records the timeline the database writes on. The first
// check on a new timeline (a standby promoted, a backup restored: the
// history before it may lack a tail the old one had) marks every
// unfinished refund run for a provider check and wakes the workers, in one
// transaction, so that no one is asked to decide a refund the provider
// may have made already, and no run goes on as if nothing had happened.
// Workers call it at start and on every poll, and Approve before a
// decision; on a known timeline it is one read.
func (s *Store) CheckTimeline(ctx context.Context) (TimelineCheck, error) {
	var c TimelineCheck
	var known bool
	if err := s.db.QueryRowxContext(ctx, `SELECT tl, EXISTS (SELECT 1 FROM db_timelines WHERE timeline_id = tl)
        FROM (SELECT `+currentTimelineSQL+` AS tl) t`).Scan(&c.Timeline, &known); err != nil {
		return c, fmt.Errorf("store: check timeline: %w", err)
	}
	if known {
		return c, nil
	}
	err := s.inTx(ctx, func(tx *txn) error {
		c.New, c.Marked = false, 0
		var tl int
		err := tx.GetContext(ctx, &tl, `INSERT INTO db_timelines (timeline_id) VALUES ($1)
            ON CONFLICT (timeline_id) DO NOTHING RETURNING timeline_id`, c.Timeline)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // another process recorded it and marked the runs
		}
		if err != nil {
			return fmt.Errorf("store: record timeline: %w", err)
		}
		c.New = true
		res, err := tx.ExecContext(ctx, `UPDATE runs SET provider_check = true, next_attempt_at = now()
            WHERE kind = 'refund' AND state NOT IN ('completed', 'failed', 'canceled') AND NOT provider_check`)
		if err != nil {
			return fmt.Errorf("store: mark runs for a provider check: %w", err)
		}
		if c.Marked, err = affected(res, "mark runs for a provider check"); err != nil {
			return err
		}
		return notifyWork(ctx, tx)
	})
	return c, err
}

// ProviderChecked records that the provider holds nothing under the run's
// key (or that the run's own ledger row answers for it): the run goes on,
// and back into the approval queue if it waits for a decision.
func (s *Store) ProviderChecked(ctx context.Context, runID uuid.UUID) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE runs SET provider_check = false WHERE id = $1`, runID); err != nil {
		return fmt.Errorf("store: provider checked: %w", err)
	}
	return nil
}

// FoundCall is how a provider call went, for support's list of provider
// calls: the lookup that found a refund at the provider (Found), and, with
// its ID, any call that ended (EndedCall).
type FoundCall struct {
	HTTPStatus int
	Took       time.Duration
	Result     string
}

// Found is a refund the payment provider holds under a run's key that our
// ledger has no operation for: made before the database forgot it.
type Found struct {
	Outcome           // succeeded (with ProviderRef) or failed (with Reason)
	Call    FoundCall // the lookup that found it
	// End is the state the run ends in, and Message its final answer.
	End     string
	Message Answer
}

// RecordFound records, in one transaction, a refund the provider holds
// under the run's key (key) that the run's ledger lacks: the operation
// under that key with the provider's outcome, the lookup that found it,
// operation.succeeded or operation.failed marked Recovered, the final
// message and the run's end. A run that has an operation or has ended
// already is ErrAlreadyDone, and nothing changes. A success after a cancel
// adds cancel.too_late: the money had moved before the cancel.
func (s *Store) RecordFound(ctx context.Context, runID, key uuid.UUID, f Found) (*Run, error) {
	end, ok := terminalEvent(f.End)
	if !ok {
		return nil, fmt.Errorf("store: record found: %q is not a terminal state", f.End)
	}
	run, _, err := s.mutate(ctx, runID, func(tx *txn, r *Run) (string, []NewEvent, error) {
		if Terminal(r.State) {
			return "", nil, ErrAlreadyDone
		}
		var n int
		if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM operations WHERE run_id = $1`, r.ID); err != nil {
			return "", nil, fmt.Errorf("store: load operation: %w", err)
		}
		if n > 0 {
			return "", nil, ErrAlreadyDone
		}
		op := Operation{ID: key, Amount: r.Amount, Currency: r.Currency}
		var news Payload
		switch f.State {
		case OpSucceeded:
			if f.ProviderRef == "" {
				return "", nil, errors.New("store: record found: a success needs the provider's reference")
			}
			news = OperationSucceeded{OperationFacts: op.facts(), ProviderRef: f.ProviderRef, Recovered: true}
		case OpFailed:
			news = OperationFailed{OperationFacts: op.facts(), Reason: f.Reason, Recovered: true}
		default:
			return "", nil, fmt.Errorf("store: record found: %q is not a provider's outcome", f.State)
		}
		// Not unsent (the column's default): the provider holds it.
		ref := sql.NullString{String: f.ProviderRef, Valid: f.ProviderRef != ""}
		if _, err := tx.ExecContext(ctx, `INSERT INTO operations (id, run_id, order_id, kind, amount, currency, state, provider_ref, attempts, last_error, recovered)
            VALUES ($1, $2, $3, 'refund', $4, $5, $6, $7, 1, $8, true)`, key, r.ID, r.OrderID, r.Amount, r.Currency, f.State, ref, f.Reason); err != nil {
			return "", nil, fmt.Errorf("store: record found operation: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO provider_calls (operation_id, kind, answered, http_status, duration_us, result)
            VALUES ($1, 'lookup', true, NULLIF($2, 0), $3, $4)`, key, f.Call.HTTPStatus, f.Call.Took.Microseconds(), f.Call.Result); err != nil {
			return "", nil, fmt.Errorf("store: record found lookup: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET provider_check = false WHERE id = $1`, r.ID); err != nil {
			return "", nil, fmt.Errorf("store: provider checked: %w", err)
		}
		evs := []NewEvent{EventOf(news)}
		if f.State == OpSucceeded && r.CancelRequested() {
			evs = append(evs, EventOf(CancelTooLatePayload{OperationID: key}))
		}
		return finishLocked(ctx, tx, r, f.End, f.Message, end, evs...)
	})
	return run, err
}

// ProviderRefund is a refund the payment provider holds, as its ledger
// lists it (the simulated provider's GET /refunds; a real provider's
// report), for support's comparison with ours.
type ProviderRefund struct {
	Key       string
	Ref       string
	OrderRef  string
	Amount    int64
	Currency  string
	Status    string
	CreatedAt time.Time
}

// Unexplained returns the refunds among those given whose key names no
// operation of ours, in the order given: refunds made under a run the
// database then forgot (a failover) and nobody asked for again. They are
// for a person to look into, never to adopt into another run.
func (s *Store) Unexplained(ctx context.Context, refunds []ProviderRefund) ([]ProviderRefund, error) {
	keys := make([]string, len(refunds))
	for i, r := range refunds {
		keys[i] = r.Key
	}
	var missing []string
	if err := s.db.SelectContext(ctx, &missing, `SELECT k FROM unnest($1::text[]) AS k
        EXCEPT SELECT id::text FROM operations`, pq.Array(keys)); err != nil {
		return nil, fmt.Errorf("store: unexplained refunds: %w", err)
	}
	unexplained := make(map[string]bool, len(missing))
	for _, k := range missing {
		unexplained[k] = true
	}
	out := []ProviderRefund{}
	for _, r := range refunds {
		if unexplained[r.Key] {
			out = append(out, r)
		}
	}
	return out, nil
}
