package stream

import (
	"cmp"
	"math/rand/v2"
	"time"

	"github.com/refundd/refundd/store"
)

// Config tunes the live streams. Zero values take the defaults (Fill).
type Config struct {
	Heartbeat time.Duration // a comment when nothing was sent for this long (up to a quarter more: heartbeatIn); default 15s
	Recheck   time.Duration // every stream's access is re-checked this often (a run's in one batched query); default 30s
	Poll      time.Duration // store reads without a Listener; default 1s
	// Retry is the least SSE retry hint a stream gets; each gets Retry
	// plus a random share of RetrySpread, so that the clients of a server
	// that went away do not all come back in one wave (RetryHint).
	Retry       time.Duration // default 400ms
	RetrySpread time.Duration // default 2300ms
	// Drain is the window within which shutdown has every stream's client
	// back elsewhere: it tells each stream to reconnect (event: restart)
	// and ends it at a random moment early enough that its retry hint
	// still falls within the window (Drain less Retry and RetrySpread).
	Drain time.Duration // default 8s
	// Busy is the retry hint sent with a stream refused at a cap, and the
	// API's Retry-After; default 30s.
	Busy     time.Duration
	PageSize int // events per store read; default 500, at most store.MaxPage
	// Buffer and BufferBytes bound what one subscriber may have queued
	// (events, payload bytes). A full buffer coalesces narration; one that
	// still overflows is closed, and the client replays from the store
	// when it reconnects.
	Buffer      int           // default 512
	BufferBytes int           // default 1 MiB
	SlowAfter   time.Duration // the least a write may take: a client that reads nothing for this long (up to 1.5 times) is cut; default 10s
	// MaxPerUser and MaxStreams cap the open streams of one user and of
	// the process (MAX_STREAMS_PER_USER, MAX_STREAMS).
	MaxPerUser int // default 16
	MaxStreams int // default 10000
	// ReadGap is the least time between two reads of a state stream (the
	// approval queue, a run list): a flood of changes costs each open one
	// a few reads a second, and a change still shows within a second.
	ReadGap time.Duration // default 200ms
}

// The defaults of the settings refundd's configuration reads from the
// environment (config.go).
const (
	DefaultMaxPerUser  = 16                      // MAX_STREAMS_PER_USER
	DefaultRetry       = 400 * time.Millisecond  // STREAM_RETRY
	DefaultRetrySpread = 2300 * time.Millisecond // STREAM_RETRY_SPREAD
	DefaultDrain       = 8 * time.Second         // STREAM_DRAIN
)

// Fill puts the defaults in the zero fields.
func (c *Config) Fill() {
	c.Heartbeat = cmp.Or(c.Heartbeat, 15*time.Second)
	c.Recheck = cmp.Or(c.Recheck, 30*time.Second)
	c.Poll = cmp.Or(c.Poll, time.Second)
	c.Retry = cmp.Or(c.Retry, DefaultRetry)
	c.RetrySpread = cmp.Or(c.RetrySpread, DefaultRetrySpread)
	c.Drain = cmp.Or(c.Drain, DefaultDrain)
	c.Busy = cmp.Or(c.Busy, 30*time.Second)
	c.PageSize = min(max(cmp.Or(c.PageSize, 500), 1), store.MaxPage)
	c.Buffer = cmp.Or(c.Buffer, 512)
	c.BufferBytes = cmp.Or(c.BufferBytes, 1<<20)
	c.SlowAfter = cmp.Or(c.SlowAfter, 10*time.Second)
	c.MaxPerUser = cmp.Or(c.MaxPerUser, DefaultMaxPerUser)
	c.MaxStreams = cmp.Or(c.MaxStreams, 10000)
	c.ReadGap = cmp.Or(c.ReadGap, 200*time.Millisecond)
}

// RetryHint is one stream's retry hint: Retry, plus a random share of
// RetrySpread.
func (c *Config) RetryHint() time.Duration { return c.Retry + spread(c.RetrySpread) }

// spread is a random duration in [0, d].
func spread(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}
