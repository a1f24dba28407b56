package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/google/uuid"
)

// QueuedEvent is a business event in the outbox (outbound_queue), waiting
// to be fanned out to its destinations.
type QueuedEvent struct {
	ID            int64         `db:"id"`
	RunID         uuid.UUID     `db:"run_id"`
	Seq           int64         `db:"seq"`
	EventID       uuid.UUID     `db:"event_id"`
	Type          string        `db:"type"`
	CorrelationID uuid.UUID     `db:"correlation_id"`
	ParentRunID   uuid.NullUUID `db:"parent_run_id"`
	CreatedAt     time.Time     `db:"created_at"`
}

// Mail kinds (mails.kind).
const (
	MailEnded   = "ended"   // to the customer: their request ended
	MailWaiting = "waiting" // to an approver: a request waits for a decision
)

// NewMail is an email the outbound engine records in the mail ledger
// before it sends it. MessageID is deterministic (from the run, the kind
// and the recipient), so a resend after a crash carries the same one;
// (RunID, Kind, Recipient) is unique: one email per ending, per waiting
// request and per person.
type NewMail struct {
	MessageID string
	RunID     uuid.UUID // the request's root run
	Kind      string
	UserID    int64
	Recipient string
	Subject   string
	Body      string
}

// MailPlanner says which emails one business event causes (none, mostly):
// outbound's planner, which words them with the one words table.
type MailPlanner interface {
	Plan(ctx context.Context, ev QueuedEvent) ([]NewMail, error)
}

// Mail is a row of the mail ledger.
type Mail struct {
	MessageID   string         `db:"message_id"`
	RunID       uuid.UUID      `db:"run_id"`
	Kind        string         `db:"kind"`
	UserID      sql.NullInt64  `db:"user_id"`
	Recipient   string         `db:"recipient"`
	Subject     string         `db:"subject"`
	Body        string         `db:"body"`
	State       string         `db:"state"` // pending, sent, failed
	Attempts    int            `db:"attempts"`
	NextAt      time.Time      `db:"next_at"`
	LeasedUntil sql.NullTime   `db:"leased_until"`
	LastError   sql.NullString `db:"last_error"`
	CreatedAt   time.Time      `db:"created_at"`
	SentAt      sql.NullTime   `db:"sent_at"`
}
