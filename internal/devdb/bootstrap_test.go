package devdb

import (
	"os"
	"path/filepath"
	"testing"
)

// TestClusterHome_PrivateParent: a DATA_DIR inside a folder the postgres
// user cannot enter (a checkout under /root) gets its cluster elsewhere,
// the same place every time; a reachable one keeps it.
func TestClusterHome_PrivateParent(t *testing.T) {
	t.Parallel()
	t.Run("reachable parent keeps DATA_DIR", func(t *testing.T) {
		t.Parallel()
		reachable := filepath.Join(reachableTempDir(t), ".data")
		if err := os.MkdirAll(reachable, 0o755); err != nil {
			t.Fatal(err)
		}
		if got, err := clusterHome(reachable); err != nil || got != reachable {
			t.Errorf("clusterHome(reachable) = %q, %v; want %q", got, err, reachable)
		}
	})
	t.Run("private parent moves the cluster", func(t *testing.T) {
		t.Parallel()
		private := t.TempDir() // 0700, owned by us
		dataDir := filepath.Join(private, ".data")
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := clusterHome(dataDir)
		if err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() != 0 {
			// Not root: the server runs as us and reaches our own folders.
			if got != dataDir {
				t.Errorf("clusterHome = %q, want %q when not root", got, dataDir)
			}
			return
		}
		t.Cleanup(func() { os.RemoveAll(got) })
		if got == dataDir {
			t.Fatalf("clusterHome = DATA_DIR %q, which postgres cannot reach", got)
		}
		if again, err := clusterHome(dataDir); err != nil || again != got {
			t.Errorf("clusterHome moved: %q then %q (%v)", got, again, err)
		}
	})
}

// reachableTempDir is a folder every user can enter (t.TempDir's parents
// are private to whoever runs the test). It is removed at the end.
func reachableTempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "refundd-home-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}
