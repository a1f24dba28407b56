package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/lib/pq"
)

// StreamCredential is what a live stream was opened with: a session ID or
// an API token (one of them), and the run it follows.
type StreamCredential struct {
	SessionID string
	Token     string
	RunID     uuid.UUID
}

// StreamFacts is what decides a stream's access now. User is nil when the
// credential no longer works (an ended or expired session, a revoked
// token, a disabled user); Run is nil when the run is gone. Only the
// fields access depends on are read: the user's ID, role and grants, the
// run's owner.
type StreamFacts struct {
	User        *User
	Run         *Run
	HasApproval bool
}

var streamAccessSQL = `
SELECT c.i, u.id, u.role, (u.disabled_at IS NOT NULL) AS disabled,
    ` + grantsOf("u") + ` AS grants,
    r.owner_id,
    ` + familyAskedApprovalSQL("r") + ` AS has_approval
FROM unnest($1::bytea[], $2::bytea[], $3::uuid[]) WITH ORDINALITY AS c(session_hash, token_hash, run_id, i)
LEFT JOIN sessions s ON s.id_hash = c.session_hash AND s.expires_at > now()
LEFT JOIN api_tokens t ON t.token_hash = c.token_hash AND t.revoked_at IS NULL
LEFT JOIN users u ON u.id = coalesce(s.user_id, t.user_id)
LEFT JOIN runs r ON r.id = c.run_id
ORDER BY c.i`

// StreamAccess re-reads, in one statement, the facts access depends on for
// every credential given (a process's open streams), so re-checking all of
// them costs one query, not one per stream. facts[i] answers creds[i].
func (s *Store) StreamAccess(ctx context.Context, creds []StreamCredential) ([]StreamFacts, error) {
	if len(creds) == 0 {
		return nil, nil
	}
	// An empty hash never matches: a stream has a session or a token.
	sessions := make([][]byte, len(creds))
	tokens := make([][]byte, len(creds))
	runs := make([]string, len(creds))
	for i, c := range creds {
		sessions[i], tokens[i] = []byte{}, []byte{}
		if c.SessionID != "" {
			sessions[i] = hashSessionID(c.SessionID)
		}
		if c.Token != "" {
			tokens[i] = hashToken(c.Token)
		}
		runs[i] = c.RunID.String()
	}
	rows, err := s.db.QueryContext(ctx, streamAccessSQL, pq.ByteaArray(sessions), pq.ByteaArray(tokens), pq.StringArray(runs))
	if err != nil {
		return nil, fmt.Errorf("store: stream access: %w", err)
	}
	defer rows.Close()
	out := make([]StreamFacts, len(creds))
	for rows.Next() {
		var (
			i               int
			userID, ownerID sql.NullInt64
			role            sql.NullString
			disabled        sql.NullBool
			grants          pq.StringArray
			hasApproval     bool
		)
		if err := rows.Scan(&i, &userID, &role, &disabled, &grants, &ownerID, &hasApproval); err != nil {
			return nil, fmt.Errorf("store: stream access: %w", err)
		}
		f := &out[i-1]
		if userID.Valid && !disabled.Bool {
			f.User = &User{ID: userID.Int64, Role: role.String, Grants: grants}
		}
		if ownerID.Valid {
			f.Run = &Run{ID: creds[i-1].RunID, OwnerID: ownerID.Int64}
		}
		f.HasApproval = hasApproval
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: stream access: %w", err)
	}
	return out, nil
}

// prefixed lists columns (a columns constant) as "alias.col" AS "alias.col",
// for sqlx to scan into the struct field tagged db:"alias".
func prefixed(alias, columns string) string {
	var b strings.Builder
	for i, c := range strings.Split(columns, ",") {
		c = strings.TrimSpace(c)
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `%s.%s AS "%s.%s"`, alias, c, alias, c)
	}
	return b.String()
}

// streamOpenColumns are what opening a stream reads, from users u and
// runs r: the user with their grants, the run, and whether it asked for
// an approval.
var streamOpenColumns = streamOpenColumnsWith(grantsOf("u"))

// streamOpenColumnsWith is streamOpenColumns with the user's grants read
// by grants.
func streamOpenColumnsWith(grants string) string {
	return prefixed("u", userColumns) + `,
    ` + grants + ` AS grants,
    ` + prefixed("r", runColumns) + `,
    ` + familyAskedApprovalSQL("r") + ` AS has_approval`
}

// streamOpenSQL reads a stream's user (who is the user the credential
// names) and its run, in one statement. It finds nothing unless both exist
// and the user is enabled.
func streamOpenSQL(prefix, user string) string {
	return prefix + `SELECT ` + streamOpenColumns + `
FROM users u, runs r
WHERE u.disabled_at IS NULL AND u.id = ` + user + ` AND r.id = $2`
}

var (
	streamOpenBySessionSQL = streamOpenSQL("", `(SELECT user_id FROM sessions WHERE id_hash = $1 AND expires_at > now())`)
	// With a token, its last use is noted as UserByToken does.
	streamOpenByTokenSQL = streamOpenSQL(liveTokenSQL, `(SELECT user_id FROM t)`)
)

// StreamOpen reads what opening a stream needs, in one statement: the
// user the credential (a session or a token) belongs to, with their
// grants, and the run with whether it asked for an approval (who may see
// it depends on that). ErrNotFound when the credential does not work, its
// user is disabled or the run does not exist; UserBySession, UserByToken
// and RunForAccess then say which. The lookup shares its statement with
// those of other streams opening at the same moment (stream_open.go).
// c is a pointer and the wait is here, not in a helper: an open waits on
// the stack of its connection's goroutine, under the whole middleware
// chain, and a few frames more grew that stack to 8 KB at every open.
func (s *Store) StreamOpen(ctx context.Context, c *StreamCredential) (*User, *Run, bool, error) {
	if c.Token == "" && c.SessionID == "" {
		return nil, nil, false, ErrNotFound
	}
	b := s.opens
	req := newOpenRequest(c)
	if err := b.put(ctx, req); err != nil {
		return nil, nil, false, err
	}
	a, err := await(ctx, b, req.done)
	if err != nil {
		return nil, nil, false, err
	}
	return a.user, a.run, a.hasApproval, a.err
}

// streamOpenRow is a row of the streamOpen…SQL statements.
type streamOpenRow struct {
	I           int // the request's place in a batch
	U           User
	Grants      pq.StringArray
	R           Run
	HasApproval bool
}

// fields are row's destinations in streamOpenColumns' order, after c.i if
// batched. Scanned by hand: opens come by the thousand after a restart,
// and sqlx's reflection was half the CPU of reading them.
// TestStreamOpen_ReadsRunAndUserWhole holds the order to the columns.
func (row *streamOpenRow) fields(batched bool) []any {
	u, r := &row.U, &row.R
	f := make([]any, 0, 33) // c.i and the 32 columns
	if batched {
		f = append(f, &row.I)
	}
	return append(f,
		&u.ID, &u.Email, &u.Name, &u.Role, &u.PasswordHash, &u.DisabledAt, &u.CreatedAt, &u.Language,
		&row.Grants,
		&r.ID, &r.Kind, &r.ParentRunID, &r.CorrelationID, &r.Position, &r.OwnerID, &r.OrderID,
		&r.Amount, &r.Currency, &r.Reason, &r.ClientRequestID, &r.State, &r.LastSeq,
		&r.ReplayFloor, &r.SeqGaps, &r.CancelRequestedAt, &r.CreatedAt, &r.UpdatedAt, &r.FinishedAt, &r.RetryOf,
		&r.ProviderCheck, &r.Language, &row.HasApproval)
}

// streamOpenOne is StreamOpen in a statement of its own: query is one of
// the streamOpen…SQL, key the credential's hash.
func (s *Store) streamOpenOne(ctx context.Context, query string, key []byte, runID uuid.UUID) (*User, *Run, bool, error) {
	stmt, err := s.prepared(ctx, query)
	if err != nil {
		return nil, nil, false, err
	}
	var row streamOpenRow
	switch err := stmt.QueryRowContext(ctx, key, runID).Scan(row.fields(false)...); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil, false, ErrNotFound
	case err != nil:
		return nil, nil, false, fmt.Errorf("store: stream open: %w", err)
	}
	row.U.Grants = []string(row.Grants)
	return &row.U, &row.R, row.HasApproval, nil
}
