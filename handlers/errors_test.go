package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
)

func TestProblemFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		code       string
		messageHas string
	}{
		{"store not found", fmt.Errorf("load run: %w", store.ErrNotFound), http.StatusNotFound, store.CodeNotFound, "nothing here"},
		{"invalid, with its own words", store.Errorf(store.CodeInvalid, "The amount must be positive."), http.StatusUnprocessableEntity, store.CodeInvalid, "must be positive"},
		{"idempotency conflict", store.Errorf(store.CodeIdempotencyConflict, "That request ID was used for another refund."), http.StatusUnprocessableEntity, store.CodeIdempotencyConflict, "another refund"},
		{"cursor expired", store.Errorf(store.CodeCursorExpired, "pruned"), http.StatusGone, store.CodeCursorExpired, "pruned"},
		{"conflict", store.Errorf(store.CodeConflict, ""), http.StatusConflict, store.CodeConflict, "Something changed"},
		{"forbidden", store.Errorf(store.CodeForbidden, ""), http.StatusForbidden, store.CodeForbidden, "do not have access"},
		{"bad credentials", store.ErrBadCredentials, http.StatusUnauthorized, codeUnauthorized, "wrong email or password"},
		{"echo 404", echo.ErrNotFound, http.StatusNotFound, store.CodeNotFound, "nothing here"},
		{"echo 405", echo.ErrMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed", "does not accept"},
		{"echo 413", echo.ErrStatusRequestEntityTooLarge, http.StatusRequestEntityTooLarge, "body_too_large", "too large"},
		{"unexpected", errors.New("pq: connection refused to 10.0.0.7"), http.StatusInternalServerError, codeInternal, "on our side"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := problemFor(tc.err)
			if p.status != tc.status || p.code != tc.code {
				t.Errorf("status, code = %d, %q; want %d, %q", p.status, p.code, tc.status, tc.code)
			}
			if !contains(p.message, tc.messageHas) {
				t.Errorf("message = %q, want it to contain %q", p.message, tc.messageHas)
			}
			if p.title == "" {
				t.Error("no title")
			}
		})
	}
}

func TestProblemFor_NeverLeaksDetails(t *testing.T) {
	t.Parallel()
	p := problemFor(fmt.Errorf("store: load user: %w", errors.New(`pq: relation "users" does not exist`)))
	if contains(p.message, "pq") || contains(p.message, "users") {
		t.Errorf("message = %q leaks an internal error", p.message)
	}
}

func TestLoginForm_Validate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		form    loginForm
		wantErr bool
	}{
		{"ok", loginForm{Email: " customer@example.com ", Password: "demo"}, false},
		{"no email", loginForm{Password: "demo"}, true},
		{"blank email", loginForm{Email: "   ", Password: "demo"}, true},
		{"no password", loginForm{Email: "a@example.com"}, true},
		{"huge password", loginForm{Email: "a@example.com", Password: string(make([]byte, 2000))}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.form
			err := f.Validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Validate() = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && store.ErrorCode(err) != store.CodeInvalid {
				t.Errorf("code = %q, want %q", store.ErrorCode(err), store.CodeInvalid)
			}
			if err == nil && f.Email != "customer@example.com" {
				t.Errorf("email = %q, want it trimmed", f.Email)
			}
		})
	}
}

// contains reports whether s contains sub, ignoring case.
func contains(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
