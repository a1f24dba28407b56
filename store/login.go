package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// Login throttling: at most so many failed attempts per account and per
// client address within LoginWindow. Successful logins do not count. The
// counts live in PostgreSQL, not in process memory, so the limit holds
// across every serve process of a deployment and survives a restart.
const (
	LoginAttemptsPerAccount = 5
	LoginAttemptsPerAddress = 20
	LoginWindow             = time.Minute
)

// ErrTooManyAttempts refuses a login attempt before the password is looked
// at.
var ErrTooManyAttempts = &Error{Code: CodeRateLimited, Message: "Too many attempts; wait a minute and try again."}

type throttle struct {
	key []byte
	max int
}

// throttleKey hashes what is counted, so the table never holds a typed
// email (or a password typed into the email field) in clear.
func throttleKey(kind, value string) []byte {
	sum := sha256.Sum256([]byte(kind + ":" + value))
	return sum[:]
}

// reserveLoginAttempt counts an attempt against the account and the
// address before the password is checked, so a burst of parallel guesses
// cannot all slip under the limit; a successful login takes its reservation
// back (forgetLoginAttempts). Over the limit it is ErrTooManyAttempts and
// nothing is recorded, so the limit is a rate, not a lock-out that an
// attacker can extend forever.
func (s *Store) reserveLoginAttempt(ctx context.Context, email, ip string) (uuid.UUID, error) {
	id := uuid.New()
	throttles := []throttle{{throttleKey("account", strings.ToLower(email)), LoginAttemptsPerAccount}}
	if ip != "" {
		throttles = append(throttles, throttle{throttleKey("address", ip), LoginAttemptsPerAddress})
	}
	// Lock in one order so two attempts never wait on each other in a cycle.
	slices.SortFunc(throttles, func(a, b throttle) int { return bytes.Compare(a.key, b.key) })
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		for _, t := range throttles {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(binary.BigEndian.Uint64(t.key))); err != nil {
				return fmt.Errorf("store: lock login throttle: %w", err)
			}
		}
		for _, t := range throttles {
			var n int
			if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM login_attempts
                WHERE key = $1 AND at > now() - make_interval(secs => $2)`, t.key, LoginWindow.Seconds()); err != nil {
				return fmt.Errorf("store: count login attempts: %w", err)
			}
			if n >= t.max {
				return ErrTooManyAttempts
			}
		}
		for _, t := range throttles {
			if _, err := tx.ExecContext(ctx, `INSERT INTO login_attempts (key, attempt_id) VALUES ($1, $2)`, t.key, id); err != nil {
				return fmt.Errorf("store: record login attempt: %w", err)
			}
		}
		// Keep the table as small as the window.
		if _, err := tx.ExecContext(ctx, `DELETE FROM login_attempts WHERE at < now() - make_interval(secs => $1)`, LoginWindow.Seconds()); err != nil {
			return fmt.Errorf("store: prune login attempts: %w", err)
		}
		return nil
	})
	return id, err
}

// loginSucceeded takes back the attempt's reservation and clears the
// account's earlier failures (whoever logged in knows the password), and
// records the login, in one transaction.
func (s *Store) loginSucceeded(ctx context.Context, u *User, email string, attempt uuid.UUID) error {
	ctx = WithActor(ctx, Actor{UserID: u.ID, IP: ActorFrom(ctx).IP})
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM login_attempts WHERE attempt_id = $1 OR key = $2`,
			attempt, throttleKey("account", strings.ToLower(email))); err != nil {
			return fmt.Errorf("store: forget login attempts: %w", err)
		}
		return audit(ctx, tx, AuditLogin, UserSubject(u.ID), nil)
	})
}

// loginFailed records a failed login. The reason is for support's eyes in
// the audit log; the person who tried only ever hears ErrBadCredentials.
func (s *Store) loginFailed(ctx context.Context, u *User, email, reason string) error {
	subject, details := "", map[string]any{"reason": reason}
	if u != nil {
		subject = UserSubject(u.ID)
	} else if looksLikeEmail(email) {
		details["email"] = email
	}
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		return audit(ctx, tx, AuditLoginFailed, subject, details)
	})
}

// looksLikeEmail keeps what someone typed out of the audit log unless it is
// plainly an address, not a password typed into the wrong field.
func looksLikeEmail(s string) bool {
	at := strings.LastIndexByte(s, '@')
	return at > 0 && strings.Contains(s[at+1:], ".") && len(s) <= 254 && !strings.ContainsAny(s, " \t")
}
