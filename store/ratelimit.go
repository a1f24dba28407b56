package store

import (
	"context"
	"fmt"
	"math"
	"time"
)

// startWindow is the window a start rate limit counts starts over.
const startWindow = time.Minute

// startLockClass namespaces the per-user advisory lock that serializes a
// user's starts (the two-key form, so it never meets the bigint-keyed locks
// taken elsewhere).
const startLockClass = 0x5374 // "St"

// RateLimitedError refuses a start over the user's rate limit. It unwraps to
// an *Error with CodeRateLimited, so it is shown like any other refusal;
// RetryAfter is what the client is told to wait.
type RateLimitedError struct {
	Err        *Error
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string { return e.Err.Error() }
func (e *RateLimitedError) Unwrap() error { return e.Err }

// checkStartRate refuses to start adding more refund runs (one, or a
// family's children) when the owner's refund runs of the last startWindow
// would then be more than limit (a family's parent is not counted). It holds a per-user advisory lock until the
// transaction ends, so racing starts (from any process) are counted one
// after the other and never exceed the limit. limit <= 0 means no limit.
func checkStartRate(ctx context.Context, tx *txn, ownerID int64, limit, adding int) error {
	if limit <= 0 {
		return nil
	}
	// Wrapping a huge ID onto another user's key only serializes the two.
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, $2)`,
		startLockClass, int32(uint32(ownerID))); err != nil {
		return fmt.Errorf("store: lock user's starts: %w", err)
	}
	// clock_timestamp, not now(): this transaction may have waited for the
	// lock, and the window ends now, not when the transaction began.
	var n int
	var wait float64
	err := tx.QueryRowxContext(ctx, `SELECT count(*),
        COALESCE(EXTRACT(EPOCH FROM min(created_at) + $2::interval - clock_timestamp()), 0)::float8
        FROM runs WHERE owner_id = $1 AND kind = 'refund' AND created_at > clock_timestamp() - $2::interval`,
		ownerID, interval(startWindow)).Scan(&n, &wait)
	if err != nil {
		return fmt.Errorf("store: count recent starts: %w", err)
	}
	if n+adding <= limit {
		return nil
	}
	// Whole seconds, rounded up, and at least one: Retry-After counts
	// seconds, and coming back a moment early would only be refused again.
	secs := max(1, int(math.Ceil(wait)))
	return &RateLimitedError{
		Err:        Refuse(CodeRateLimited, "refuse.rate_limited", map[string]any{"Count": n, "Seconds": secs}),
		RetryAfter: time.Duration(secs) * time.Second,
	}
}
