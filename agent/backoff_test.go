package agent

import (
	"testing"
	"time"
)

// TestBackoff_NextTryWithinFiveSecondsOfRecovery: however long the outage
// has lasted, the wait before the next try is at most RetryMax, and the
// run is claimed again within a Poll of falling due, so with the defaults
// the provider is tried again within 5 s of answering again (after a 30 s
// outage it used to be 21-23 s: the cap was 30 s).
func TestBackoff_NextTryWithinFiveSecondsOfRecovery(t *testing.T) {
	t.Parallel()
	var cfg Config
	cfg.fill()
	if worst := cfg.RetryMax + cfg.Poll; worst >= 5*time.Second {
		t.Fatalf("RetryMax %s + Poll %s = %s, want under 5s", cfg.RetryMax, cfg.Poll, worst)
	}
	e := &Executor{cfg: cfg}
	prev := time.Duration(0)
	for n := 1; n <= 100; n++ {
		d := e.backoff(n)
		if d > cfg.RetryMax || d <= 0 {
			t.Fatalf("backoff(%d) = %s, want within (0, %s]", n, d, cfg.RetryMax)
		}
		prev = max(prev, d)
	}
	if prev < cfg.RetryMax/2 {
		t.Errorf("the longest backoff over 100 refusals is %s, want it to reach the cap's upper half", prev)
	}
}
