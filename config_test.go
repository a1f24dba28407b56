package main

import (
	"log/slog"
	"slices"
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
		{"HealthAddr", c.HealthAddr, ""},
		{"ProviderAddr", c.ProviderAddr, "127.0.0.1:8081"},
		{"ProviderURL", c.ProviderURL, "http://127.0.0.1:8081"},
		{"SessionKey", c.SessionKey, ""},
		{"CookieSecure", c.CookieSecure, false},
		{"ReplayWindow", c.ReplayWindow, 15 * time.Minute},
		{"WorkerLease", c.WorkerLease, 3 * time.Second},
		{"ProviderOutageBudget", c.ProviderOutageBudget, time.Minute},
		{"WorkerSlots", c.WorkerSlots, 8},
		{"NarrationPace", c.NarrationPace, 40 * time.Millisecond},
		{"DBPoolSize", c.DBPoolSize, 16},
		{"GCPercent", c.GCPercent, 400},
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
		"HEALTH_ADDR":    "127.0.0.1:9001",
		"PROVIDER_URL":   "https://pay.example.com",
		"SESSION_KEY":    strings.Repeat("s", 40),
		"COOKIE_SECURE":  "true",
		"REPLAY_WINDOW":  "1h",
		"MODEL_BASE_URL": "http://localhost:11434/v1",
		"MODEL_NAME":     "small",
		"LOG_LEVEL":      "debug",
		"LOG_FORMAT":     "JSON",
		"GOGC":           "off",
	}
	c, err := LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !c.CookieSecure || c.GCPercent != -1 || c.ReplayWindow != time.Hour || c.LogLevel != slog.LevelDebug || c.LogFormat != "json" ||
		c.ProviderURL != "https://pay.example.com" || c.Addr != ":9000" || c.HealthAddr != "127.0.0.1:9001" {
		t.Errorf("config = %+v", c)
	}
}

func TestLoadConfig_BadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, key, value, says string }{
		{"addr", "ADDR", "8080", "ADDR must be host:port"},
		{"port", "PROVIDER_ADDR", "localhost:http2", "PROVIDER_ADDR must be host:port"},
		{"health addr", "HEALTH_ADDR", "8082", "HEALTH_ADDR must be host:port"},
		{"health addr is ADDR", "HEALTH_ADDR", "127.0.0.1:8080", "HEALTH_ADDR must differ from ADDR"},
		{"health addr on ADDR's port, all hosts", "HEALTH_ADDR", ":8080", "HEALTH_ADDR must differ from ADDR"},
		{"database url", "DATABASE_URL", "mysql://x", "DATABASE_URL"},
		{"provider url", "PROVIDER_URL", "pay.example.com", "PROVIDER_URL"},
		{"short key", "SESSION_KEY", "hunter2", "SESSION_KEY must be at least 32"},
		{"cookie", "COOKIE_SECURE", "maybe", "COOKIE_SECURE"},
		{"window", "REPLAY_WINDOW", "15", "REPLAY_WINDOW"},
		{"lease", "WORKER_LEASE", "500ms", "WORKER_LEASE must be a duration of at least 1s"},
		{"outage budget", "PROVIDER_OUTAGE_BUDGET", "soon", "PROVIDER_OUTAGE_BUDGET must be a duration"},
		{"zero slots", "WORKER_SLOTS", "0", "WORKER_SLOTS must be a whole number of at least 1"},
		{"slots not a number", "WORKER_SLOTS", "many", "WORKER_SLOTS must be a whole number"},
		{"negative pace", "NARRATION_PACE", "-1ms", "NARRATION_PACE must be a duration"},
		{"pace without unit", "NARRATION_PACE", "40", "NARRATION_PACE must be a duration"},
		{"zero pool", "DB_POOL_SIZE", "0", "DB_POOL_SIZE must be a whole number of at least 1"},
		{"gc percent", "GOGC", "lots", "GOGC must be a whole number of at least 1"},
		{"model alone", "MODEL_BASE_URL", "http://m/v1", "MODEL_NAME must be set together"},
		{"log level", "LOG_LEVEL", "loud", "LOG_LEVEL"},
		{"log format", "LOG_FORMAT", "xml", "LOG_FORMAT"},
		{"host with port", "ALLOWED_HOSTS", "refundd.example:8080", "ALLOWED_HOSTS must be host names"},
		{"host as URL", "ALLOWED_HOSTS", "https://refundd.example", "ALLOWED_HOSTS must be host names"},
		{"empty host", "ALLOWED_HOSTS", "a.example,,b.example", "ALLOWED_HOSTS must be host names"},
		{"request timeout", "REQUEST_TIMEOUT", "10", "REQUEST_TIMEOUT"},
		{"zero request timeout", "REQUEST_TIMEOUT", "0s", "REQUEST_TIMEOUT"},
		{"write timeout within the request's", "WRITE_TIMEOUT", "10s", "WRITE_TIMEOUT (10s) must be above REQUEST_TIMEOUT"},
		{"write timeout too short", "WRITE_TIMEOUT", "10ms", "WRITE_TIMEOUT must be a duration of at least 1s"},
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

// TestLoadConfig_AllowedHosts: by default a local instance answers to its
// listen host and the loopback names only (DNS rebinding); a setting
// replaces that list.
func TestLoadConfig_AllowedHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"default", nil, []string{"localhost", "127.0.0.1", "::1"}},
		{"listen host added", map[string]string{"ADDR": "10.1.2.3:8080"}, []string{"localhost", "127.0.0.1", "::1", "10.1.2.3"}},
		{"all interfaces", map[string]string{"ADDR": ":8080"}, []string{"localhost", "127.0.0.1", "::1"}},
		{"set", map[string]string{"ALLOWED_HOSTS": " refunds.example.com, ::1 ,*"}, []string{"refunds.example.com", "::1", "*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := LoadConfig(func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.AllowedHosts, tc.want) {
				t.Errorf("AllowedHosts = %q, want %q", c.AllowedHosts, tc.want)
			}
		})
	}
}

func TestLoadConfig_RequestTimeout(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]time.Duration{"": 10 * time.Second, "250ms": 250 * time.Millisecond} {
		c, err := LoadConfig(func(k string) string {
			if k == "REQUEST_TIMEOUT" {
				return value
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		if c.RequestTimeout != want {
			t.Errorf("REQUEST_TIMEOUT=%q: RequestTimeout = %v, want %v", value, c.RequestTimeout, want)
		}
	}
}

// TestLoadConfig_Capacity: the executor's slots, the narrator's pace (0 is
// allowed: narrate at full speed) and the pool size are settings.
func TestLoadConfig_Capacity(t *testing.T) {
	t.Parallel()
	env := map[string]string{"WORKER_SLOTS": "36", "NARRATION_PACE": "0", "DB_POOL_SIZE": "10"}
	c, err := LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkerSlots != 36 || c.NarrationPace != 0 || c.DBPoolSize != 10 {
		t.Errorf("WorkerSlots, NarrationPace, DBPoolSize = %d, %v, %d, want 36, 0s, 10", c.WorkerSlots, c.NarrationPace, c.DBPoolSize)
	}
}

// TestLoadConfig_StartRatePerUser: starts a user may make a minute; 60 by
// default, 0 for no limit, and anything but a whole number is refused.
func TestLoadConfig_StartRatePerUser(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]int{"": 60, "0": 0, "5": 5} {
		c, err := LoadConfig(func(k string) string {
			if k == "START_RATE_PER_USER" {
				return value
			}
			return ""
		})
		if err != nil {
			t.Fatalf("START_RATE_PER_USER=%q: %v", value, err)
		}
		if c.StartRatePerUser != want {
			t.Errorf("START_RATE_PER_USER=%q: StartRatePerUser = %d, want %d", value, c.StartRatePerUser, want)
		}
	}
	for _, value := range []string{"-1", "many", "1.5"} {
		_, err := LoadConfig(func(k string) string {
			if k == "START_RATE_PER_USER" {
				return value
			}
			return ""
		})
		if want := "START_RATE_PER_USER must be a whole number"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("START_RATE_PER_USER=%q: err = %v, want it to say %q", value, err, want)
		}
	}
}

// TestLoadConfig_StreamLimits: the caps on connections and streams default
// from the open-file limit, keep connections free for pages, and refuse a
// stream cap that would leave pages none.
func TestLoadConfig_StreamLimits(t *testing.T) {
	t.Parallel()
	t.Run("defaults follow the open-file limit", func(t *testing.T) {
		c, err := LoadConfig(func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		files := openFileLimit()
		if c.MaxConnections >= files || c.MaxConnections < 64 {
			t.Errorf("MaxConnections = %d, want below the open-file limit %d (and at least 64)", c.MaxConnections, files)
		}
		if c.MaxStreams >= c.MaxConnections || c.MaxStreams < c.MaxConnections*8/10 {
			t.Errorf("MaxStreams = %d, want below MaxConnections %d by a reserve of about a tenth", c.MaxStreams, c.MaxConnections)
		}
		if c.MaxStreamsPerUser != 16 {
			t.Errorf("MaxStreamsPerUser = %d, want 16", c.MaxStreamsPerUser)
		}
	})
	t.Run("set", func(t *testing.T) {
		env := map[string]string{"MAX_CONNECTIONS": "500", "MAX_STREAMS": "400", "MAX_STREAMS_PER_USER": "4"}
		c, err := LoadConfig(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if c.MaxConnections != 500 || c.MaxStreams != 400 || c.MaxStreamsPerUser != 4 {
			t.Errorf("caps = %d, %d, %d, want 500, 400, 4", c.MaxConnections, c.MaxStreams, c.MaxStreamsPerUser)
		}
	})
	for _, bad := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"MAX_STREAMS_PER_USER": "0"}, "MAX_STREAMS_PER_USER must be a whole number of at least 1"},
		{map[string]string{"MAX_STREAMS": "lots"}, "MAX_STREAMS must be a whole number"},
		{map[string]string{"MAX_CONNECTIONS": "100", "MAX_STREAMS": "100"}, "MAX_STREAMS (100) must be below MAX_CONNECTIONS (100)"},
	} {
		_, err := LoadConfig(func(k string) string { return bad.env[k] })
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: err = %v, want %q", bad.env, err, bad.want)
		}
	}
}

// TestSameAddr: HEALTH_ADDR clashes with ADDR on the same fixed port of the
// same host or of all hosts; any free port (0) never clashes.
func TestSameAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{":8080", "127.0.0.1:8080", true},
		{"0.0.0.0:8080", "10.0.0.5:8080", true},
		{"[::]:8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8082", "127.0.0.1:8080", false},
		{"10.0.0.6:8080", "10.0.0.5:8080", false},
		{"127.0.0.1:0", "127.0.0.1:0", false},
		{"", "127.0.0.1:8080", false},
	} {
		if got := sameAddr(tc.a, tc.b); got != tc.want {
			t.Errorf("sameAddr(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestLoadConfig_Outbound(t *testing.T) {
	t.Parallel()
	t.Run("defaults", func(t *testing.T) {
		c, err := LoadConfig(func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		want := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}
		if !slices.Equal(c.WebhookSchedule, want) {
			t.Errorf("WebhookSchedule = %v, want %v", c.WebhookSchedule, want)
		}
		for _, f := range []struct {
			name      string
			got, want any
		}{
			{"WebhookTimeout", c.WebhookTimeout, 10 * time.Second},
			{"WebhookDisableAfter", c.WebhookDisableAfter, 72 * time.Hour},
			{"WebhookWorkers", c.WebhookWorkers, 64},
			{"WebhookPerEndpoint", c.WebhookPerEndpoint, 16},
			{"MaxWebhooks", c.MaxWebhooks, 50},
			{"SMTPURL", c.SMTPURL, ""},
			{"MailFrom", c.MailFrom, "refundd <refundd@localhost>"},
			{"PublicURL", c.PublicURL, "http://127.0.0.1:8080"},
			{"WebhookAllowHosts", len(c.WebhookAllowHosts), 0},
		} {
			if f.got != f.want {
				t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
			}
		}
	})
	t.Run("values", func(t *testing.T) {
		env := map[string]string{
			"WEBHOOK_ALLOW_HOSTS":    "hooks.internal, 10.0.0.7",
			"WEBHOOK_RETRY_SCHEDULE": "100ms, 1s",
			"MAX_WEBHOOKS":           "3",
			"SMTP_URL":               "smtp://u:secret@mail.example.com:587",
			"ADDR":                   ":9000",
			"PUBLIC_URL":             "https://refunds.example.com/",
		}
		c, err := LoadConfig(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.WebhookAllowHosts, []string{"hooks.internal", "10.0.0.7"}; !slices.Equal(got, want) {
			t.Errorf("WebhookAllowHosts = %q, want %q", got, want)
		}
		if got, want := c.WebhookSchedule, []time.Duration{100 * time.Millisecond, time.Second}; !slices.Equal(got, want) {
			t.Errorf("WebhookSchedule = %v, want %v", got, want)
		}
		if c.MaxWebhooks != 3 || c.SMTPURL != env["SMTP_URL"] || c.PublicURL != "https://refunds.example.com" {
			t.Errorf("MaxWebhooks, SMTPURL, PublicURL = %d, %q, %q", c.MaxWebhooks, c.SMTPURL, c.PublicURL)
		}
	})
	t.Run("public URL of a listen-everywhere ADDR", func(t *testing.T) {
		c, err := LoadConfig(func(k string) string { return map[string]string{"ADDR": ":9000"}[k] })
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.PublicURL, "http://localhost:9000"; got != want {
			t.Errorf("PublicURL = %q, want %q", got, want)
		}
	})
}

func TestLoadConfig_OutboundBadValues(t *testing.T) {
	t.Parallel()
	for name, env := range map[string]map[string]string{
		"zero step":      {"WEBHOOK_RETRY_SCHEDULE": "5s,0s"},
		"not a duration": {"WEBHOOK_RETRY_SCHEDULE": "5s,soon"},
		"too many steps": {"WEBHOOK_RETRY_SCHEDULE": strings.Repeat("1s,", 20) + "1s"},
		"no webhooks":    {"MAX_WEBHOOKS": "0"},
		"no workers":     {"WEBHOOK_WORKERS": "0"},
		"public URL":     {"PUBLIC_URL": "refunds.example.com"},
	} {
		t.Run("refuses "+name, func(t *testing.T) {
			_, err := LoadConfig(func(k string) string { return env[k] })
			if err == nil {
				t.Fatalf("LoadConfig(%v) = nil error, want a refusal", env)
			}
		})
	}
	t.Run("never echoes SMTP_URL", func(t *testing.T) {
		_, err := LoadConfig(func(k string) string {
			return map[string]string{"SMTP_URL": "smtp://u:hunter2@mail:587", "MAX_WEBHOOKS": "none"}[k]
		})
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("LoadConfig error = %v, want a refusal that does not hold the password", err)
		}
	})
}
