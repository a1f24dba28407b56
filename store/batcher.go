package store

import (
	"context"
	"sync"
)

// batcher is the group-commit queue under the narration writer, the
// notifier and the stream-open readers: callers put items on queue, and
// workers, started with the first item, each take what waits in batches
// (gather) until stop. While one batch is written the next gathers, so a
// quiet process handles each item at once and a busy one many at a time.
type batcher[T any] struct {
	start sync.Once
	queue chan T
	quit  chan struct{}
	wg    sync.WaitGroup
}

// newBatcher makes a batcher whose queue holds up to queued items.
func newBatcher[T any](queued int) batcher[T] {
	return batcher[T]{queue: make(chan T, queued), quit: make(chan struct{})}
}

// run starts, the first time it is called, workers goroutines that each
// hand do every batch of up to max items until stop.
func (b *batcher[T]) run(workers, max int, do func([]T)) {
	b.start.Do(func() {
		for range workers {
			b.wg.Go(func() {
				for {
					batch, ok := gather(b.queue, b.quit, max)
					if !ok {
						return
					}
					do(batch)
				}
			})
		}
	})
}

// put queues x: errStoreClosed after stop, ctx's cause when ctx ends first.
func (b *batcher[T]) put(ctx context.Context, x T) error {
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
