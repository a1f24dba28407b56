package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Audit actions: what the audit log records.
const (
	AuditLogin              = "login"
	AuditLoginFailed        = "login_failed"
	AuditGrantAdded         = "grant.added"
	AuditGrantRemoved       = "grant.removed"
	AuditRoleChanged        = "user.role_changed"
	AuditUserDisabled       = "user.disabled"
	AuditUserEnabled        = "user.enabled"
	AuditTokenCreated       = "token.created"
	AuditTokenRevoked       = "token.revoked"
	AuditRunApproved        = "run.approved"
	AuditRunCancelRequested = "run.cancel_requested"
	AuditWebhookCreated     = "webhook.created"
	AuditWebhookDeleted     = "webhook.deleted"
	AuditWebhookRotated     = "webhook.rotated"
	AuditWebhookDisabled    = "webhook.disabled"
	AuditWebhookEnabled     = "webhook.enabled"
	AuditWebhookResent      = "webhook.resent"
)

// AuditActions lists every action, for filters.
var AuditActions = []string{
	AuditLogin, AuditLoginFailed, AuditGrantAdded, AuditGrantRemoved, AuditRoleChanged,
	AuditUserDisabled, AuditUserEnabled, AuditTokenCreated, AuditTokenRevoked,
	AuditRunApproved, AuditRunCancelRequested,
	AuditWebhookCreated, AuditWebhookDeleted, AuditWebhookRotated, AuditWebhookDisabled, AuditWebhookEnabled, AuditWebhookResent,
}

func grantAction(on bool) string {
	if on {
		return AuditGrantAdded
	}
	return AuditGrantRemoved
}

// Actor is who makes a request and from where. The web layer puts it in the
// request's context; store methods that change who may do what record it in
// the audit log.
type Actor struct {
	UserID int64 // 0 when nobody is signed in
	IP     string
}

type actorKey struct{}

// WithActor returns ctx carrying a.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor carried by ctx (the zero Actor if none: a
// background job, a command-line tool).
func ActorFrom(ctx context.Context) Actor {
	a, _ := ctx.Value(actorKey{}).(Actor)
	return a
}

// audit records action on subject by ctx's actor, in tx, so the record
// commits (or not) with the change it describes. Details must never hold a
// secret.
func audit(ctx context.Context, tx *txn, action, subject string, details map[string]any) error {
	a := ActorFrom(ctx)
	if details == nil {
		details = map[string]any{}
	}
	b, err := json.Marshal(details)
	if err != nil {
		return fmt.Errorf("store: audit %s: %w", action, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit_log (actor_id, actor_ip, action, subject, details)
        VALUES ($1, $2, $3, $4, $5)`,
		sql.NullInt64{Int64: a.UserID, Valid: a.UserID != 0}, a.IP, action, subject, string(b)); err != nil {
		return fmt.Errorf("store: audit %s: %w", action, err)
	}
	return nil
}

// Subjects name what an audit entry is about.
func UserSubject(id int64) string    { return fmt.Sprintf("user:%d", id) }
func RunSubject(id uuid.UUID) string { return "run:" + id.String() }
func WebhookSubject(id uuid.UUID) string {
	return "webhook:" + id.String()
}

// AuditEntry is one row of the audit log, with the actor's and (for a
// user subject) the subject's names when known.
type AuditEntry struct {
	ID           int64           `db:"id"`
	At           time.Time       `db:"at"`
	ActorID      sql.NullInt64   `db:"actor_id"`
	ActorEmail   sql.NullString  `db:"actor_email"`
	ActorName    sql.NullString  `db:"actor_name"`
	ActorRole    sql.NullString  `db:"actor_role"`
	ActorIP      string          `db:"actor_ip"`
	Action       string          `db:"action"`
	Subject      string          `db:"subject"`
	SubjectName  sql.NullString  `db:"subject_name"`
	SubjectEmail sql.NullString  `db:"subject_email"`
	Details      json.RawMessage `db:"details"`
}

// AuditLogBefore returns the newest entries first, at most limit of them,
// only those of action when it is not empty, from the entry before the one
// with ID before (0: from the newest), for reading the log a page at a
// time.
func (s *Store) AuditLogBefore(ctx context.Context, action string, before int64, limit int) ([]AuditEntry, error) {
	entries := []AuditEntry{}
	err := s.db.SelectContext(ctx, &entries, `SELECT a.id, a.at, a.actor_id, u.email AS actor_email,
            u.name AS actor_name, u.role AS actor_role, a.actor_ip, a.action, a.subject,
            su.name AS subject_name, su.email AS subject_email, a.details
        FROM audit_log a
        LEFT JOIN users u ON u.id = a.actor_id
        LEFT JOIN users su ON a.subject = 'user:' || su.id
        WHERE ($1 = '' OR a.action = $1) AND ($2::bigint = 0 OR a.id < $2::bigint)
        ORDER BY a.id DESC
        LIMIT $3`, action, before, limit)
	if err != nil {
		return nil, fmt.Errorf("store: audit log: %w", err)
	}
	return entries, nil
}
