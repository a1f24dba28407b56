package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
)

// TestAuthenticate_OtherAddressCannotLockOutOwner: wrong passwords from one
// address hold back that address for the account, never the owner's right
// password from another.
func TestAuthenticate_OtherAddressCannotLockOutOwner(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	checked := 0
	for i := range 50 {
		_, err := s.Authenticate(from("192.0.2.3"), "customer@example.com", fmt.Sprint("guess", i))
		switch {
		case errors.Is(err, store.ErrBadCredentials):
			checked++
		case !errors.Is(err, store.ErrTooManyAttempts):
			t.Fatalf("guess %d: err = %v, want ErrBadCredentials or ErrTooManyAttempts", i, err)
		}
	}
	if got, want := checked, store.LoginAttemptsPerAccountAddress; got != want {
		t.Errorf("guesses checked from one address = %d, want %d", got, want)
	}
	if _, err := s.Authenticate(from("192.0.2.2"), "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatalf("owner from another address: %v, want a login", err)
	}
	if _, err := s.Authenticate(from("192.0.2.3"), "customer@example.com", devdb.DemoPassword); !errors.Is(err, store.ErrTooManyAttempts) {
		t.Errorf("the guessing address: err = %v, want ErrTooManyAttempts still", err)
	}
}

// TestAuthenticate_SprayFromManyAddressesBounded: guesses from many
// addresses are checked up to the account's budget and no further; the
// owner's known address still signs in, and that login hands the guessers
// no fresh budget.
func TestAuthenticate_SprayFromManyAddressesBounded(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	const home = "198.51.100.2"
	if _, err := s.Authenticate(from(home), "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	spray := func(round int) (checked int) {
		t.Helper()
		for i := range 3 * store.LoginAttemptsPerAccount {
			_, err := s.Authenticate(from(fmt.Sprintf("203.0.%d.%d", round, i)), "customer@example.com", "guess")
			switch {
			case errors.Is(err, store.ErrBadCredentials):
				checked++
			case !errors.Is(err, store.ErrTooManyAttempts):
				t.Fatalf("round %d guess %d: err = %v", round, i, err)
			}
		}
		return checked
	}
	if got, want := spray(0), store.LoginAttemptsPerAccount; got != want {
		t.Errorf("guesses checked from %d addresses = %d, want %d", 3*store.LoginAttemptsPerAccount, got, want)
	}
	if _, err := s.Authenticate(from("203.0.9.9"), "customer@example.com", devdb.DemoPassword); !errors.Is(err, store.ErrTooManyAttempts) {
		t.Errorf("right password from a new address with the budget spent: err = %v, want ErrTooManyAttempts (a check is a guess)", err)
	}
	if _, err := s.Authenticate(from(home), "customer@example.com", devdb.DemoPassword); err != nil {
		t.Errorf("owner from their known address: %v, want a login", err)
	}
	if got := spray(1); got != 0 {
		t.Errorf("guesses checked after the owner's login = %d, want 0 (the budget is not reset)", got)
	}
	if _, err := s.Authenticate(from("203.0.9.9"), "customer2@example.com", devdb.DemoPassword); err != nil {
		t.Errorf("another account: %v, want a login", err)
	}
}

// TestEndSession_NotifiesUser: ending a session wakes the user's live
// streams, so those the session opened close at once.
func TestEndSession_NotifiesUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := seeded(t)
	u, err := s.UserByEmail(ctx, "customer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	sid, err := s.CreateSession(ctx, u.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	l := store.NewListener(s.URL(), testLogger(t))
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	wake, cancel := l.Subscribe(store.UserTopic(fmt.Sprint(u.ID)))
	defer cancel()
	if err := s.EndSession(ctx, sid); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(2 * time.Second):
		t.Fatal("no wake-up within 2s of ending the session")
	}
	if _, err := s.UserBySession(ctx, sid); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ended session: err = %v, want ErrNotFound", err)
	}
	if err := s.EndSession(ctx, sid); err != nil {
		t.Errorf("ending it again: %v, want nil", err)
	}
}
