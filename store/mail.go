package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// The mail ledger (table mails): the planner's rows are written at fan-out,
// before any send (RecordMails, or the engine's fan-out itself), and the
// sink completes each after the SMTP server answered. A worker that dies in
// between leaves its row pending under a lease that runs out, and the mail
// is sent again with the same Message-ID: at most a duplicate of one email,
// never a second, different one.

const mailColumns = `message_id, run_id, kind, user_id, recipient, subject, body, state, attempts,
	next_at, leased_until, last_error, created_at, sent_at`

// Mail states (mails.state).
const (
	MailPending = "pending"
	MailSentOK  = "sent"
	MailRefused = "failed" // the SMTP server refused it for good
)

// RecordMails writes mails to the ledger as pending, each once: a mail whose
// Message-ID or (run, kind, recipient) is already there is left as it is.
func (s *Store) RecordMails(ctx context.Context, mails []NewMail) error {
	return recordMails(ctx, s.db, mails)
}

// recordMails is RecordMails on q, in one statement, so the engine's
// fan-out writes them in its own transaction.
func recordMails(ctx context.Context, q sqlx.ExecerContext, mails []NewMail) error {
	if len(mails) == 0 {
		return nil
	}
	var ids, runs, kinds, recipients, subjects, bodies []string
	var users []sql.NullInt64
	for _, m := range mails {
		ids, kinds, recipients = append(ids, m.MessageID), append(kinds, m.Kind), append(recipients, m.Recipient)
		subjects, bodies, runs = append(subjects, m.Subject), append(bodies, m.Body), append(runs, m.RunID.String())
		users = append(users, sql.NullInt64{Int64: m.UserID, Valid: m.UserID != 0})
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO mails (message_id, run_id, kind, user_id, recipient, subject, body)
        SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[])
        ON CONFLICT DO NOTHING`, pq.Array(ids), pq.Array(runs), pq.Array(kinds), pq.Array(users),
		pq.Array(recipients), pq.Array(subjects), pq.Array(bodies)); err != nil {
		return fmt.Errorf("store: record mails: %w", err)
	}
	return nil
}

// ClaimMails leases up to limit pending mails that are due and that no live
// lease holds, for lease, counting the attempt. SKIP LOCKED lets any number
// of senders claim side by side; the oldest due go first.
func (s *Store) ClaimMails(ctx context.Context, lease time.Duration, limit int) ([]Mail, error) {
	if lease <= 0 || limit <= 0 {
		return nil, errors.New("store: claim mails: lease and limit must be positive")
	}
	var out []Mail
	err := s.db.SelectContext(ctx, &out, `
WITH due AS (
    SELECT message_id AS due_id FROM mails
    WHERE state = 'pending' AND next_at <= now() AND (leased_until IS NULL OR leased_until <= now())
    ORDER BY next_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE mails m SET leased_until = now() + $1::interval, attempts = m.attempts + 1
FROM due WHERE m.message_id = due.due_id
RETURNING `+mailColumns, interval(lease), limit)
	if err != nil {
		return nil, fmt.Errorf("store: claim mails: %w", err)
	}
	return out, nil
}

// MailSent records that the SMTP server accepted the mail. A mail another
// sender recorded first (its lease ran out meanwhile) stays as recorded.
func (s *Store) MailSent(ctx context.Context, messageID string) error {
	return s.completeMail(ctx, "mail sent", `UPDATE mails SET state = 'sent', sent_at = now(), leased_until = NULL
        WHERE message_id = $1 AND state = 'pending'`, messageID)
}

// MailRetry records a send that failed for now: the mail is due again at at.
func (s *Store) MailRetry(ctx context.Context, messageID string, at time.Time, errText string) error {
	return s.completeMail(ctx, "mail retry", `UPDATE mails SET next_at = $2, leased_until = NULL, last_error = $3
        WHERE message_id = $1 AND state = 'pending'`, messageID, at, errText)
}

// MailFailed records that the SMTP server refused the mail for good (a 5xx
// answer): it is not sent again, and support's page of the run says why.
func (s *Store) MailFailed(ctx context.Context, messageID string, errText string) error {
	return s.completeMail(ctx, "mail failed", `UPDATE mails SET state = 'failed', leased_until = NULL, last_error = $2
        WHERE message_id = $1 AND state = 'pending'`, messageID, errText)
}

// completeMail runs one of the updates that end an attempt; a mail that is
// not in the ledger is ErrNotFound, one already completed is left be.
func (s *Store) completeMail(ctx context.Context, what, query string, args ...any) error {
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	if n, err := affected(res, what); err != nil || n > 0 {
		return err
	}
	var exists bool
	if err := s.db.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM mails WHERE message_id = $1)`, args[0]); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	if !exists {
		return ErrNotFound
	}
	return nil
}

// MailsOfRun is the mail ledger of the request runID belongs to (the mails
// are kept by the request's root run), oldest first: support's page of a
// run shows them.
func (s *Store) MailsOfRun(ctx context.Context, runID uuid.UUID) ([]Mail, error) {
	var out []Mail
	err := s.db.SelectContext(ctx, &out, `SELECT `+mailColumns+` FROM mails
        WHERE run_id = (SELECT correlation_id FROM runs WHERE id = $1)
        ORDER BY created_at, message_id`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: mails of run: %w", err)
	}
	return out, nil
}

// Approvers are the users who may decide a waiting refund: role approver,
// not disabled, by ID. Their grants are not read.
func (s *Store) Approvers(ctx context.Context) ([]User, error) {
	var out []User
	err := s.db.SelectContext(ctx, &out, `SELECT `+userColumns+` FROM users
        WHERE role = $1 AND disabled_at IS NULL ORDER BY id`, RoleApprover)
	if err != nil {
		return nil, fmt.Errorf("store: approvers: %w", err)
	}
	return out, nil
}
