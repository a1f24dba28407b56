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
//
// An error made by Refuse names its words in the catalogues
// (views/locales): Key, filled in with Data, is what handlers show in the
// viewer's language; Message is the same words in English, for logs,
// tests and English viewers. Data's values are shown as they print, except
// that an *Error among them (a refusal within a refusal) and an Amount are
// shown in the viewer's language too.
type Error struct {
	Code    string
	Message string
	// State, for a conflict about a run, is the state the run is in.
	State string
	Key   string
	Data  map[string]any
}

func (e *Error) Error() string {
	if e.Message == "" && e.Key != "" {
		// A sentinel made before views handed over the catalogue.
		return english(e.Key, e.Data)
	}
	return e.Message
}

// Is lets errors.Is match any *Error with the same code, so callers can test
// against the sentinels below whatever the message; a sentinel with a
// message or a key matches only errors with the same.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Message == "" || t.Message == e.Message) && (t.Key == "" || t.Key == e.Key)
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

// Errorf builds an *Error with a formatted, person-readable message in
// English only: for words no person reads, or not yet in the catalogues.
// Refuse is the one for words a person reads.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Refuse builds an *Error whose words are the catalogue's key filled in
// with data (nil for none).
func Refuse(code, key string, data map[string]any) *Error {
	return &Error{Code: code, Key: key, Data: data, Message: english(key, data)}
}

// Amount is an amount of money in a refusal's Data: English prints it as
// FormatMoney does, other languages as they write money.
type Amount struct {
	Minor    int64
	Currency string
}

func (a Amount) String() string { return FormatMoney(a.Minor, a.Currency) }

// english is a key's words in English. The catalogues live in views,
// which imports store, so views hands them over when it loads (SetEnglish);
// a program without views (no page, no API) reads keys.
var english = func(key string, data map[string]any) string {
	if len(data) == 0 {
		return key
	}
	return fmt.Sprintf("%s %v", key, data)
}

// SetEnglish is how views gives store the English catalogue: f is a key's
// words filled in with data. Called once, when views is loaded.
func SetEnglish(f func(key string, data map[string]any) string) { english = f }

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

// refuseIn is a conflict about a run in state, in the catalogue's words.
func refuseIn(state, key string, data map[string]any) *Error {
	e := Refuse(CodeConflict, key, data)
	e.State = state
	return e
}
