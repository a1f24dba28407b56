package outbound

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"120", 2 * time.Minute, true},
		{"0", 0, true},
		{"-5", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
	} {
		got, ok := parseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestRetryIn: the schedule's step by attempt, jittered within ±10%,
// every last step after the schedule; Retry-After instead, capped at the
// last step.
func TestRetryIn(t *testing.T) {
	t.Parallel()
	e := New(Config{Schedule: []time.Duration{time.Second, time.Minute, time.Hour}}, nil, nil)
	for _, c := range []struct {
		attempts int
		a        attempt
		step     time.Duration
		exact    bool
	}{
		{1, attempt{}, time.Second, false},
		{2, attempt{}, time.Minute, false},
		{3, attempt{}, time.Hour, false},
		{9, attempt{}, time.Hour, false},
		{1, attempt{hasAfter: true, retryAfter: 30 * time.Second}, 30 * time.Second, true},
		{1, attempt{hasAfter: true, retryAfter: 48 * time.Hour}, time.Hour, true},
	} {
		for range 50 {
			got := e.retryIn(c.attempts, c.a)
			lo, hi := c.step*9/10, c.step*11/10
			if c.exact {
				lo, hi = c.step, c.step
			}
			if got < lo || got > hi {
				t.Fatalf("retryIn(%d, %+v) = %v, want within [%v, %v]", c.attempts, c.a, got, lo, hi)
			}
		}
	}
}

func TestConfig_Defaults(t *testing.T) {
	t.Parallel()
	var got Config
	got.fill()
	if len(got.Schedule) != 7 || got.Workers != 64 || got.PerEndpoint != 16 || got.Timeout != 10*time.Second ||
		got.DisableAfter != 72*time.Hour || got.Poll != 200*time.Millisecond {
		t.Errorf("defaults: %+v", got)
	}
}
