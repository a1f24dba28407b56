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
)

// Login throttling counts failed attempts within LoginWindow three ways:
//
//   - per account and address (LoginAttemptsPerAccountAddress): an address
//     guessing one account's password is held back for that account only;
//   - per address (LoginAttemptsPerAddress): an address guessing many
//     accounts is held back for all of them;
//   - per account across all addresses (LoginAttemptsPerAccount): the bound
//     on guesses at one password, however many addresses the guesser has.
//
// The account-wide budget is not enforced for an address the account has
// signed in from within knownAddressFor. That is what keeps a guesser
// elsewhere from locking the owner out: the owner's usual address is only
// ever held back by failures of its own. Everyone else waits once the
// budget is spent, the right password included, because checking a
// password at all is a guess: answering "wrong" with 429 but "right" with a
// session would let guessing go on unbounded, one fresh address at a time.
// So under a spray of guesses an owner at a new address waits until it
// stops; at an address they have signed in from, never. Guesses at an
// account are bounded by LoginAttemptsPerAccount plus
// LoginAttemptsPerAccountAddress for each of its known addresses, a
// minute.
//
// Successful logins do not count. The counts live in PostgreSQL, not in
// process memory, so the limits hold across every serve process of a
// deployment and survive a restart.
const (
	LoginAttemptsPerAccountAddress = 5
	LoginAttemptsPerAddress        = 20
	LoginAttemptsPerAccount        = 10
	LoginWindow                    = time.Minute
	knownAddressFor                = 30 * 24 * time.Hour
)

// ErrTooManyAttempts refuses a login attempt before the password is looked
// at.
var ErrTooManyAttempts = &Error{Code: CodeRateLimited, Key: "refuse.too_many_attempts"}

type throttle struct {
	key []byte
	max int
	// exemptKnown: not enforced for an address the account signed in from.
	exemptKnown bool
}

// throttleKey hashes what is counted, so the table never holds a typed
// email (or a password typed into the email field) in clear.
func throttleKey(kind, value string) []byte {
	sum := sha256.Sum256([]byte(kind + ":" + value))
	return sum[:]
}

// accountAddressKey names the pair of an account and an address; the
// address cannot hold a NUL, so no two pairs share a key.
func accountAddressKey(kind, email, ip string) []byte {
	return throttleKey(kind, strings.ToLower(email)+"\x00"+ip)
}

// loginThrottles are the limits an attempt for email from ip counts
// against, in lock order.
func loginThrottles(email, ip string) []throttle {
	ts := []throttle{
		{key: throttleKey("account", strings.ToLower(email)), max: LoginAttemptsPerAccount, exemptKnown: true},
		{key: accountAddressKey("account-address", email, ip), max: LoginAttemptsPerAccountAddress},
	}
	if ip != "" {
		ts = append(ts, throttle{key: throttleKey("address", ip), max: LoginAttemptsPerAddress})
	}
	// Lock in one order so two attempts never wait on each other in a cycle.
	slices.SortFunc(ts, func(a, b throttle) int { return bytes.Compare(a.key, b.key) })
	return ts
}

// reserveLoginAttempt counts an attempt against its throttles before the
// password is checked, so a burst of parallel guesses cannot all slip
// under a limit; a successful login takes its reservation back
// (loginSucceeded). Over a limit it is ErrTooManyAttempts and nothing is
// recorded, so the limit is a rate, not a lock-out that an attacker can
// extend forever.
func (s *Store) reserveLoginAttempt(ctx context.Context, email, ip string) (uuid.UUID, error) {
	id := uuid.New()
	throttles := loginThrottles(email, ip)
	err := s.inTx(ctx, func(tx *txn) error {
		for _, t := range throttles {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(binary.BigEndian.Uint64(t.key))); err != nil {
				return fmt.Errorf("store: lock login throttle: %w", err)
			}
		}
		known, err := knownAddress(ctx, tx, email, ip)
		if err != nil {
			return err
		}
		for _, t := range throttles {
			if t.exemptKnown && known {
				continue
			}
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

// knownAddress reports whether the account of email signed in from ip
// within knownAddressFor.
func knownAddress(ctx context.Context, tx *txn, email, ip string) (bool, error) {
	if ip == "" {
		return false, nil
	}
	var known bool
	if err := tx.GetContext(ctx, &known, `SELECT EXISTS (SELECT 1 FROM login_known_addresses
        WHERE key = $1 AND last_login > now() - make_interval(secs => $2))`,
		accountAddressKey("known", email, ip), knownAddressFor.Seconds()); err != nil {
		return false, fmt.Errorf("store: known login address: %w", err)
	}
	return known, nil
}

// loginSucceeded takes back the attempt's reservation, clears this
// address's earlier failures for the account (whoever logged in from it
// knows the password), remembers the address as the account's, and
// records the login, in one transaction. Failures from other addresses
// stay: they are someone else's guesses, and forgiving them would hand a
// guesser a fresh budget every time the owner signs in.
func (s *Store) loginSucceeded(ctx context.Context, u *User, email string, attempt uuid.UUID) error {
	ip := ActorFrom(ctx).IP
	ctx = WithActor(ctx, Actor{UserID: u.ID, IP: ip})
	return s.inTx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM login_attempts WHERE attempt_id = $1 OR key = $2`,
			attempt, accountAddressKey("account-address", email, ip)); err != nil {
			return fmt.Errorf("store: forget login attempts: %w", err)
		}
		if ip != "" {
			if _, err := tx.ExecContext(ctx, `INSERT INTO login_known_addresses (key) VALUES ($1)
                ON CONFLICT (key) DO UPDATE SET last_login = now()`, accountAddressKey("known", email, ip)); err != nil {
				return fmt.Errorf("store: remember login address: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM login_known_addresses
                WHERE last_login < now() - make_interval(secs => $1)`, knownAddressFor.Seconds()); err != nil {
				return fmt.Errorf("store: prune login addresses: %w", err)
			}
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
	return s.inTx(ctx, func(tx *txn) error {
		return audit(ctx, tx, AuditLoginFailed, subject, details)
	})
}

// looksLikeEmail keeps what someone typed out of the audit log unless it is
// plainly an address, not a password typed into the wrong field.
func looksLikeEmail(s string) bool {
	at := strings.LastIndexByte(s, '@')
	return at > 0 && strings.Contains(s[at+1:], ".") && len(s) <= 254 && !strings.ContainsAny(s, " \t")
}
