package store

import (
	"context"
	"database/sql"
	"fmt"

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

const streamAccessSQL = `
SELECT c.i, u.id, u.role, (u.disabled_at IS NOT NULL) AS disabled,
    coalesce((SELECT array_agg(g.name ORDER BY g.name) FROM grants g WHERE g.user_id = u.id), '{}') AS grants,
    r.owner_id,
    EXISTS (SELECT 1 FROM approvals a WHERE a.run_id = c.run_id) AS has_approval
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
