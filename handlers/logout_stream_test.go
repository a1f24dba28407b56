package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/testkit"
)

// TestLogout_EndsSessionStreamsAtOnce: logging out ends the streams that
// session opened within 2 s, long before the 30 s periodic re-check, and
// leaves the same user's other sessions streaming.
func TestLogout_EndsSessionStreamsAtOnce(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener()) // default Recheck: 30 s
	c, other := a.customerClient(t), a.customerClient(t)
	s := a.open(t, c, htmlStreamPath(a.run.ID, "1"), "")
	kept := a.open(t, other, htmlStreamPath(a.run.ID, "1"), "")
	if s.res.StatusCode != http.StatusOK || kept.res.StatusCode != http.StatusOK {
		t.Fatalf("streams answered %d and %d, want 200", s.res.StatusCode, kept.res.StatusCode)
	}

	wantRedirect(t, a.post(t, c, "/logout", nil), "/login")
	s.read(t, "the logged-out session's stream to close", 2*time.Second, func(ev testkit.SSEEvent, ok bool) bool {
		if !ok {
			t.Fatal("the stream ended without the close event")
		}
		if ev.Comment != "" {
			return false
		}
		if ev.Event != "close" || !strings.Contains(ev.Data, "Log in again") {
			t.Fatalf("got %+v, want close asking to log in again", ev)
		}
		return true
	})
	s.wantEnd(t)

	a.narrate(t, 1, 1) // seq 2
	if msg := kept.next(t); msg.ID != "2" {
		t.Errorf("the other session's stream got %+v, want narration seq 2", msg)
	}
}
