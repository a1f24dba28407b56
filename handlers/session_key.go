package handlers

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MinSessionKey is the shortest session key accepted: the cookie's signing
// and encryption keys are derived from it, so it must carry real entropy.
const MinSessionKey = 32

// ShortKeyError means a session key file holds a key too short to use. The
// person running refundd fixes it by deleting the file.
type ShortKeyError struct{ Path string }

func (e *ShortKeyError) Error() string {
	return fmt.Sprintf("%s holds a key shorter than %d characters: delete it to get a new one", e.Path, MinSessionKey)
}

// DevSessionKey returns the session key kept in dataDir/session.key,
// creating it on first use, so dev logins survive restarts. A file holding
// a key shorter than MinSessionKey is a *ShortKeyError.
func DevSessionKey(dataDir string) (string, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dataDir, "session.key")
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generate session key: %w", err)
	}
	key := hex.EncodeToString(raw)
	// O_EXCL: the first run writes the key, every later run reads it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, werr := f.WriteString(key + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return "", fmt.Errorf("write %s: %w", path, werr)
		}
		return key, nil
	case errors.Is(err, fs.ErrExist):
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", path, err)
		}
		key = strings.TrimSpace(string(b))
		if len(key) < MinSessionKey {
			return "", &ShortKeyError{Path: path}
		}
		return key, nil
	default:
		return "", fmt.Errorf("create %s: %w", path, err)
	}
}
