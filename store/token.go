package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Token is an API token's record. The token itself is never stored: only
// its SHA-256, which is enough to recognise it and useless to whoever reads
// the table. 32 random bytes need no slow hash: nobody guesses them.
type Token struct {
	ID         int64        `db:"id"`
	UserID     int64        `db:"user_id"`
	Name       string       `db:"name"`
	CreatedAt  time.Time    `db:"created_at"`
	LastUsedAt sql.NullTime `db:"last_used_at"`
	RevokedAt  sql.NullTime `db:"revoked_at"`
}

// Revoked reports whether the token no longer works.
func (t *Token) Revoked() bool { return t.RevokedAt.Valid }

// TokenPrefix starts every API token, so one is recognisable in a leaked
// config file or a secret scanner.
const TokenPrefix = "rfd_"

const tokenColumns = `id, user_id, name, created_at, last_used_at, revoked_at`

func hashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// CreateToken makes a new API token for userID and returns its record and
// the token. The token is shown to the admin once and cannot be recovered.
func (s *Store) CreateToken(ctx context.Context, userID int64, name string) (*Token, string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return nil, "", Refuse(CodeInvalid, "refuse.token_name", nil)
	case len(name) > 100:
		return nil, "", Refuse(CodeInvalid, "refuse.token_name_long", nil)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, "", fmt.Errorf("store: token: %w", err)
	}
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(secret)
	var t Token
	err := s.inTx(ctx, func(tx *txn) error {
		err := tx.GetContext(ctx, &t, `INSERT INTO api_tokens (user_id, name, token_hash)
            SELECT id, $2, $3 FROM users WHERE id = $1
            RETURNING `+tokenColumns, userID, name, hashToken(token))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("store: create token: %w", err)
		}
		return audit(ctx, tx, AuditTokenCreated, UserSubject(userID), map[string]any{"token_id": t.ID, "name": name})
	})
	if err != nil {
		return nil, "", err
	}
	return &t, token, nil
}

// Tokens lists every API token, newest first.
func (s *Store) Tokens(ctx context.Context) ([]Token, error) {
	tokens := []Token{}
	if err := s.db.SelectContext(ctx, &tokens, `SELECT `+tokenColumns+` FROM api_tokens ORDER BY id DESC`); err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	return tokens, nil
}

// TokenByID loads one token's record.
func (s *Store) TokenByID(ctx context.Context, id int64) (*Token, error) {
	var t Token
	err := s.db.GetContext(ctx, &t, `SELECT `+tokenColumns+` FROM api_tokens WHERE id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: token: %w", err)
	}
	return &t, nil
}

// RevokeToken stops a token from working, at once: every API request looks
// the token up again. Live streams of its user are notified to re-check.
// Revoking a revoked token changes nothing.
func (s *Store) RevokeToken(ctx context.Context, id int64) error {
	return s.inTx(ctx, func(tx *txn) error {
		var t Token
		err := tx.GetContext(ctx, &t, `SELECT `+tokenColumns+` FROM api_tokens WHERE id = $1 FOR UPDATE`, id)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("store: revoke token: %w", err)
		}
		if t.Revoked() {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE api_tokens SET revoked_at = now() WHERE id = $1`, id); err != nil {
			return fmt.Errorf("store: revoke token: %w", err)
		}
		if err := notifyUser(ctx, tx, t.UserID); err != nil {
			return err
		}
		return audit(ctx, tx, AuditTokenRevoked, UserSubject(t.UserID), map[string]any{"token_id": id, "name": t.Name})
	})
}

// liveTokenSQL begins a statement that finds a live token by its hash ($1)
// as t, and notes its last use to the minute (a write only once a minute,
// not one per request) if its user is enabled. The statement goes on to
// read the user whose id is (SELECT user_id FROM t).
var liveTokenSQL = liveTokensSQL(`token_hash = $1`)

// liveTokensSQL is liveTokenSQL for the tokens whose hash matches match:
// t holds each live one (with its token_hash), each one's use noted.
func liveTokensSQL(match string) string {
	return `WITH t AS (
    SELECT id, user_id, last_used_at, token_hash FROM api_tokens WHERE ` + match + ` AND revoked_at IS NULL
), touch AS (
    UPDATE api_tokens SET last_used_at = now() FROM t
    WHERE api_tokens.id = t.id AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute')
      AND EXISTS (SELECT 1 FROM users u WHERE u.id = t.user_id AND u.disabled_at IS NULL)
) `
}

// userByTokenSQL finds a live token's user in one statement.
var userByTokenSQL = liveTokenSQL + userWithGrantsSQL(`users.disabled_at IS NULL AND users.id = (SELECT user_id FROM t)`)

// UserByToken resolves an API token to its user, loaded afresh with their
// current grants. An unknown or revoked token, or a disabled user, is
// ErrNotFound.
func (s *Store) UserByToken(ctx context.Context, token string) (*User, error) {
	if !strings.HasPrefix(token, TokenPrefix) {
		return nil, ErrNotFound
	}
	return s.loadUser(ctx, userByTokenSQL, hashToken(token))
}
