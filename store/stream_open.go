package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"
)

// Streams open by the thousand at once (a restart's reconnecting browsers,
// a load balancer moving clients): the session lookups of streams opening
// together are read in one statement (streamOpenBatchSQL), by a few
// readers that each take what waits, so a lone stream's lookup goes at
// once and a storm's go many to a statement.

const (
	// maxOpenBatch bounds one statement's lookups.
	maxOpenBatch = 64
	// openReaders is how many such statements may run at once.
	openReaders = 4
	// openBatchTimeout bounds one statement: it answers many callers, so
	// it takes no one caller's deadline.
	openBatchTimeout = 10 * time.Second
)

type openBatcher struct {
	start sync.Once
	queue chan *openRequest
	quit  chan struct{}
	wg    sync.WaitGroup
	reads atomic.Int64 // statements run, for tests
}

type openRequest struct {
	key   []byte // the session ID's hash
	runID uuid.UUID
	done  chan openAnswer // buffered: a reader never waits on a caller gone
}

type openAnswer struct {
	user        *User
	run         *Run
	hasApproval bool
	err         error
}

func newOpenBatcher() openBatcher {
	return openBatcher{queue: make(chan *openRequest, maxOpenBatch), quit: make(chan struct{})}
}

func (b *openBatcher) stop() {
	select {
	case <-b.quit:
	default:
		close(b.quit)
	}
	b.wg.Wait()
}

// openBySession is StreamOpen for a session, batched with the other
// streams opening at the same moment.
func (s *Store) openBySession(ctx context.Context, c StreamCredential) (*User, *Run, bool, error) {
	b := &s.opens
	b.start.Do(func() {
		for range openReaders {
			b.wg.Go(s.readOpens)
		}
	})
	req := &openRequest{key: hashSessionID(c.SessionID), runID: c.RunID, done: make(chan openAnswer, 1)}
	select {
	case b.queue <- req:
	case <-b.quit:
		return nil, nil, false, errStoreClosed
	case <-ctx.Done():
		return nil, nil, false, context.Cause(ctx)
	}
	select {
	case a := <-req.done:
		return a.user, a.run, a.hasApproval, a.err
	case <-b.quit:
		return nil, nil, false, errStoreClosed
	case <-ctx.Done():
		return nil, nil, false, context.Cause(ctx)
	}
}

// readOpens is one reader: it takes what waits, up to a batch, reads it in
// one statement and answers each request.
func (s *Store) readOpens() {
	b := &s.opens
	for {
		batch, ok := gather(b.queue, b.quit, maxOpenBatch)
		if !ok {
			return
		}
		answers := s.readOpenBatch(batch)
		for i, r := range batch {
			r.done <- answers[i]
		}
	}
}

// streamOpenBatchSQL is streamOpenBySessionSQL for many sessions and runs
// at once; a request that finds nothing has no row.
var streamOpenBatchSQL = `SELECT c.i, ` + streamOpenColumns + `
FROM unnest($1::bytea[], $2::uuid[]) WITH ORDINALITY AS c(id_hash, run_id, i)
JOIN sessions s ON s.id_hash = c.id_hash AND s.expires_at > now()
JOIN users u ON u.id = s.user_id AND u.disabled_at IS NULL
JOIN runs r ON r.id = c.run_id`

// readOpenBatch answers every request of batch: answers[i] is batch[i]'s.
// A batch of one takes the single statement, which costs less.
func (s *Store) readOpenBatch(batch []*openRequest) []openAnswer {
	s.opens.reads.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), openBatchTimeout)
	defer cancel()
	answers := make([]openAnswer, len(batch))
	if len(batch) == 1 {
		a := &answers[0]
		a.user, a.run, a.hasApproval, a.err = s.streamOpenOne(ctx, streamOpenBySessionSQL, batch[0].key, batch[0].runID)
		return answers
	}
	keys := make([][]byte, len(batch))
	runs := make([]string, len(batch))
	for i, r := range batch {
		keys[i], runs[i] = r.key, r.runID.String()
		answers[i].err = ErrNotFound
	}
	fail := func(err error) []openAnswer {
		for i := range answers {
			answers[i].err = fmt.Errorf("store: stream open: %w", err)
		}
		return answers
	}
	stmt, err := s.prepared(ctx, streamOpenBatchSQL)
	if err != nil {
		return fail(err)
	}
	var rows []streamOpenRow
	if err := stmt.SelectContext(ctx, &rows, pq.ByteaArray(keys), pq.StringArray(runs)); err != nil {
		return fail(err)
	}
	for _, row := range rows {
		u, r := row.U, row.R
		u.Grants = []string(row.Grants)
		answers[row.I-1] = openAnswer{user: &u, run: &r, hasApproval: row.HasApproval}
	}
	return answers
}
