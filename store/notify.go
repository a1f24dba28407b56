package store

import (
	"context"
	"slices"
	"time"

	"github.com/lib/pq"

	"github.com/refundd/refundd/internal/metrics"
)

// NOTIFY channels. Notifications only wake listeners; what they act on is
// always read back from the tables, so a lost notification loses nothing.
const (
	// ChannelEvents carries "<run_id>:<seq>" for every committed append.
	ChannelEvents = "refundd_events"
	// channelGrants carries the id of a user whose grants or status changed.
	channelGrants = "refundd_grants"
	// channelWork says a run may have become due for a worker (a start, an
	// approval, a cancel). Kept apart from ChannelEvents so narration, the
	// bulk of appends, never wakes a worker.
	channelWork = "refundd_work"
	// channelQueue carries the approval queue's new version whenever a run
	// joins or leaves it (the queue_track trigger sends it).
	channelQueue = "refundd_queue"
)

// A transaction that NOTIFYs takes one lock for the whole database at
// commit and holds it until the commit is flushed: every such commit waits
// for the WAL flush of the one before, with no group commit between them
// (issue 12 measured it as the first contention, Lock:object). So business
// transactions do not NOTIFY themselves. What they would have sent is noted
// with the transaction (txn.noteAfterCommit) and, once it committed, handed to
// the process's notifier, which sends the notices of many commits in one
// small transaction of its own, committed without waiting for the flush.
// A wake-up then trails its commit by a round trip; a process that dies in
// between loses the wake-up, which only delays delivery until the next one
// (or a poll), as a lost notification always could.

type notice struct{ channel, payload string }

// notifyWork wakes workers once tx commits, not before: a worker woken
// earlier would find nothing to claim.
func notifyWork(_ context.Context, tx *txn) error {
	tx.noteAfterCommit(notice{channelWork, ""})
	return nil
}

// maxNotices bounds one notifier transaction (and what waits for the next).
const maxNotices = 1024

// WakeLocal makes what this store commits wake l's subscribers of the
// runs appended to at once, in this process, besides the NOTIFY that wakes
// every process's listener (l included: its subscribers then find they
// have read that seq already). The run's watchers here so hear a command
// made here (an approval, a cancel) without waiting for the round trip,
// and ahead of the worker the same NOTIFY wakes.
func (s *Store) WakeLocal(l *Listener) { s.local.Store(l) }

// notify wakes this process's run subscribers (WakeLocal) and queues
// notices for the notifier. It waits only while the queue is full
// (PostgreSQL is slower than the commits: back-pressure).
func (s *Store) notify(ns ...notice) {
	if len(ns) == 0 {
		return
	}
	if l := s.local.Load(); l != nil {
		l.wakeLocal(ns)
	}
	n := s.notifier
	n.begin()
	for _, x := range ns {
		select {
		case n.queue <- x:
		case <-n.quit:
			return
		}
	}
}

// sendNotices is the notifier's work on a batch: it drops repeats and
// sends the rest in one transaction.
func (s *Store) sendNotices(batch []notice) {
	seen := make(map[notice]bool, len(batch))
	batch = slices.DeleteFunc(batch, func(x notice) bool {
		dup := seen[x]
		seen[x] = true
		return dup
	})
	if err := s.sendBatch(batch); err != nil {
		metrics.NoticesLost.Add(float64(len(batch)))
	}
}

// notifySQL sends a batch of notices in one statement, its own
// transaction, committed without waiting for the WAL flush (set_config's
// local setting lasts until that commit); WITH ORDINALITY keeps the order
// they were queued in.
const notifySQL = `
WITH off AS (SELECT set_config('synchronous_commit', 'off', true))
SELECT pg_notify(t.c, t.p)
FROM off, unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(c, p, i)
ORDER BY t.i`

// sendBatch sends on the stream pool: wake-ups are the delivery path, and
// must not wait for a connection behind the writers either.
func (s *Store) sendBatch(batch []notice) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	channels := make([]string, len(batch))
	payloads := make([]string, len(batch))
	for i, x := range batch {
		channels[i], payloads[i] = x.channel, x.payload
	}
	stmt, err := s.preparedOn(ctx, s.streams, notifySQL)
	if err != nil {
		return err
	}
	_, err = stmt.ExecContext(ctx, pq.Array(channels), pq.Array(payloads))
	return err
}
