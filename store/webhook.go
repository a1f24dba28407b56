package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"
)

// WebhookEndpoint is a URL an admin registered to receive the business
// events of every run, signed (Standard Webhooks 1.0). The secrets never
// leave the store but to sign (outbound) and once, to the admin who
// created or rotated them.
type WebhookEndpoint struct {
	ID          uuid.UUID `db:"id" json:"id"`
	URL         string    `db:"url" json:"url"`
	Description string    `db:"description" json:"description"`
	// EventTypes filters what is sent; empty: every business event.
	EventTypes pq.StringArray `db:"event_types" json:"event_types"`
	Secret     string         `db:"secret" json:"-"`
	// PreviousSecret signs beside Secret until PreviousUntil (a rotation).
	PreviousSecret sql.NullString `db:"previous_secret" json:"-"`
	PreviousUntil  sql.NullTime   `db:"previous_until" json:"-"`
	CreatedBy      sql.NullInt64  `db:"created_by" json:"-"`
	CreatedAt      time.Time      `db:"created_at" json:"created_at"`
	DisabledAt     sql.NullTime   `db:"disabled_at" json:"-"`
	DisabledReason sql.NullString `db:"disabled_reason" json:"-"`
	FailingSince   sql.NullTime   `db:"failing_since" json:"-"`
}

// Secrets are the secrets a delivery made at now is signed with: the
// current one, and the previous one while a rotation overlaps.
func (e WebhookEndpoint) Secrets(now time.Time) []string {
	out := []string{e.Secret}
	if e.PreviousSecret.Valid && e.PreviousUntil.Valid && now.Before(e.PreviousUntil.Time) {
		out = append(out, e.PreviousSecret.String)
	}
	return out
}

// Wants says whether the endpoint receives events of type typ.
func (e WebhookEndpoint) Wants(typ string) bool {
	return len(e.EventTypes) == 0 || slices.Contains(e.EventTypes, typ)
}

const webhookColumns = `id, url, description, event_types, secret, previous_secret, previous_until,
	created_by, created_at, disabled_at, disabled_reason, failing_since`

// Disable reasons an endpoint carries (WebhookEndpoint.DisabledReason).
const (
	WebhookGone    = "gone"    // it answered 410 Gone
	WebhookFailing = "failing" // it failed for WEBHOOK_DISABLE_AFTER
	WebhookByAdmin = "admin"   // an admin disabled it
)

// NewWebhook is what an admin registers. The URL is checked for safety by
// the caller (outbound.Policy) before it reaches the store.
type NewWebhook struct {
	URL         string
	Description string
	EventTypes  []string
	Secret      string
	CreatedBy   int64
}

// CreateWebhook registers an endpoint. Unknown or narration event types
// are refused in words (CodeInvalid).
func (s *Store) CreateWebhook(ctx context.Context, w NewWebhook) (WebhookEndpoint, error) {
	for _, t := range w.EventTypes {
		if !slices.Contains(EventTypes(), t) || ClassOf(t) != ClassBusiness {
			return WebhookEndpoint{}, Errorf(CodeInvalid, "%q is not a business event type a webhook can receive.", t)
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("store: webhook id: %w", err)
	}
	var types pq.StringArray
	if len(w.EventTypes) > 0 {
		types = pq.StringArray(w.EventTypes)
	}
	var by sql.NullInt64
	if w.CreatedBy != 0 {
		by = sql.NullInt64{Int64: w.CreatedBy, Valid: true}
	}
	var ep WebhookEndpoint
	err = s.db.GetContext(ctx, &ep, `INSERT INTO webhook_endpoints (id, url, description, event_types, secret, created_by)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+webhookColumns, id, w.URL, w.Description, types, w.Secret, by)
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("store: create webhook: %w", err)
	}
	return ep, nil
}

// Webhooks lists every endpoint, oldest first.
func (s *Store) Webhooks(ctx context.Context) ([]WebhookEndpoint, error) {
	eps := []WebhookEndpoint{}
	if err := s.db.SelectContext(ctx, &eps, `SELECT `+webhookColumns+` FROM webhook_endpoints ORDER BY created_at, id`); err != nil {
		return nil, fmt.Errorf("store: list webhooks: %w", err)
	}
	return eps, nil
}

// Webhook reads one endpoint; ErrNotFound if there is none.
func (s *Store) Webhook(ctx context.Context, id uuid.UUID) (WebhookEndpoint, error) {
	var ep WebhookEndpoint
	err := s.db.GetContext(ctx, &ep, `SELECT `+webhookColumns+` FROM webhook_endpoints WHERE id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return ep, ErrNotFound
	}
	if err != nil {
		return ep, fmt.Errorf("store: webhook: %w", err)
	}
	return ep, nil
}

// DeleteWebhook removes an endpoint and its deliveries.
func (s *Store) DeleteWebhook(ctx context.Context, id uuid.UUID) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM webhook_endpoints WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("store: delete webhook: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// RotateWebhookSecret makes secret the endpoint's signing secret; the old
// one goes on signing beside it for overlap.
func (s *Store) RotateWebhookSecret(ctx context.Context, id uuid.UUID, secret string, overlap time.Duration) (WebhookEndpoint, error) {
	var ep WebhookEndpoint
	err := s.db.GetContext(ctx, &ep, `UPDATE webhook_endpoints
		SET previous_secret = secret, previous_until = now() + make_interval(secs => $3), secret = $2
		WHERE id = $1 RETURNING `+webhookColumns, id, secret, overlap.Seconds())
	if errors.Is(err, sql.ErrNoRows) {
		return ep, ErrNotFound
	}
	if err != nil {
		return ep, fmt.Errorf("store: rotate webhook secret: %w", err)
	}
	return ep, nil
}

// DisableWebhook stops deliveries to an endpoint; its events keep being
// queued for it, so enabling it again goes on from where it stopped.
func (s *Store) DisableWebhook(ctx context.Context, id uuid.UUID, reason string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE webhook_endpoints SET disabled_at = coalesce(disabled_at, now()), disabled_reason = $2
		WHERE id = $1`, id, reason)
	if err != nil {
		return fmt.Errorf("store: disable webhook: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// EnableWebhook resumes deliveries to an endpoint, from where it stopped
// or, when from is not zero, from the events committed at or after from:
// the earlier ones still waiting are marked skipped (by the admin's
// choice), never silently dropped. What waits is due at once.
func (s *Store) EnableWebhook(ctx context.Context, id uuid.UUID, from time.Time) error {
	return s.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL
			WHERE id = $1`, id)
		if err != nil {
			return fmt.Errorf("store: enable webhook: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
		}
		if !from.IsZero() {
			if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET state = 'skipped'
				WHERE endpoint_id = $1 AND state = 'pending' AND event_at < $2`, id, from); err != nil {
				return fmt.Errorf("store: enable webhook from %s: %w", from, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET next_at = now()
			WHERE endpoint_id = $1 AND state = 'pending'`, id); err != nil {
			return fmt.Errorf("store: enable webhook: %w", err)
		}
		return nil
	})
}
