package store_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// TestMigrate_LowerMigrationLandedLater: a database migrated while a
// later-numbered migration had landed before a lower one takes the lower
// one afterwards instead of refusing to start (goose's default).
func TestMigrate_LowerMigrationLandedLater(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	db, err := sql.Open("postgres", st.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	// Forget that migration 14 was applied (its column stays; the
	// migration is re-run as the newcomer it would be).
	if _, err := db.ExecContext(ctx, `ALTER TABLE operations DROP COLUMN unsent; DELETE FROM goose_db_version WHERE version_id = 14`); err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatalf("Migrate with a lower migration pending: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id = 14`).Scan(&n); err != nil || n != 1 {
		t.Errorf("migration 14 applied %d times (%v), want once", n, err)
	}
}
