package store

import (
	"context"
	"fmt"
)

// OwnRuns is the newest runs of one owner, as their home page lists them,
// with the list's version.
type OwnRuns struct {
	Runs []RunListing
	// Version grows with every new run of the owner and every event of
	// any of them: the count of their runs plus the sum of their last
	// seqs, both of which only grow. It is read before the list, so the
	// list is never older than it says.
	Version int64
}

// OwnRunsOf reads ownerID's newest runs, at most limit, and their version.
func (s *Store) OwnRunsOf(ctx context.Context, ownerID int64, limit int) (*OwnRuns, error) {
	var l OwnRuns
	err := s.db.GetContext(ctx, &l.Version,
		`SELECT count(*) + coalesce(sum(last_seq), 0) FROM runs WHERE owner_id = $1`, ownerID)
	if err != nil {
		return nil, fmt.Errorf("store: own runs version: %w", err)
	}
	// A request is listed once, as one request: its children are on its page.
	if l.Runs, err = s.SearchRuns(ctx, RunFilter{OwnerID: ownerID, Roots: true, Limit: limit}); err != nil {
		return nil, err
	}
	return &l, nil
}
