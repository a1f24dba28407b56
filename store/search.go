package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// RunListing is a run as lists show it: with its owner's email and the
// item of its order, so the people reading the list can tell runs apart.
type RunListing struct {
	Run
	OwnerEmail string `db:"owner_email"`
	Item       string `db:"item"`
	// Declined: the payment provider refused the run's refund, so a
	// failed run reads "Declined" in a list as on its page.
	Declined bool `db:"declined"`
	// Of a request: how many children it has, how many have ended, and how
	// many of those the provider refunded (zero for a lone run).
	Children         int `db:"children"`
	ChildrenEnded    int `db:"children_ended"`
	ChildrenRefunded int `db:"children_refunded"`
}

// RunFilter narrows SearchRuns. Zero fields match every run.
type RunFilter struct {
	ID         uuid.UUID // exactly this run
	Family     uuid.UUID // every run of this run's family (any of its IDs, or its correlation ID)
	State      string    // runs in this state
	OwnerEmail string    // owners whose email contains this, ignoring case
	OwnerID    int64     // runs of this user
	Roots      bool      // only roots: lone runs and requests, not a request's children
	Limit      int       // at most this many (default 50)
	Offset     int       // after skipping this many
}

const listingSelect = `SELECT r.id, r.kind, r.parent_run_id, r.correlation_id, r.position, r.owner_id, r.order_ref, r.amount, r.currency, r.reason, r.client_request_id, r.state,
    r.last_seq, r.replay_floor, r.cancel_requested_at, r.created_at, r.updated_at, r.finished_at, r.retry_of,
    u.email AS owner_email, COALESCE(o.description, '') AS item,
    EXISTS (SELECT 1 FROM operations op WHERE op.run_id = r.id AND op.state = 'failed') AS declined,
    fam.children, fam.children_ended, fam.children_refunded
FROM runs r JOIN users u ON u.id = r.owner_id LEFT JOIN orders o ON o.id = r.order_id
CROSS JOIN LATERAL (
    SELECT count(c.id) AS children,
        count(c.id) FILTER (WHERE c.state IN ('completed', 'failed', 'canceled')) AS children_ended,
        count(c.id) FILTER (WHERE c.state = 'completed') AS children_refunded
    FROM runs c WHERE r.kind = 'request' AND c.parent_run_id = r.id
) fam `

const filterWhere = `WHERE ($1::uuid IS NULL OR r.id = $1)
  AND ($2 = '' OR r.state = $2)
  AND ($3 = '' OR strpos(lower(u.email), lower($3)) > 0)
  AND ($4 = 0 OR r.owner_id = $4)
  AND ($5::uuid IS NULL OR r.correlation_id = (SELECT x.correlation_id FROM runs x WHERE x.id = $5))
  AND (NOT $6 OR r.parent_run_id IS NULL) `

func (f RunFilter) args() []any {
	return []any{uuid.NullUUID{UUID: f.ID, Valid: f.ID != uuid.Nil}, f.State, f.OwnerEmail, f.OwnerID,
		uuid.NullUUID{UUID: f.Family, Valid: f.Family != uuid.Nil}, f.Roots}
}

// SearchRuns lists the runs that match f, newest first; a family's runs
// (made at once) read parent first, then its children in order.
func (s *Store) SearchRuns(ctx context.Context, f RunFilter) ([]RunListing, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	runs := []RunListing{}
	err := s.db.SelectContext(ctx, &runs, listingSelect+filterWhere+`ORDER BY r.created_at DESC, r.correlation_id DESC, r.position, r.id DESC
LIMIT $7 OFFSET $8`, append(f.args(), f.Limit, max(f.Offset, 0))...)
	if err != nil {
		return nil, fmt.Errorf("store: search runs: %w", err)
	}
	return runs, nil
}

// CountRuns counts the runs that match f, whatever its Limit and Offset.
func (s *Store) CountRuns(ctx context.Context, f RunFilter) (int, error) {
	var n int
	err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM runs r JOIN users u ON u.id = r.owner_id `+filterWhere, f.args()...)
	if err != nil {
		return 0, fmt.Errorf("store: count runs: %w", err)
	}
	return n, nil
}
