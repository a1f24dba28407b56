package devdb_test

import (
	"context"
	"os"
	"testing"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

func TestSeedDemo_Idempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.MustOpen(t)
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := devdb.SeedDemo(ctx, s); err != nil {
			t.Fatalf("SeedDemo #%d: %v", i+1, err)
		}
	}
	var users, orders int
	if err := storetest.DB(t, s).GetContext(ctx, &users, `SELECT count(*) FROM users`); err != nil {
		t.Fatal(err)
	}
	if err := storetest.DB(t, s).GetContext(ctx, &orders, `SELECT count(*) FROM orders`); err != nil {
		t.Fatal(err)
	}
	if got, want := users, len(devdb.DemoUsers); got != want {
		t.Errorf("users = %d, want %d", got, want)
	}
	if got, want := orders, 5; got != want {
		t.Errorf("orders = %d, want %d", got, want)
	}
}
