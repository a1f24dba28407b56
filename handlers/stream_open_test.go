package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/handlers"
)

// TestStreamOpen_OnePassAnswersAsTheWholeChain: a run's stream that passes
// the one-pass checks (streamOpener) opens with the headers every answer
// carries, and one that does not (a foreign host, a cursor that is not
// text, a body) is answered by echo's whole way, in the same words as any
// other route: the shortcut lets nothing through that the chain refuses.
func TestStreamOpen_OnePassAnswersAsTheWholeChain(t *testing.T) {
	t.Parallel()
	s := newStreamApp(t, handlers.Config{})
	c := s.customerClient(t)
	for _, path := range []string{"/runs/" + s.run.ID.String() + "/events", "/api/runs/" + s.run.ID.String() + "/stream"} {
		t.Run(path, func(t *testing.T) {
			conn := s.open(t, c, path+"?after=0", "")
			if conn.res.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", conn.res.StatusCode)
			}
			for name, want := range map[string]string{"Content-Security-Policy": wantCSP, "Cache-Control": "no-cache",
				"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"} {
				if got := conn.res.Header.Get(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			select {
			case ev := <-conn.events:
				if ev.ID == "" {
					t.Errorf("first message %+v has no id: the run's events were not sent", ev)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no event within 10 s of the open")
			}
			conn.cancel()

			foreign, err := http.NewRequest(http.MethodGet, s.srv.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			foreign.Host = "rebound.example"
			wantStatus(t, do(t, c, foreign), http.StatusMisdirectedRequest)

			r := s.send(t, c, http.MethodGet, path+"?after=1%00", nil, "")
			wantStatus(t, r, http.StatusUnprocessableEntity)
			if !strings.Contains(r.body, "after") {
				t.Errorf("the refusal does not name the parameter after:\n%s", r.body)
			}
			r = s.send(t, c, http.MethodGet, path, map[string]string{"Content-Type": "application/json"}, `{}`)
			wantStatus(t, r, http.StatusBadRequest)
		})
	}
}
