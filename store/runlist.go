package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// RunList asks for one page of the runs a user may list, newest first.
// Which runs those are follows the run page's access rules, which the
// handlers own; the store only filters by them.
type RunList struct {
	// All lists every run (support). Otherwise the list holds OwnerID's
	// runs and, with WithApprovals, every run that asked for an approval
	// (approvers).
	All           bool
	OwnerID       int64
	WithApprovals bool
	// After is the last run of the previous page; uuid.Nil starts at the
	// newest. Run IDs are UUIDv7, so their order is the order of creation.
	After uuid.UUID
	Limit int
}

// ListedRun is a run in a listing, with what access to it depends on.
type ListedRun struct {
	Run
	HasApproval bool `db:"has_approval"`
}

// ListRuns returns up to q.Limit runs with IDs below q.After, newest first,
// read by keyset so a page costs the same however deep it is.
func (s *Store) ListRuns(ctx context.Context, q RunList) ([]ListedRun, error) {
	after := uuid.NullUUID{UUID: q.After, Valid: q.After != uuid.Nil}
	runs := []ListedRun{}
	err := s.db.SelectContext(ctx, &runs, `SELECT `+runColumns+`,
        `+familyAskedApprovalSQL("runs")+` AS has_approval
        FROM runs
        WHERE ($1::uuid IS NULL OR id < $1)
          AND ($2 OR owner_id = $3 OR ($4 AND `+familyAskedApprovalSQL("runs")+`))
        ORDER BY id DESC LIMIT $5`, after, q.All, q.OwnerID, q.WithApprovals, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	return runs, nil
}
