package agent_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// fakeModel is an OpenAI-compatible chat-completions endpoint that streams
// the given pieces, then [DONE].
func fakeModel(t *testing.T, pieces ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test" {
			http.Error(w, "wrong path or key", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range pieces {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", p)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestOpenAI_StreamsDeltas(t *testing.T) {
	t.Parallel()
	srv := fakeModel(t, "Looking ", "at your ", "order.")
	n := &agent.OpenAI{BaseURL: srv.URL + "/v1", Model: "m", APIKey: "sk-test"}
	var got []string
	err := n.Narrate(context.Background(), agent.Facts{Stage: "planning"}, func(s string) error {
		got = append(got, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "Looking |at your |order." {
		t.Errorf("deltas = %q", got)
	}
}

func TestOpenAI_Errors(t *testing.T) {
	t.Parallel()
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"half\"}}]}\n\n")
	}))
	t.Cleanup(cut.Close)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body first: only then does the server notice the client
		// hanging up and end the request's context.
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(slow.Close)
	for name, n := range map[string]*agent.OpenAI{
		"wrong key":             {BaseURL: fakeModel(t).URL + "/v1", Model: "m", APIKey: "nope"},
		"stream cut short":      {BaseURL: cut.URL, Model: "m"},
		"timeout":               {BaseURL: slow.URL, Model: "m", Timeout: 100 * time.Millisecond},
		"nobody listening here": {BaseURL: "http://127.0.0.1:1", Model: "m"},
	} {
		t.Run(name, func(t *testing.T) {
			err := n.Narrate(context.Background(), agent.Facts{}, func(string) error { return nil })
			if err == nil {
				t.Error("Narrate succeeded, want an error")
			}
		})
	}
}

func TestExecutor_ModelTextIsNarrationAndItsFailureIsNotTheRunsFailure(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		baseURL string
		want    string
	}{
		"model speaks":       {fakeModel(t, "The model ", "says hello. ").URL + "/v1", "The model says hello."},
		"model down":         {"http://127.0.0.1:1", "I'm looking at order"},
		"model refuses auth": {fakeModel(t).URL + "/bad", "I'm looking at order"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, payments.Faults{})
			e.executor(agent.Config{}, &agent.OpenAI{BaseURL: tc.baseURL, Model: "m", APIKey: "sk-test", Timeout: time.Second})
			run := e.start(100)
			e.waitState(run.ID, store.StateAwaitingApproval)
			var texts []string
			if err := e.db.Select(&texts, `SELECT payload->>'text' FROM run_events WHERE run_id = $1 AND type = 'narration.delta' ORDER BY seq`, run.ID); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(texts, ""); !strings.Contains(got, tc.want) {
				t.Errorf("narration = %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

// TestExecutor_ModelFailsMidSentenceTheBuiltinStartsANewAttempt: a model
// that breaks off mid-sentence is replaced by the built-in narrator in a
// new attempt, so the page's narration (what follows the last restart) is
// the built-in text alone, never "The model half…I'm looking…".
func TestExecutor_ModelFailsMidSentenceTheBuiltinStartsANewAttempt(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", "The model half ")
		// No [DONE]: the stream breaks off.
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t, payments.Faults{})
	e.executor(agent.Config{}, &agent.OpenAI{BaseURL: srv.URL + "/v1", Model: "m", APIKey: "sk-test", Timeout: time.Second})
	run := e.start(100)
	e.waitState(run.ID, store.StateAwaitingApproval)
	var restart int64
	if err := e.db.Get(&restart, `SELECT COALESCE(max(seq), 0) FROM run_events
        WHERE run_id = $1 AND type = 'step.attempt' AND (payload->>'attempt')::int > 1`, run.ID); err != nil {
		t.Fatal(err)
	}
	if restart == 0 {
		t.Fatal("no second attempt recorded after the model failed mid-sentence")
	}
	var shown []string
	if err := e.db.Select(&shown, `SELECT payload->>'text' FROM run_events
        WHERE run_id = $1 AND type = 'narration.delta' AND seq > $2 ORDER BY seq`, run.ID, restart); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(shown, "")
	if strings.Contains(got, "The model half") || !strings.HasPrefix(got, "I'm looking at order") {
		t.Errorf("narration after the restart = %q, want the built-in text alone", got)
	}
}
