package handlers_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refundd/refundd/handlers"
)

// TestDevSessionKey_CreatedOnceThenReused: the first call writes a fresh
// key readable only by us; later calls return the same key, so dev logins
// survive restarts.
func TestDevSessionKey_CreatedOnceThenReused(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data") // not there yet: created
	first, err := handlers.DevSessionKey(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(first), handlers.MinSessionKey; got < want {
		t.Errorf("new key has %d characters, want at least %d", got, want)
	}
	path := filepath.Join(dataDir, "session.key")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Mode().Perm(), os.FileMode(0o600); got != want {
		t.Errorf("session.key mode = %v, want %v", got, want)
	}
	again, err := handlers.DevSessionKey(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Errorf("second call returned another key: %q then %q", first, again)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != first {
		t.Errorf("session.key holds %q, want the returned key %q", got, first)
	}
}

// TestDevSessionKey_ShortKeyRefused: a key file someone shortened is
// refused with words saying how to fix it, never used.
func TestDevSessionKey_ShortKeyRefused(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	path := filepath.Join(dataDir, "session.key")
	if err := os.WriteFile(path, []byte("too-short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := handlers.DevSessionKey(dataDir)
	var short *handlers.ShortKeyError
	if !errors.As(err, &short) {
		t.Fatalf("DevSessionKey = %q, %v; want a *ShortKeyError", key, err)
	}
	if got, want := short.Path, path; got != want {
		t.Errorf("error names %q, want %q", got, want)
	}
	if !strings.Contains(err.Error(), "delete it to get a new one") {
		t.Errorf("error %q does not say how to fix it", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "too-short\n" {
		t.Errorf("session.key was rewritten to %q; it must be left for the person to delete", b)
	}
}
