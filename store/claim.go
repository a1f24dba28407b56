package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/metrics"
)

// ErrLeaseLost means another worker holds the run now: this worker's lease
// expired and it must stop working on the run at once.
var ErrLeaseLost = errors.New("store: lease lost")

// ClaimNext leases an unfinished run whose next attempt is due and that no
// live lease holds, for worker until lease runs out, and reports whether
// another run was due too (so the caller can hand the wake-up on instead of
// every idle worker asking). The order is fair and prompt: runs that carry
// a person's decision or are resuming (settling, cancel asked, or a dead
// worker's expired lease) come first, as they only wait behind work that
// came later; then the runs of owners with the fewest runs leased now, so
// one owner's flood cannot hold every slot; then the longest due. SKIP
// LOCKED lets any number of workers claim side by side without waiting for
// each other. Nothing is claimed on a database timeline CheckTimeline has
// not recorded. It returns ErrNotFound when there is nothing to do.
func (s *Store) ClaimNext(ctx context.Context, worker string, lease time.Duration) (run *Run, more bool, err error) {
	var r struct {
		Run
		More     bool `db:"more"`
		Takeover bool `db:"takeover"`
	}
	err = s.db.GetContext(ctx, &r, `
WITH busy AS (
    SELECT owner_id, count(*) AS leased FROM runs
    WHERE state NOT IN ('completed', 'failed', 'canceled') AND lease_expires_at >= now()
    GROUP BY owner_id
), due AS (
    SELECT r.id, r.lease_expires_at IS NOT NULL AS takeover, CASE WHEN r.state IN ('submitting', 'reconciling') OR r.cancel_requested_at IS NOT NULL
            OR r.lease_expires_at IS NOT NULL THEN 0 ELSE 1 END AS prio,
        COALESCE(b.leased, 0) AS leased, r.next_attempt_at
    FROM runs r LEFT JOIN busy b ON b.owner_id = r.owner_id
    WHERE r.state NOT IN ('completed', 'failed', 'canceled') AND r.kind = 'refund'
      AND r.next_attempt_at <= now()
      AND (r.lease_expires_at IS NULL OR r.lease_expires_at < now())
      -- Not on a timeline CheckTimeline has not recorded: after a
      -- promotion, the runs are marked for a provider check first.
      AND EXISTS (SELECT 1 FROM db_timelines WHERE timeline_id = `+currentTimelineSQL+`)
    ORDER BY prio, leased, r.next_attempt_at
    LIMIT 2
    FOR UPDATE OF r SKIP LOCKED
), claimed AS (
    UPDATE runs SET lease_owner = $1, lease_expires_at = now() + $2::interval
    WHERE id = (SELECT id FROM due ORDER BY prio, leased, next_attempt_at LIMIT 1)
    RETURNING `+runColumns+`
)
SELECT claimed.*, (SELECT count(*) FROM due) > 1 AS more,
    (SELECT takeover FROM due WHERE due.id = claimed.id) AS takeover
FROM claimed`, worker, interval(lease))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: claim run: %w", err)
	}
	if r.Takeover {
		metrics.LeaseTakeovers.Inc()
	}
	return &r.Run, r.More, nil
}

// RenewLease extends worker's lease on a run, or reports ErrLeaseLost.
func (s *Store) RenewLease(ctx context.Context, runID uuid.UUID, worker string, lease time.Duration) error {
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET lease_expires_at = now() + $3::interval
        WHERE id = $1 AND lease_owner = $2 AND lease_expires_at > now()`, runID, worker, interval(lease))
	if err != nil {
		return fmt.Errorf("store: renew lease: %w", err)
	}
	if n, err := affected(res, "renew lease"); err != nil || n == 0 {
		return cmp.Or(err, ErrLeaseLost)
	}
	return nil
}

// ReleaseRun gives up worker's lease and sets when the run needs attention
// next: after from now, or never by itself when after is zero (it waits for
// a person), but no later than the deadline of a decision it waits for. If a person's command (an approval or a cancel) was appended
// after seenSeq, the run is due at once instead, so no command waits for a
// timer. Only commands count: the worker's own events of its last step
// (narration, operation.reconciling) are no reason to come back early, and
// counting them turned every backoff into an immediate retry.
func (s *Store) ReleaseRun(ctx context.Context, runID uuid.UUID, worker string, seenSeq int64, after time.Duration) error {
	next := "infinity"
	if after > 0 {
		next = time.Now().Add(after).UTC().Format(time.RFC3339Nano)
	}
	return s.inTx(ctx, func(tx *txn) error {
		// Lock the run before looking for commands: a statement reads with
		// the snapshot it started with, so one that waited for a command's
		// lock would miss the command and overwrite its wake-up. Commands
		// committed after this lock see the lease gone and wake the run
		// themselves.
		var held bool
		if err := tx.GetContext(ctx, &held, `SELECT lease_owner IS NOT DISTINCT FROM $2 FROM runs WHERE id = $1 FOR UPDATE`,
			runID, worker); errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		} else if err != nil {
			return fmt.Errorf("store: release run: %w", err)
		}
		if !held {
			return nil
		}
		var dueNow bool
		if err := tx.GetContext(ctx, &dueNow, `UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL,
            next_attempt_at = CASE WHEN EXISTS (SELECT 1 FROM run_events
                    WHERE run_id = $1 AND seq > $2 AND type IN ('approval.granted', 'cancel.requested'))
                THEN now()
                -- Marked for a provider check (a new timeline) while this
                -- lease hid it: due at once, as CheckTimeline made it.
                WHEN runs.provider_check THEN now()
                -- A run that waits for a person is due again at its
                -- decision's deadline, if it has one (LEAST skips NULL).
                ELSE LEAST($3::timestamptz, (SELECT a.deadline FROM approvals a
                    WHERE a.run_id = runs.id AND a.decision IS NULL
                      AND runs.state = 'awaiting_approval' AND runs.cancel_requested_at IS NULL)) END
            WHERE id = $1 RETURNING next_attempt_at <= now()`, runID, seenSeq, next); err != nil {
			return fmt.Errorf("store: release run: %w", err)
		}
		if dueNow {
			// The command's own wake-up came while this lease hid the
			// run from every worker; wake one again now it is free.
			return notifyWork(ctx, tx)
		}
		return nil
	})
}

// NoteAttempt counts a reconcile lookup that got no answer, with the reason,
// so the next lookup backs off further. It never fails the run: an outcome
// that may have committed stays reconciling until the provider answers.
func (s *Store) NoteAttempt(ctx context.Context, opID uuid.UUID, reason string) (int, error) {
	var n int
	err := s.db.GetContext(ctx, &n, `UPDATE operations SET attempts = attempts + 1, last_error = $2, updated_at = now()
        WHERE id = $1 RETURNING attempts`, opID, reason)
	if err != nil {
		return 0, fmt.Errorf("store: note attempt: %w", err)
	}
	return n, nil
}
