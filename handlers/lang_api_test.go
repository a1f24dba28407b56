package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// TestLanguage_APIFinalMessageFollowsAcceptLanguage: a finished run's
// final_message, a human field, is in the language the request asks for
// (the answer was written in every language when the run ended), English
// without; its machine fields stay the same.
func TestLanguage_APIFinalMessageFollowsAcceptLanguage(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.startRun(t, "customer@example.com", 1000)
	answer := views.Answers{}.Canceled(false)
	if _, err := a.store.FinishRun(context.Background(), run.ID, store.StateCanceled, answer); err != nil {
		t.Fatal(err)
	}
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	for _, tc := range []struct{ accept, want string }{
		{"", answer.Body},
		{"zh-CN,zh;q=0.9", answer.Text("zh-CN")},
		{"fr", answer.Body},
	} {
		h := map[string]string{}
		if tc.accept != "" {
			h["Accept-Language"] = tc.accept
		}
		r := a.send(t, c, http.MethodGet, "/api/runs/"+run.ID.String(), h, "")
		wantStatus(t, r, http.StatusOK)
		var got struct {
			Run          struct{ State string } `json:"run"`
			FinalMessage string                 `json:"final_message"`
		}
		if err := json.Unmarshal([]byte(r.body), &got); err != nil {
			t.Fatal(err)
		}
		if got.FinalMessage != tc.want || got.Run.State != store.StateCanceled {
			t.Errorf("Accept-Language %q: final_message %q, state %q; want %q, canceled", tc.accept, got.FinalMessage, got.Run.State, tc.want)
		}
	}
	if answer.Text("zh-CN") == answer.Body {
		t.Fatal("the answer has no Chinese")
	}
}
