package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/lib/pq"

	"github.com/refundd/refundd/store"
)

func TestUnavailable(t *testing.T) {
	t.Parallel()
	_, dialErr := store.Open(context.Background(), "postgres://postgres@/x?host=/nonexistent-refundd&sslmode=disable")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no server to dial", dialErr, true},
		{"shutting down", fmt.Errorf("store: x: %w", &pq.Error{Code: "57P01"}), true},
		{"starting up", &pq.Error{Code: "57P03"}, true},
		{"connection failure", &pq.Error{Code: "08006"}, true},
		{"too many connections", &pq.Error{Code: "53300"}, true},
		{"a constraint", &pq.Error{Code: "23505"}, false},
		{"bad bytes", &pq.Error{Code: "22021"}, false},
		{"not found", store.ErrNotFound, false},
		{"something else", errors.New("boom"), false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := store.Unavailable(tc.err); got != tc.want {
				t.Errorf("Unavailable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
