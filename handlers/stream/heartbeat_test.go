package stream

import (
	"testing"
	"time"
)

// Idle streams' heartbeats fall on shared slots, a quarter of a heartbeat
// apart, never sooner than a heartbeat after the stream's last write.
func TestHeartbeatIn_SharedSlotsNeverEarly(t *testing.T) {
	every := 15 * time.Second
	slot := every / 4
	for _, now := range []time.Duration{0, 1, time.Millisecond, slot - 1, slot, slot + 1, 7 * time.Second, time.Hour + 123456789} {
		d := heartbeatIn(every, now)
		if d < every || d >= every+slot {
			t.Errorf("at %v: heartbeat in %v, want in [%v, %v)", now, d, every, every+slot)
		}
		if (now+d)%slot != 0 {
			t.Errorf("at %v: heartbeat at %v, not on a slot of %v", now, now+d, slot)
		}
	}
	// Two streams that wrote a moment apart beat together.
	if a, b := 2*time.Second+heartbeatIn(every, 2*time.Second), 3*time.Second+heartbeatIn(every, 3*time.Second); a != b {
		t.Errorf("streams that wrote at 2s and 3s beat at %v and %v, want one slot", a, b)
	}
	// A heartbeat shorter than four milliseconds still gets slots.
	if d := heartbeatIn(2*time.Millisecond, 500*time.Microsecond); d < 2*time.Millisecond || d >= 3*time.Millisecond {
		t.Errorf("2ms heartbeat: in %v", d)
	}
}
