package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"
)

// What an admin does to webhook endpoints, each change with its audit
// record in one transaction. The audit details name the endpoint by its
// URL, never by a secret.

// AddWebhook registers an endpoint for the admin in ctx, refusing in words
// (CodeConflict) when max endpoints exist already. The count and the insert
// share one transaction under a lock, so two admins racing cannot pass max.
func (s *Store) AddWebhook(ctx context.Context, w NewWebhook, max int) (WebhookEndpoint, error) {
	var ep WebhookEndpoint
	err := s.inTx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `LOCK TABLE webhook_endpoints IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("store: add webhook: %w", err)
		}
		var n int
		if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM webhook_endpoints`); err != nil {
			return fmt.Errorf("store: add webhook: %w", err)
		}
		if max > 0 && n >= max {
			return Refuse(CodeConflict, "refuse.webhooks_max", map[string]any{"Count": n})
		}
		var err error
		if ep, err = insertWebhook(ctx, tx, w); err != nil {
			return err
		}
		return audit(ctx, tx, AuditWebhookCreated, WebhookSubject(ep.ID), map[string]any{"url": ep.URL})
	})
	return ep, err
}

// insertWebhook is AddWebhook's insert, in tx; unknown or narration
// event types are refused in words (CodeInvalid).
func insertWebhook(ctx context.Context, tx *txn, w NewWebhook) (WebhookEndpoint, error) {
	var ep WebhookEndpoint
	for _, t := range w.EventTypes {
		if ClassOf(t) != ClassBusiness || !slices.Contains(EventTypes(), t) {
			return ep, Refuse(CodeInvalid, "refuse.webhook_event_type", map[string]any{"Type": strconv.Quote(t)})
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return ep, fmt.Errorf("store: webhook id: %w", err)
	}
	var types pq.StringArray
	if len(w.EventTypes) > 0 {
		types = pq.StringArray(w.EventTypes)
	}
	by := sql.NullInt64{Int64: w.CreatedBy, Valid: w.CreatedBy != 0}
	err = tx.GetContext(ctx, &ep, `INSERT INTO webhook_endpoints (id, url, description, event_types, secret, created_by)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+webhookColumns, id, w.URL, w.Description, types, w.Secret, by)
	if err != nil {
		return ep, fmt.Errorf("store: create webhook: %w", err)
	}
	return ep, nil
}

// DeleteWebhook deletes an endpoint and its deliveries for the admin in
// ctx; ErrNotFound if there is none.
func (s *Store) DeleteWebhook(ctx context.Context, id uuid.UUID) error {
	return s.inTx(ctx, func(tx *txn) error {
		var url string
		err := tx.GetContext(ctx, &url, `DELETE FROM webhook_endpoints WHERE id = $1 RETURNING url`, id)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("store: delete webhook: %w", err)
		}
		return audit(ctx, tx, AuditWebhookDeleted, WebhookSubject(id), map[string]any{"url": url})
	})
}

// RotateWebhook makes secret the endpoint's signing secret for the admin
// in ctx; the previous one signs beside it for overlap.
func (s *Store) RotateWebhook(ctx context.Context, id uuid.UUID, secret string, overlap time.Duration) (WebhookEndpoint, error) {
	var ep WebhookEndpoint
	err := s.inTx(ctx, func(tx *txn) error {
		err := tx.GetContext(ctx, &ep, `UPDATE webhook_endpoints
			SET previous_secret = secret, previous_until = now() + make_interval(secs => $3), secret = $2
			WHERE id = $1 RETURNING `+webhookColumns, id, secret, overlap.Seconds())
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("store: rotate webhook secret: %w", err)
		}
		return audit(ctx, tx, AuditWebhookRotated, WebhookSubject(id), map[string]any{"url": ep.URL})
	})
	return ep, err
}

// DisableWebhook stops deliveries to an endpoint at the request of
// the admin in ctx (reason WebhookByAdmin); its events keep being queued.
func (s *Store) DisableWebhook(ctx context.Context, id uuid.UUID) error {
	return s.inTx(ctx, func(tx *txn) error {
		var url string
		err := tx.GetContext(ctx, &url, `UPDATE webhook_endpoints
			SET disabled_at = coalesce(disabled_at, now()), disabled_reason = $2
			WHERE id = $1 RETURNING url`, id, WebhookByAdmin)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("store: disable webhook: %w", err)
		}
		return audit(ctx, tx, AuditWebhookDisabled, WebhookSubject(id), map[string]any{"url": url})
	})
}

// EnableWebhook resumes deliveries to an endpoint for the admin in ctx,
// from where it stopped or, when from is not zero, from the events
// committed at or after from: the earlier ones still waiting are marked
// skipped (by the admin's choice), never silently dropped. What waits is
// due at once. Its audit record (with from) commits with it.
func (s *Store) EnableWebhook(ctx context.Context, id uuid.UUID, from time.Time) error {
	return s.inTx(ctx, func(tx *txn) error {
		var url string
		err := tx.GetContext(ctx, &url, `UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL
			WHERE id = $1 RETURNING url`, id)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("store: enable webhook: %w", err)
		}
		details := map[string]any{"url": url}
		if !from.IsZero() {
			details["from"] = from.UTC().Format(time.RFC3339)
			if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET state = 'skipped'
				WHERE endpoint_id = $1 AND state = 'pending' AND event_at < $2`, id, from); err != nil {
				return fmt.Errorf("store: enable webhook from %s: %w", from, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET next_at = now()
			WHERE endpoint_id = $1 AND state = 'pending'`, id); err != nil {
			return fmt.Errorf("store: enable webhook: %w", err)
		}
		return audit(ctx, tx, AuditWebhookEnabled, WebhookSubject(id), details)
	})
}

// ResendDelivery asks for one delivery of an endpoint to be sent again:
// an acknowledged (or skipped) one is replayed (resend_at), outside the
// run's order and without changing its state; a pending one is made due
// now. It returns the delivery's event type; ErrNotFound if there is no
// such delivery.
func (s *Store) ResendDelivery(ctx context.Context, endpointID, runID uuid.UUID, seq int64) (string, error) {
	var row struct {
		Type string `db:"type"`
		URL  string `db:"url"`
	}
	err := s.inTx(ctx, func(tx *txn) error {
		err := tx.GetContext(ctx, &row, `UPDATE webhook_deliveries d
			SET resend_at = CASE WHEN d.state = 'pending' THEN d.resend_at ELSE now() END,
			    next_at = CASE WHEN d.state = 'pending' THEN now() ELSE d.next_at END
			FROM webhook_endpoints e
			WHERE e.id = d.endpoint_id AND d.endpoint_id = $1 AND d.run_id = $2 AND d.seq = $3
			RETURNING d.type, e.url`, endpointID, runID, seq)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("store: resend delivery: %w", err)
		}
		return audit(ctx, tx, AuditWebhookResent, WebhookSubject(endpointID),
			map[string]any{"url": row.URL, "run_id": runID, "seq": seq, "type": row.Type})
	})
	return row.Type, err
}

// WebhookAttempt is one attempt to deliver an event to an endpoint, with
// its delivery's event type and state.
type WebhookAttempt struct {
	ID          int64          `db:"id"`
	EndpointID  uuid.UUID      `db:"endpoint_id"`
	RunID       uuid.UUID      `db:"run_id"`
	Seq         int64          `db:"seq"`
	EventID     uuid.UUID      `db:"event_id"`
	Type        string         `db:"type"`
	Attempt     int            `db:"attempt"`
	Status      sql.NullInt64  `db:"status"`
	Error       sql.NullString `db:"error"`
	DurationMS  int            `db:"duration_ms"`
	NextAt      sql.NullTime   `db:"next_at"`
	At          time.Time      `db:"at"`
	State       string         `db:"state"`        // the delivery's state now
	DeliveryDue sql.NullTime   `db:"delivery_due"` // its next try now, if pending
}

// WebhookAttempts are an endpoint's most recent attempts, newest first, at
// most limit.
func (s *Store) WebhookAttempts(ctx context.Context, endpointID uuid.UUID, limit int) ([]WebhookAttempt, error) {
	out := []WebhookAttempt{}
	err := s.db.SelectContext(ctx, &out, `SELECT a.id, a.endpoint_id, a.run_id, a.seq, a.event_id,
			coalesce(d.type, '') AS type, a.attempt, a.status, a.error, a.duration_ms, a.next_at, a.at,
			coalesce(d.state, 'delivered') AS state,
			CASE WHEN d.state = 'pending' THEN d.next_at END AS delivery_due
		FROM webhook_attempts a
		LEFT JOIN webhook_deliveries d ON d.endpoint_id = a.endpoint_id AND d.run_id = a.run_id AND d.seq = a.seq
		WHERE a.endpoint_id = $1 ORDER BY a.id DESC LIMIT $2`, endpointID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: webhook attempts: %w", err)
	}
	return out, nil
}

// RunDelivery is one business event of a run on its way to one endpoint.
type RunDelivery struct {
	EndpointID    uuid.UUID      `db:"endpoint_id"`
	URL           string         `db:"url"`
	Seq           int64          `db:"seq"`
	Type          string         `db:"type"`
	State         string         `db:"state"`
	Attempts      int            `db:"attempts"`
	NextAt        time.Time      `db:"next_at"`
	LastStatus    sql.NullInt64  `db:"last_status"`
	LastError     sql.NullString `db:"last_error"`
	LastAttemptAt sql.NullTime   `db:"last_attempt_at"`
	DeliveredAt   sql.NullTime   `db:"delivered_at"`
	ResendAt      sql.NullTime   `db:"resend_at"`
}

// RunDeliveries are the deliveries of a run's events across endpoints,
// by endpoint then seq.
func (s *Store) RunDeliveries(ctx context.Context, runID uuid.UUID) ([]RunDelivery, error) {
	out := []RunDelivery{}
	err := s.db.SelectContext(ctx, &out, `SELECT d.endpoint_id, e.url, d.seq, d.type, d.state, d.attempts, d.next_at,
			d.last_status, d.last_error, d.last_attempt_at, d.delivered_at, d.resend_at
		FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
		WHERE d.run_id = $1 ORDER BY e.created_at, e.id, d.seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: run deliveries: %w", err)
	}
	return out, nil
}
