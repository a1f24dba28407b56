package payments_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store/storetest"
)

// TestOpenSim_OwnPool: a Sim opened from a URL keeps its ledger through a
// pool of its own, which CloseDB closes; a Sim over its caller's pool
// leaves that pool open.
func TestOpenSim_OwnPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)

	t.Run("serves refunds from its own pool", func(t *testing.T) {
		sim, err := payments.OpenSim(ctx, url, payments.Faults{})
		if err != nil {
			t.Fatal(err)
		}
		// Cleanups run last-in first-out: the pool closes after the server.
		t.Cleanup(func() {
			if err := sim.CloseDB(); err != nil {
				t.Errorf("CloseDB: %v", err)
			}
		})
		ts := httptest.NewServer(sim.Handler())
		t.Cleanup(ts.Close)
		t.Cleanup(sim.Close)
		c := payments.NewClient(ts.URL, 0).WithSecret(sim.Secret())
		t.Cleanup(c.Close)
		rc, err := c.Refund(ctx, payments.RefundRequest{Key: "own-pool", OrderRef: "o1", Amount: 100, Currency: "EUR"})
		if err != nil {
			t.Fatal(err)
		}
		ledger, err := c.Ledger(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ledger) != 1 || ledger[0].Ref != rc.Ref {
			t.Errorf("ledger = %+v, want the one refund %s", ledger, rc.Ref)
		}
	})

	t.Run("leaves its caller's pool open", func(t *testing.T) {
		db, err := sqlx.Open("postgres", url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		sim, err := payments.NewSim(db, payments.Faults{})
		if err != nil {
			t.Fatal(err)
		}
		if err := sim.CloseDB(); err != nil {
			t.Errorf("CloseDB: %v", err)
		}
		if err := db.PingContext(ctx); err != nil {
			t.Errorf("caller's pool after CloseDB: %v, want it still open", err)
		}
	})

	t.Run("unreachable database", func(t *testing.T) {
		_, err := payments.OpenSim(ctx, "postgres://postgres@/x?host=/nonexistent&sslmode=disable", payments.Faults{})
		if err == nil || !strings.HasPrefix(err.Error(), "payments: ") {
			t.Fatalf("OpenSim on an unreachable database: %v, want a payments: error", err)
		}
	})
}
