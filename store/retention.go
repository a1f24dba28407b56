package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Retention says how long each class of event is kept. Zero keeps forever.
type Retention struct {
	Presentation time.Duration // the replay window
	Business     time.Duration // the audit policy; only finished runs' events go
}

// pruneBatch bounds one delete, so the pruner never holds many row locks.
const pruneBatch = 5000

// Prune deletes events older than the retention allows and, in the same
// transaction, raises each touched run's replay_floor to the highest seq it
// deleted, so a cursor below it is reported expired instead of silently
// skipping what is gone. It returns how many events it deleted.
func (s *Store) Prune(ctx context.Context, ret Retention) (int64, error) {
	var total int64
	for {
		n, err := s.pruneOnce(ctx, ret)
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
}

func (s *Store) pruneOnce(ctx context.Context, ret Retention) (int64, error) {
	if ret.Presentation <= 0 && ret.Business <= 0 {
		return 0, nil
	}
	var n int64
	err := s.inTx(ctx, func(tx *txn) error {
		// $1/$2 are NULL for "keep forever".
		return tx.GetContext(ctx, &n, `
WITH doomed AS (
    SELECT e.run_id, e.seq FROM run_events e
    WHERE ($1::interval IS NOT NULL AND e.class = 'presentation' AND e.created_at < now() - $1::interval)
       OR ($2::interval IS NOT NULL AND e.class = 'business' AND e.created_at < now() - $2::interval
           AND EXISTS (SELECT 1 FROM runs r WHERE r.id = e.run_id
                       AND r.state IN ('completed', 'failed', 'canceled')))
    ORDER BY e.run_id, e.seq
    LIMIT $3
), deleted AS (
    DELETE FROM run_events e USING doomed d
    WHERE e.run_id = d.run_id AND e.seq = d.seq
    RETURNING e.run_id, e.seq
), floors AS (
    -- Runs although nothing reads it: PostgreSQL executes every
    -- data-modifying CTE to completion.
    UPDATE runs r SET replay_floor = GREATEST(r.replay_floor, f.top)
    FROM (SELECT run_id, max(seq) AS top FROM deleted GROUP BY run_id) f
    WHERE r.id = f.run_id
)
SELECT count(*) FROM deleted`,
			interval(ret.Presentation), interval(ret.Business), pruneBatch)
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune: %w", err)
	}
	return n, nil
}

func interval(d time.Duration) any {
	if d <= 0 {
		return nil
	}
	return fmt.Sprintf("%d microseconds", d.Microseconds())
}

// Pruner runs Prune periodically.
type Pruner struct {
	Store     *Store
	Retention Retention
	Every     time.Duration // default one minute
	Logger    *slog.Logger

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// Start begins pruning in the background until Stop or ctx ends.
func (p *Pruner) Start(ctx context.Context) {
	ctx, p.stop = context.WithCancel(ctx)
	every := p.Every
	if every <= 0 {
		every = time.Minute
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if n, err := p.Store.Prune(ctx, p.Retention); err != nil && ctx.Err() == nil {
				p.Logger.Error("prune events", "err", err)
			} else if n > 0 {
				p.Logger.Info("pruned events", "count", n)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the pruner and waits for it. Safe to call twice.
func (p *Pruner) Stop() {
	if p.stop != nil {
		p.stop()
	}
	p.wg.Wait()
}
