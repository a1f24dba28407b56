package store

import (
	"context"
	"sync"
	"time"
)

// batcher is the group-commit queue under the narration writer, the
// notifier and the stream-open readers: callers put items on queue, and
// workers, started with the first item, each take what waits in batches
// (gather) until stop. While one batch is written the next gathers, so a
// quiet process handles each item at once and a busy one many at a time.
type batcher[T any] struct {
	workers int       // goroutines taking batches
	max     int       // items in one batch, at most
	do      func([]T) // the work on one batch
	// pace, if set, spaces a storm's batches: after a batch of several
	// items the next begins no sooner than pace after it began (or once
	// max wait), and so takes what came meanwhile. An item after a lone
	// one goes at once.
	pace time.Duration

	start sync.Once
	queue chan T
	quit  chan struct{}
	wg    sync.WaitGroup
}

// newBatcher makes a batcher whose queue holds up to queued items and
// whose workers goroutines each hand do every batch of up to max items.
// They start with the first item (begin), so a store that is never asked
// to batch runs none.
func newBatcher[T any](queued, workers, max int, do func([]T)) *batcher[T] {
	return &batcher[T]{workers: workers, max: max, do: do,
		queue: make(chan T, queued), quit: make(chan struct{})}
}

// begin starts the workers the first time it is called; they run until
// stop.
func (b *batcher[T]) begin() {
	b.start.Do(func() {
		for range b.workers {
			b.wg.Go(func() {
				for {
					batch, ok := gather(b.queue, b.quit, b.max)
					if !ok {
						return
					}
					began := time.Now()
					b.do(batch)
					if len(batch) > 1 && !b.rest(began) {
						return
					}
				}
			})
		}
	})
}

// rest waits, after a batch that began at began, until pace has passed
// since then or max items wait; false once quit is closed.
func (b *batcher[T]) rest(began time.Time) bool {
	if b.pace <= 0 {
		return true
	}
	tick := time.NewTicker(b.pace / 4)
	defer tick.Stop()
	for time.Since(began) < b.pace && len(b.queue) < b.max {
		select {
		case <-tick.C:
		case <-b.quit:
			return false
		}
	}
	return true
}

// put queues x, starting the workers if need be: errStoreClosed after
// stop, ctx's cause when ctx ends first.
func (b *batcher[T]) put(ctx context.Context, x T) error {
	b.begin()
	select {
	case b.queue <- x:
		return nil
	case <-b.quit:
		return errStoreClosed
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// await waits for the answer to an item put: errStoreClosed after stop,
// ctx's cause when ctx ends first.
func await[T, A any](ctx context.Context, b *batcher[T], done <-chan A) (A, error) {
	var zero A
	select {
	case a := <-done:
		return a, nil
	case <-b.quit:
		return zero, errStoreClosed
	case <-ctx.Done():
		return zero, context.Cause(ctx)
	}
}

// stop ends the workers after the batches in flight; what still waits
// gets errStoreClosed.
func (b *batcher[T]) stop() {
	select {
	case <-b.quit:
	default:
		close(b.quit)
	}
	b.wg.Wait()
}

// gather waits for one item, then takes what else waits, up to max: the
// batch of a group-commit writer. ok is false once quit is closed.
func gather[T any](queue <-chan T, quit <-chan struct{}, max int) (batch []T, ok bool) {
	select {
	case x := <-queue:
		batch = append(batch, x)
	case <-quit:
		return nil, false
	}
	for len(batch) < max {
		select {
		case x := <-queue:
			batch = append(batch, x)
		default:
			return batch, true
		}
	}
	return batch, true
}
