package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/store"
)

// startLimited starts a run of 1 cent on the fixture's order under limit.
func (f *fixture) startLimited(key string, limit int) (*store.Run, bool, error) {
	return f.s.StartRun(context.Background(), store.StartRequest{
		OwnerID: f.customer.ID, ClientRequestID: key, OrderID: f.order.ID, Amount: 1, Reason: "flood",
		RatePerMinute: limit,
	})
}

func TestStartRun_RateLimited(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const limit = 3
	first, _, err := f.startLimited("k0", limit)
	if err != nil {
		t.Fatalf("start k0: %v", err)
	}
	for i := 1; i < limit; i++ {
		if _, created, err := f.startLimited(fmt.Sprintf("k%d", i), limit); err != nil || !created {
			t.Fatalf("start k%d: created = %v, err = %v; want a new run", i, created, err)
		}
	}

	t.Run("over the limit", func(t *testing.T) {
		_, _, err := f.startLimited("over", limit)
		var rl *store.RateLimitedError
		if !errors.As(err, &rl) {
			t.Fatalf("start over the limit: err = %v, want a *store.RateLimitedError", err)
		}
		if got, want := store.ErrorCode(err), store.CodeRateLimited; got != want {
			t.Errorf("code = %q, want %q", got, want)
		}
		if rl.RetryAfter < time.Second || rl.RetryAfter > store.StartWindow {
			t.Errorf("RetryAfter = %v, want between 1s and %v", rl.RetryAfter, store.StartWindow)
		}
		if want := "You started 3 refunds in the last minute; try again in "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("message = %q, want it to start with %q", err.Error(), want)
		}
		if got := count(t, f.s, `SELECT count(*) FROM runs WHERE owner_id = $1`, f.customer.ID); got != limit {
			t.Errorf("runs = %d, want %d", got, limit)
		}
	})

	t.Run("a repeated request ID still returns its run", func(t *testing.T) {
		r, created, err := f.startLimited("k0", limit)
		if err != nil || created || r.ID != first.ID {
			t.Fatalf("repeat k0: run %v, created = %v, err = %v; want run %v, not created", r, created, err, first.ID)
		}
	})

	t.Run("no limit", func(t *testing.T) {
		if _, created, err := f.startLimited("unlimited", 0); err != nil || !created {
			t.Fatalf("start with no limit: created = %v, err = %v; want a new run", created, err)
		}
	})

	t.Run("another user is unaffected", func(t *testing.T) {
		ctx := context.Background()
		other, err := f.s.CreateUser(ctx, "o@example.com", "O", store.RoleCustomer, "pw", store.GrantRefundAccess)
		if err != nil {
			t.Fatal(err)
		}
		o, err := f.s.CreateOrder(ctx, other.ID, "Hat", 100, "EUR")
		if err != nil {
			t.Fatal(err)
		}
		_, created, err := f.s.StartRun(ctx, store.StartRequest{OwnerID: other.ID, ClientRequestID: "k0",
			OrderID: o.ID, Amount: 1, Reason: "flood", RatePerMinute: limit})
		if err != nil || !created {
			t.Fatalf("other user's start: created = %v, err = %v; want a new run", created, err)
		}
	})
}

// TestStartRun_RateLimitRace: racing starts are counted one after the
// other, so they never create more runs than the limit.
func TestStartRun_RateLimitRace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const n, limit = 20, 5
	var (
		wg   sync.WaitGroup
		errs = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			_, _, errs[i] = f.startLimited(fmt.Sprintf("race-%d", i), limit)
		})
	}
	wg.Wait()
	ok, limited := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case store.ErrorCode(err) == store.CodeRateLimited:
			limited++
		default:
			t.Errorf("start %d: %v", i, err)
		}
	}
	if ok != limit || limited != n-limit {
		t.Errorf("started %d, refused %d; want %d and %d", ok, limited, limit, n-limit)
	}
	if got := count(t, f.s, `SELECT count(*) FROM runs WHERE owner_id = $1`, f.customer.ID); got != limit {
		t.Errorf("runs in the database = %d, want %d", got, limit)
	}
}
