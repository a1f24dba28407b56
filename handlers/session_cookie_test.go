package handlers

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

// TestSessionID_VerifiedOnceAndStillBounded: a stream reads its session ID
// from the cookie; a cookie seen before is not verified again, but only
// the very cookie verified hits (a byte changed is checked, and refused),
// and a remembered cookie is refused once its signed date is past the
// session's age.
func TestSessionID_VerifiedOnceAndStillBounded(t *testing.T) {
	sess, err := newSessionStore("test-session-key-0123456789abcdef", false)
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{sessions: sess, cookie: sessionCookieName(false)}
	e := echo.New()
	value, err := sess.Codecs[0].Encode(h.cookie, map[any]any{keySessionID: "sid-1"})
	if err != nil {
		t.Fatal(err)
	}
	idOf := func(v string) string {
		req := httptest.NewRequest(http.MethodGet, "/api/runs/x/stream", nil)
		req.AddCookie(&http.Cookie{Name: h.cookie, Value: v})
		return h.sessionID(e.NewContext(req, httptest.NewRecorder()))
	}
	if got := idOf(value); got != "sid-1" {
		t.Fatalf("a fresh cookie names %q, want sid-1", got)
	}
	if _, ok := h.verified.get(value, time.Now()); !ok {
		t.Fatal("the verified cookie is not remembered")
	}
	if got := idOf(value); got != "sid-1" {
		t.Errorf("the remembered cookie names %q, want sid-1", got)
	}
	tampered := value[:len(value)-2] + map[bool]string{true: "A", false: "B"}[value[len(value)-2] != 'A'] + value[len(value)-1:]
	if got := idOf(tampered); got != "" {
		t.Errorf("a tampered cookie names %q, want none", got)
	}
	if got := idOf("not-a-cookie"); got != "" {
		t.Errorf("garbage names %q", got)
	}

	// A cookie signed eight days ago is refused even when remembered (the
	// MAC cannot be forged here, so the entry is made directly).
	old := base64.URLEncoding.EncodeToString([]byte(fmt.Sprintf("%d|value|mac", time.Now().Add(-8*24*time.Hour).Unix())))
	h.verified.put(old, "sid-old")
	if _, ok := h.verified.get(old, time.Now()); ok {
		t.Error("a remembered cookie past the session's age still names its session")
	}
	if sid, ok := h.verified.get(old, time.Now().Add(-7*24*time.Hour)); !ok || sid != "sid-old" {
		t.Errorf("within its age the entry reads %q %v", sid, ok)
	}
}
