package store

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// NOTIFY channels. Notifications only wake listeners; what they act on is
// always read back from the tables, so a lost notification loses nothing.
const (
	// ChannelEvents carries "<run_id>:<seq>" for every committed append.
	ChannelEvents = "refundd_events"
	// ChannelGrants carries the id of a user whose grants or status changed.
	ChannelGrants = "refundd_grants"
	// ChannelWork says a run may have become due for a worker (a start, an
	// approval, a cancel). Kept apart from ChannelEvents so narration, the
	// bulk of appends, never wakes a worker.
	ChannelWork = "refundd_work"
	// ChannelQueue carries the approval queue's new version whenever a run
	// joins or leaves it (the queue_track trigger sends it).
	ChannelQueue = "refundd_queue"
)

// notifyWork wakes workers when tx commits, not before: a worker woken
// earlier would find nothing to claim.
func notifyWork(ctx context.Context, tx *sqlx.Tx) error {
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, '')`, ChannelWork); err != nil {
		return fmt.Errorf("store: notify work: %w", err)
	}
	return nil
}
