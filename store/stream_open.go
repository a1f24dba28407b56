package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"
)

// Streams open by the thousand at once (a restart's reconnecting browsers,
// a load balancer moving clients): the lookups of streams opening together
// are read in one statement per credential kind (streamOpenBatchSQL), by a
// reader that takes what waits and hashes the credentials, so a lone
// stream's lookup goes at once and a storm's go many to a statement,
// spaced openBatchPace apart.

const (
	// maxOpenBatch bounds one statement's lookups.
	maxOpenBatch = 64
	// openReaders is how many such statements may run at once. One: a
	// request that comes while a statement is out waits for it and goes
	// with the others in the next, and fewer, larger statements cost
	// PostgreSQL less. Opening 5,000 streams, its CPU per open was 76-86
	// µs with four readers, 58-70 with two, 40-48 with one.
	openReaders = 1
	// openBatchPace spaces the statements of a storm of opens (batcher's
	// pace): most of PostgreSQL's CPU per open is each statement's round
	// trip, not its execution. Opening 5,000 streams, 8 alternations: its
	// CPU per open was lower with 5 ms in 7, 29 µs against 32 on average.
	// A lone open is read at once.
	openBatchPace = 5 * time.Millisecond
	// openBatchTimeout bounds one statement: it answers many callers, so
	// it takes no one caller's deadline.
	openBatchTimeout = 10 * time.Second
)

// credKind is the kind of credential a stream opens with: each kind is
// read by its own statements.
type credKind int

const (
	bySession credKind = iota
	byToken
	credKinds // how many kinds there are
)

type openRequest struct {
	secret string   // the session ID or the token
	key    []byte   // its hash, taken by the reader (hashKeys)
	kind   credKind // which of the two secret is
	runID  uuid.UUID
	done   chan openAnswer // buffered: a reader never waits on a caller gone
}

type openAnswer struct {
	user        *User
	run         *Run
	hasApproval bool
	err         error
}

// answerOpens reads a batch in one statement per credential kind and
// answers each request.
func (s *Store) answerOpens(batch []*openRequest) {
	for i, a := range s.readOpenBatch(batch) {
		batch[i].done <- a
	}
}

// newOpenRequest is c as the readers look it up, with the channel its
// answer comes on.
func newOpenRequest(c *StreamCredential) *openRequest {
	r := &openRequest{secret: c.SessionID, kind: bySession, runID: c.RunID, done: make(chan openAnswer, 1)}
	if c.Token != "" {
		r.secret, r.kind = c.Token, byToken
	}
	return r
}

// hashKeys hashes each request's credential, which is how the tables know
// it. The reader does it, not the request's goroutine: SHA-256's frames
// were the deepest of an open, and they grew every open's stack to 8 KB,
// a copy of the 3 KB it held.
func hashKeys(batch []*openRequest) {
	for _, r := range batch {
		if r.kind == byToken {
			r.key = hashToken(r.secret)
		} else {
			r.key = hashSessionID(r.secret)
		}
		r.secret = ""
	}
}

// streamOpenBatchSQL is streamOpenSQL for many credentials of one kind and
// runs at once: by session, or by token, whose use is noted as a lone
// lookup notes it. A request that finds nothing has no row.
var streamOpenBatchSQL = [credKinds]string{
	bySession: streamOpenBatch(`WITH `, `s.user_id
    FROM unnest($1::bytea[], $2::uuid[]) WITH ORDINALITY AS c(id_hash, run_id, i)
    JOIN sessions s ON s.id_hash = c.id_hash AND s.expires_at > now()`),
	byToken: streamOpenBatch(liveTokensSQL(`token_hash = ANY($1::bytea[])`)+`, `, `t.user_id
    FROM unnest($1::bytea[], $2::uuid[]) WITH ORDINALITY AS c(token_hash, run_id, i)
    JOIN t ON t.token_hash = c.token_hash`),
}

// streamOpenBatch is a batch statement: with begins its WITH, and user
// ends c's select list, each request's place, run and user (the user
// found by the credential). The grants are read once per user of the
// batch (g), not once per stream: the streams a storm opens together are
// mostly one browser's, and each stream's own read of the grants was a
// third of a batch's execution.
func streamOpenBatch(with, user string) string {
	return with + `c AS (
    SELECT c.i, c.run_id, ` + user + `
), g AS (
    SELECT user_id, array_agg(name ORDER BY name) AS names FROM grants
    WHERE user_id IN (SELECT user_id FROM c) GROUP BY user_id
)
SELECT c.i, ` + streamOpenColumnsWith(`coalesce(g.names, '{}')`) + `
FROM c
JOIN users u ON u.id = c.user_id AND u.disabled_at IS NULL
LEFT JOIN g ON g.user_id = u.id
JOIN runs r ON r.id = c.run_id`
}

// streamOpenOneSQL is the single statement of each kind.
var streamOpenOneSQL = [credKinds]string{bySession: streamOpenBySessionSQL, byToken: streamOpenByTokenSQL}

// readOpenBatch answers every request of batch: answers[i] is batch[i]'s.
// Each kind of credential takes a statement; a kind with one request takes
// the single statement, which costs less.
func (s *Store) readOpenBatch(batch []*openRequest) []openAnswer {
	hashKeys(batch)
	ctx, cancel := context.WithTimeout(context.Background(), openBatchTimeout)
	defer cancel()
	answers := make([]openAnswer, len(batch))
	for kind := range credKinds {
		var at []int // the places of this kind's requests
		for i, r := range batch {
			if r.kind == kind {
				at = append(at, i)
			}
		}
		switch len(at) {
		case 0:
			continue
		case 1:
			s.openReads.Add(1)
			r, a := batch[at[0]], &answers[at[0]]
			a.user, a.run, a.hasApproval, a.err = s.streamOpenOne(ctx, streamOpenOneSQL[kind], r.key, r.runID)
		default:
			s.readOpenKind(ctx, kind, batch, at, answers)
		}
	}
	return answers
}

// readOpenKind reads the requests at places at (all of one kind) in one
// statement, into their answers.
func (s *Store) readOpenKind(ctx context.Context, kind credKind, batch []*openRequest, at []int, answers []openAnswer) {
	s.openReads.Add(1)
	keys := make([][]byte, len(at))
	runs := make([]string, len(at))
	for j, i := range at {
		keys[j], runs[j] = batch[i].key, batch[i].runID.String()
		answers[i].err = ErrNotFound
	}
	rows, err := s.readOpenRows(ctx, kind, keys, runs)
	if err != nil {
		for _, i := range at {
			answers[i].err = fmt.Errorf("store: stream open: %w", err)
		}
		return
	}
	for _, row := range rows {
		u, r := row.U, row.R
		u.Grants = []string(row.Grants)
		answers[at[row.I-1]] = openAnswer{user: &u, run: &r, hasApproval: row.HasApproval}
	}
}

// readOpenRows is one statement of kind for keys and their runs.
func (s *Store) readOpenRows(ctx context.Context, kind credKind, keys [][]byte, runs []string) ([]streamOpenRow, error) {
	stmt, err := s.prepared(ctx, streamOpenBatchSQL[kind])
	if err != nil {
		return nil, err
	}
	rs, err := stmt.QueryContext(ctx, pq.ByteaArray(keys), pq.StringArray(runs))
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := make([]streamOpenRow, 0, len(keys))
	for rs.Next() {
		out = append(out, streamOpenRow{})
		if err := rs.Scan(out[len(out)-1].fields(true)...); err != nil {
			return nil, err
		}
	}
	return out, rs.Err()
}
