package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// RunListing is a run with its owner's email, as support's search lists it.
type RunListing struct {
	Run
	OwnerEmail string `db:"owner_email"`
}

// RunFilter narrows SearchRuns. Zero fields match every run.
type RunFilter struct {
	ID         uuid.UUID // exactly this run
	State      string    // runs in this state
	OwnerEmail string    // owners whose email contains this, ignoring case
	Limit      int       // at most this many (default 50)
}

// SearchRuns lists the runs that match f, newest first.
func (s *Store) SearchRuns(ctx context.Context, f RunFilter) ([]RunListing, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	id := uuid.NullUUID{UUID: f.ID, Valid: f.ID != uuid.Nil}
	runs := []RunListing{}
	err := s.db.SelectContext(ctx, &runs, `
SELECT r.id, r.owner_id, r.order_id, r.amount, r.currency, r.reason, r.client_request_id, r.state,
    r.last_seq, r.replay_floor, r.cancel_requested_at, r.created_at, r.updated_at, r.finished_at,
    u.email AS owner_email
FROM runs r JOIN users u ON u.id = r.owner_id
WHERE ($1::uuid IS NULL OR r.id = $1)
  AND ($2 = '' OR r.state = $2)
  AND ($3 = '' OR strpos(lower(u.email), lower($3)) > 0)
ORDER BY r.created_at DESC, r.id DESC
LIMIT $4`, id, f.State, f.OwnerEmail, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("store: search runs: %w", err)
	}
	return runs, nil
}
