package store_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.MustOpen(t)
	if err := devdb.SeedDemo(ctx, s); err != nil {
		t.Fatal(err)
	}
	u, err := s.Authenticate(ctx, "Customer@Example.com ", devdb.DemoPassword)
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	if got, want := u.Role, store.RoleCustomer; got != want {
		t.Errorf("role = %q, want %q", got, want)
	}
	if !u.Has(store.GrantRefundAccess) {
		t.Errorf("grants = %v, want %s", u.Grants, store.GrantRefundAccess)
	}
	for name, tc := range map[string][2]string{
		"wrong password": {"customer@example.com", "nope"},
		"unknown email":  {"nobody@example.com", "demo"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := s.Authenticate(ctx, tc[0], tc[1]); !errors.Is(err, store.ErrBadCredentials) {
				t.Errorf("err = %v, want ErrBadCredentials", err)
			}
		})
	}
	t.Run("disabled user", func(t *testing.T) {
		if _, err := storetest.DB(t, s).ExecContext(ctx, `UPDATE users SET disabled_at = now() WHERE id = $1`, u.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(ctx, u.Email, devdb.DemoPassword); !errors.Is(err, store.ErrBadCredentials) {
			t.Errorf("err = %v, want ErrBadCredentials", err)
		}
	})
}
