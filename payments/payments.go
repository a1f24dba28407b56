// Package payments owns refundd's side of moving money: the Provider
// interface the executor calls, an HTTP Client that implements it, and Sim,
// the simulated payment provider with its own ledger, idempotency keys,
// lookup and fault injection.
//
// The one thing every caller must respect is that a failed call does not
// mean a failed refund: Uncertain(err) reports the errors after which the
// refund may have been committed, and only Lookup can say what happened.
package payments

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Provider moves money. A real payment provider would be another
// implementation of it.
type Provider interface {
	// Refund asks for a refund. The same Key with the same parameters always
	// yields the same receipt, however often it is sent.
	Refund(ctx context.Context, req RefundRequest) (Receipt, error)
	// Lookup returns the receipt of the refund committed under key, or an
	// error matching ErrNotFound when the provider never committed one.
	Lookup(ctx context.Context, key string) (Receipt, error)
}

// RefundRequest is one refund. Key is the operation's ID and the provider's
// idempotency key.
type RefundRequest struct {
	Key      string
	OrderRef string
	Amount   int64 // minor units
	Currency string
}

// Receipt statuses: both are final outcomes the provider committed.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Receipt is what the provider committed for a key.
type Receipt struct {
	Key           string    `json:"key" db:"key"`
	Ref           string    `json:"ref" db:"ref"` // the provider's own reference
	Status        string    `json:"status" db:"status"`
	OrderRef      string    `json:"order_ref" db:"order_ref"`
	Amount        int64     `json:"amount" db:"amount"`
	Currency      string    `json:"currency" db:"currency"`
	FailureReason string    `json:"failure_reason,omitempty" db:"failure_reason"`
	CreatedAt     time.Time `json:"created_at" db:"created_at"`
}

// Error kinds. Match them with errors.Is; the errors returned are *Error
// values that carry the details.
var (
	// ErrNotFound: Lookup found no committed refund and none in flight. It
	// is the only answer after which a refund may be submitted again (with
	// the same key).
	ErrNotFound = errors.New("payments: no such refund")
	// ErrInFlight: another request with the same key is being processed.
	// This request committed nothing, but the other one may: Uncertain.
	ErrInFlight = errors.New("payments: refund in flight")
	// ErrMismatch: the key was already used with other parameters. Nothing
	// was committed by this request; it is a bug in the caller.
	ErrMismatch = errors.New("payments: idempotency key reused with other parameters")
	// ErrInvalid: the provider refused the request as malformed. Nothing
	// was committed.
	ErrInvalid = errors.New("payments: invalid request")
	// ErrUnavailable: the provider answered that it committed nothing (503,
	// 429) or could not be reached at all. Retrying later is safe.
	ErrUnavailable = errors.New("payments: provider unavailable")
	// ErrUncertain: the request may have reached the provider and committed
	// (timeout, dropped connection, lost or unreadable response, a 5xx that
	// does not promise nothing happened). Reconcile with Lookup; never
	// assume the refund failed.
	ErrUncertain = errors.New("payments: outcome unknown")
)

// Error is a failed provider call.
type Error struct {
	Kind    error  // one of the Err* kinds above
	Op      string // "refund", "lookup", ...
	Key     string
	Status  int    // HTTP status, 0 when no response was read
	Code    string // the provider's error code, if it sent one
	Message string // the provider's message, if it sent one
	Err     error  // the underlying transport error, if any
}

func (e *Error) Error() string {
	s := fmt.Sprintf("payments: %s %q: %v", e.Op, e.Key, e.Kind)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d", e.Status)
		if e.Code != "" {
			s += " " + e.Code
		}
		s += ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is matches the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap exposes the transport error, so context.DeadlineExceeded and
// friends can still be matched.
func (e *Error) Unwrap() error { return e.Err }

// Uncertain reports whether, after err, the refund may have been committed
// by the provider. Then the caller must reconcile by looking the key up,
// and must neither record a failure nor submit again until Lookup returns
// ErrNotFound. Any error that is not an *Error from this package is
// uncertain too, because nothing proves it happened before the provider
// was reached.
func Uncertain(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if !errors.As(err, &e) {
		return true
	}
	return e.Kind == ErrUncertain || e.Kind == ErrInFlight
}
