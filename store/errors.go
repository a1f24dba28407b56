package store

import (
	"errors"
	"fmt"
)

// Error codes: the one vocabulary of failures that handlers map to HTTP
// statuses and to words a person reads.
const (
	CodeNotFound            = "not_found"
	CodeInvalid             = "invalid"
	CodeIdempotencyConflict = "idempotency_conflict"
	CodeCursorExpired       = "cursor_expired"
	CodeCursorInvalid       = "cursor_invalid"
	CodeConflict            = "conflict"
	CodeForbidden           = "forbidden"
	CodeRateLimited         = "rate_limited"
)

// Error is an application error with a code and a message safe to show to
// the person who caused it. Internal details never go in Message.
type Error struct {
	Code    string
	Message string
	// State, for a conflict about a run, is the state the run is in.
	State string
}

func (e *Error) Error() string { return e.Message }

// Is lets errors.Is match any *Error with the same code, so callers can test
// against the sentinels below whatever the message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
}

// Sentinels for errors.Is; the errors returned carry a specific message.
var (
	ErrInvalid             = &Error{Code: CodeInvalid}
	ErrIdempotencyConflict = &Error{Code: CodeIdempotencyConflict}
	ErrCursorExpired       = &Error{Code: CodeCursorExpired}
	ErrCursorInvalid       = &Error{Code: CodeCursorInvalid}
	ErrConflict            = &Error{Code: CodeConflict}
	ErrForbidden           = &Error{Code: CodeForbidden}
)

// Errorf builds an *Error with a formatted, person-readable message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, or "" for an unexpected error.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, ErrNotFound) {
		return CodeNotFound
	}
	return ""
}
