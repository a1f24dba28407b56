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
