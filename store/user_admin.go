package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/lib/pq"
)

// Roles lists every role, for forms and validation.
var Roles = []string{RoleCustomer, RoleApprover, RoleSupport, RoleAdmin}

// Grants lists every grant an admin can give.
var Grants = []string{GrantRefundAccess}

// Users lists every user with their grants, by email.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	users := []User{}
	if err := s.db.SelectContext(ctx, &users, `SELECT `+userColumns+` FROM users ORDER BY lower(email)`); err != nil {
		return nil, fmt.Errorf("store: list users: %w", err)
	}
	var grants []struct {
		UserID int64  `db:"user_id"`
		Name   string `db:"name"`
	}
	if err := s.db.SelectContext(ctx, &grants, `SELECT user_id, name FROM grants ORDER BY user_id, name`); err != nil {
		return nil, fmt.Errorf("store: list grants: %w", err)
	}
	byID := make(map[int64]*User, len(users))
	for i := range users {
		byID[users[i].ID] = &users[i]
	}
	for _, g := range grants {
		if u := byID[g.UserID]; u != nil {
			u.Grants = append(u.Grants, g.Name)
		}
	}
	return users, nil
}

// SetRole changes a user's role and notifies live streams, which re-check
// what the user may see.
func (s *Store) SetRole(ctx context.Context, userID int64, role string) error {
	if !slices.Contains(Roles, role) {
		return Refuse(CodeInvalid, "refuse.no_role", map[string]any{"Role": strconv.Quote(role)})
	}
	return s.inTx(ctx, func(tx *txn) error {
		var old string
		err := tx.GetContext(ctx, &old, `SELECT role FROM users WHERE id = $1 FOR UPDATE`, userID)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("store: set role: %w", err)
		}
		if old == role {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET role = $2 WHERE id = $1`, userID, role); err != nil {
			return fmt.Errorf("store: set role: %w", err)
		}
		if err := notifyUser(ctx, tx, userID); err != nil {
			return err
		}
		return audit(ctx, tx, AuditRoleChanged, UserSubject(userID), map[string]any{"from": old, "to": role})
	})
}

// SetDisabled disables (or enables again) a user. A disabled user is out at
// their next request: their sessions end, API tokens reload the user every
// time, and live streams are notified to re-check now.
func (s *Store) SetDisabled(ctx context.Context, userID int64, disabled bool) error {
	return s.inTx(ctx, func(tx *txn) error {
		q := `UPDATE users SET disabled_at = NULL WHERE id = $1 AND disabled_at IS NOT NULL`
		action := AuditUserEnabled
		if disabled {
			q = `UPDATE users SET disabled_at = now() WHERE id = $1 AND disabled_at IS NULL`
			action = AuditUserDisabled
		}
		res, err := tx.ExecContext(ctx, q, userID)
		if err != nil {
			return fmt.Errorf("store: disable user: %w", err)
		}
		n, err := affected(res, "disable user")
		if err != nil {
			return err
		}
		if n == 0 {
			// Already so, or no such user: tell which.
			var exists bool
			if err := tx.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM users WHERE id = $1)`, userID); err != nil {
				return fmt.Errorf("store: disable user: %w", err)
			}
			if !exists {
				return ErrNotFound
			}
			return nil
		}
		if disabled {
			if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = $1`, userID); err != nil {
				return fmt.Errorf("store: end sessions: %w", err)
			}
		}
		if err := notifyUser(ctx, tx, userID); err != nil {
			return err
		}
		return audit(ctx, tx, action, UserSubject(userID), nil)
	})
}

// notifyUser tells live streams that what userID may see may have changed;
// delivered at commit.
func notifyUser(ctx context.Context, tx *txn, userID int64) error {
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channelGrants, fmt.Sprint(userID)); err != nil {
		return fmt.Errorf("store: notify user: %w", err)
	}
	return nil
}

// UsersByID loads the users with these IDs (repeats allowed), by ID; IDs
// of users that do not exist are left out.
func (s *Store) UsersByID(ctx context.Context, ids []int64) (map[int64]User, error) {
	users := []User{}
	if err := s.db.SelectContext(ctx, &users, `SELECT `+userColumns+` FROM users WHERE id = ANY($1)`, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("store: users by id: %w", err)
	}
	out := make(map[int64]User, len(users))
	for _, u := range users {
		out[u.ID] = u
	}
	return out, nil
}
