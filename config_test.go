package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLoadConfig_Defaults(t *testing.T) {
	t.Parallel()
	c, err := LoadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	// Field by field, so fields other commands add need no change here.
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"DatabaseURL", c.DatabaseURL, ""},
		{"DataDir", c.DataDir, "./.data"},
		{"Addr", c.Addr, "127.0.0.1:8080"},
		{"ProviderAddr", c.ProviderAddr, "127.0.0.1:8081"},
		{"ProviderURL", c.ProviderURL, "http://127.0.0.1:8081"},
		{"SessionKey", c.SessionKey, ""},
		{"CookieSecure", c.CookieSecure, false},
		{"ReplayWindow", c.ReplayWindow, 15 * time.Minute},
		{"ModelBaseURL", c.ModelBaseURL, ""},
		{"LogLevel", c.LogLevel, slog.LevelInfo},
		{"LogFormat", c.LogFormat, "text"},
	} {
		if f.got != f.want {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}
}

func TestLoadConfig_Values(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL":   "postgres://u@db/refundd",
		"ADDR":           ":9000",
		"PROVIDER_URL":   "https://pay.example.com",
		"SESSION_KEY":    strings.Repeat("s", 40),
		"COOKIE_SECURE":  "true",
		"REPLAY_WINDOW":  "1h",
		"MODEL_BASE_URL": "http://localhost:11434/v1",
		"MODEL_NAME":     "small",
		"LOG_LEVEL":      "debug",
		"LOG_FORMAT":     "JSON",
	}
	c, err := LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !c.CookieSecure || c.ReplayWindow != time.Hour || c.LogLevel != slog.LevelDebug || c.LogFormat != "json" ||
		c.ProviderURL != "https://pay.example.com" || c.Addr != ":9000" {
		t.Errorf("config = %+v", c)
	}
}

func TestLoadConfig_BadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, key, value, says string }{
		{"addr", "ADDR", "8080", "ADDR must be host:port"},
		{"port", "PROVIDER_ADDR", "localhost:http2", "PROVIDER_ADDR must be host:port"},
		{"database url", "DATABASE_URL", "mysql://x", "DATABASE_URL"},
		{"provider url", "PROVIDER_URL", "pay.example.com", "PROVIDER_URL"},
		{"short key", "SESSION_KEY", "hunter2", "SESSION_KEY must be at least 32"},
		{"cookie", "COOKIE_SECURE", "maybe", "COOKIE_SECURE"},
		{"window", "REPLAY_WINDOW", "15", "REPLAY_WINDOW"},
		{"model alone", "MODEL_BASE_URL", "http://m/v1", "MODEL_NAME must be set together"},
		{"log level", "LOG_LEVEL", "loud", "LOG_LEVEL"},
		{"log format", "LOG_FORMAT", "xml", "LOG_FORMAT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(func(k string) string {
				if k == tc.key {
					return tc.value
				}
				return ""
			})
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want it to say %q", err, tc.says)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines: %q", err)
			}
			if tc.key == "SESSION_KEY" && strings.Contains(err.Error(), tc.value) {
				t.Errorf("error echoes the secret: %q", err)
			}
		})
	}
}
