package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"
)

// Sessions are kept server-side so that logging out (or disabling a user)
// ends them for good: the cookie only names a session, and a copy of it
// is worth nothing once the row is gone. The table keeps the SHA-256 of the
// ID, not the ID.

func hashSessionID(id string) []byte {
	sum := sha256.Sum256([]byte(id))
	return sum[:]
}

// CreateSession starts a session for userID that lasts maxAge and returns
// its new, random ID.
func (s *Store) CreateSession(ctx context.Context, userID int64, maxAge time.Duration) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("store: session id: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	err := s.inTx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (id_hash, user_id, expires_at)
            VALUES ($1, $2, now() + make_interval(secs => $3))`, hashSessionID(id), userID, maxAge.Seconds()); err != nil {
			return fmt.Errorf("store: create session: %w", err)
		}
		// Expired sessions are dead already; keep the table to the live ones.
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE expires_at < now()`); err != nil {
			return fmt.Errorf("store: prune sessions: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// UserBySession loads the user of a live session with their current
// grants. An unknown, ended or expired session is ErrNotFound. The user may
// be disabled: the caller decides what that means.
var userBySessionSQL = userWithGrantsSQL(`users.id = (SELECT user_id FROM sessions WHERE id_hash = $1 AND expires_at > now())`)

func (s *Store) UserBySession(ctx context.Context, id string) (*User, error) {
	return s.loadUser(ctx, userBySessionSQL, hashSessionID(id))
}

// EndSession ends a session; ending one that is gone already is fine. It
// notifies the user's live streams, as a grant change does, so the streams
// this session opened see it gone and close now rather than at their next
// periodic re-check; the user's other sessions re-check and carry on.
func (s *Store) EndSession(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *txn) error {
		var userIDs []int64
		if err := tx.SelectContext(ctx, &userIDs, `DELETE FROM sessions WHERE id_hash = $1 RETURNING user_id`, hashSessionID(id)); err != nil {
			return fmt.Errorf("store: end session: %w", err)
		}
		for _, u := range userIDs {
			if err := notifyUser(ctx, tx, u); err != nil {
				return err
			}
		}
		return nil
	})
}
