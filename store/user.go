package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/lib/pq"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Roles a user can have.
const (
	RoleCustomer = "customer"
	RoleApprover = "approver"
	RoleSupport  = "support"
	RoleAdmin    = "admin"
)

// GrantRefundAccess lets a customer start refunds and see their transcripts.
const GrantRefundAccess = "refund_access"

// User is a person who can log in.
type User struct {
	ID           int64        `db:"id"`
	Email        string       `db:"email"`
	Name         string       `db:"name"`
	Role         string       `db:"role"`
	PasswordHash string       `db:"password_hash" json:"-"`
	DisabledAt   sql.NullTime `db:"disabled_at"`
	CreatedAt    time.Time    `db:"created_at"`
	// Language is the one the user chose for the pages (a BCP 47 tag);
	// "" lets their browser decide.
	Language string   `db:"language"`
	Grants   []string `db:"-"`
}

// Disabled reports whether the user may no longer log in.
func (u *User) Disabled() bool { return u.DisabledAt.Valid }

// Has reports whether the user holds the named grant.
func (u *User) Has(grant string) bool {
	for _, g := range u.Grants {
		if g == grant {
			return true
		}
	}
	return false
}

// ErrBadCredentials is the one answer to a failed login, whatever failed.
var ErrBadCredentials = errors.New("store: wrong email or password")

const userColumns = `id, email, name, role, password_hash, disabled_at, created_at, language`

// UserByID loads a user and their current grants.
func (s *Store) UserByID(ctx context.Context, id int64) (*User, error) {
	return s.loadUser(ctx, userWithGrantsSQL(`users.id = $1`), id)
}

// UserByEmail loads a user by email, case-insensitively.
func (s *Store) UserByEmail(ctx context.Context, email string) (*User, error) {
	return s.loadUser(ctx, userWithGrantsSQL(`lower(users.email) = lower($1)`), strings.TrimSpace(email))
}

// grantsOf is the grant names of the user row alias, sorted, as an
// array ('{}' for none).
func grantsOf(alias string) string {
	return `coalesce((SELECT array_agg(g.name ORDER BY g.name) FROM grants g WHERE g.user_id = ` + alias + `.id), '{}')`
}

// userWithGrantsSQL reads a user and their grants in one statement; where
// is the condition that picks the user.
func userWithGrantsSQL(where string) string {
	return `SELECT ` + userColumns + `,
    ` + grantsOf("users") + ` AS grants
    FROM users WHERE ` + where
}

// loadUser reads one user with their grants (query is built on
// userWithGrantsSQL) in one prepared statement: every request of a
// signed-in user runs it.
func (s *Store) loadUser(ctx context.Context, query string, arg any) (*User, error) {
	stmt, err := s.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	var row struct {
		User
		Grants pq.StringArray `db:"grants"`
	}
	if err := stmt.GetContext(ctx, &row, arg); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("store: load user: %w", err)
	}
	u := row.User
	u.Grants = []string(row.Grants)
	return &u, nil
}

// Authenticate checks an email and password. Every failure, including a
// disabled account, is ErrBadCredentials so the answer reveals nothing.
// Attempts are throttled per account and per the ctx actor's address
// (ErrTooManyAttempts, before any password check) and audited.
func (s *Store) Authenticate(ctx context.Context, email, password string) (*User, error) {
	email = strings.TrimSpace(email)
	attempt, err := s.reserveLoginAttempt(ctx, email, ActorFrom(ctx).IP)
	if err != nil {
		return nil, err
	}
	u, err := s.UserByEmail(ctx, email)
	if errors.Is(err, ErrNotFound) {
		// Spend the same time as a real check so timing reveals nothing.
		_ = bcrypt.CompareHashAndPassword(dummyHash, []byte(password))
		return nil, cmp.Or(s.loginFailed(ctx, nil, email, "unknown_email"), ErrBadCredentials)
	}
	if err != nil {
		return nil, err
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) != nil {
		return nil, cmp.Or(s.loginFailed(ctx, u, email, "wrong_password"), ErrBadCredentials)
	}
	if u.Disabled() {
		return nil, cmp.Or(s.loginFailed(ctx, u, email, "disabled"), ErrBadCredentials)
	}
	if err := s.loginSucceeded(ctx, u, email, attempt); err != nil {
		return nil, err
	}
	return u, nil
}

var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("no such user"), bcrypt.DefaultCost)

// CreateUser adds a user with a bcrypt-hashed password and the given grants.
func (s *Store) CreateUser(ctx context.Context, email, name, role, password string, grants ...string) (*User, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return nil, fmt.Errorf("store: hash password: %w", err)
	}
	var id int64
	err = s.inTx(ctx, func(tx *txn) error {
		if err := tx.GetContext(ctx, &id,
			`INSERT INTO users (email, name, role, password_hash) VALUES ($1, $2, $3, $4) RETURNING id`,
			strings.TrimSpace(email), name, role, string(hash)); err != nil {
			return fmt.Errorf("store: create user: %w", err)
		}
		for _, g := range grants {
			if _, err := tx.ExecContext(ctx, `INSERT INTO grants (user_id, name) VALUES ($1, $2)`, id, g); err != nil {
				return fmt.Errorf("store: create grant: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.UserByID(ctx, id)
}

// SetGrant gives (on=true) or takes away a grant, and notifies live streams
// so they re-check what the user may see.
func (s *Store) SetGrant(ctx context.Context, userID int64, grant string, on bool) error {
	return s.inTx(ctx, func(tx *txn) error {
		q := `DELETE FROM grants WHERE user_id = $1 AND name = $2`
		if on {
			q = `INSERT INTO grants (user_id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING`
		}
		res, err := tx.ExecContext(ctx, q, userID, grant)
		if err != nil {
			return fmt.Errorf("store: set grant: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channelGrants, fmt.Sprint(userID)); err != nil {
			return fmt.Errorf("store: notify grant: %w", err)
		}
		if n, err := affected(res, "set grant"); err != nil || n == 0 {
			return err // nothing changed: nothing to audit
		}
		return audit(ctx, tx, grantAction(on), UserSubject(userID), map[string]any{"grant": grant})
	})
}

// SetLanguage saves the language user id chose for the pages ("" lets
// their browser decide). The caller checks it is one the catalogues speak.
func (s *Store) SetLanguage(ctx context.Context, id int64, lang string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE users SET language = $2 WHERE id = $1`, id, lang)
	if err != nil {
		return fmt.Errorf("store: set language: %w", err)
	}
	if n, err := affected(res, "set language"); err != nil {
		return err
	} else if n == 0 {
		return ErrNotFound
	}
	return nil
}
