package handlers_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/refundd/refundd/handlers"
)

// wantRetryAfter checks a refusal says, in whole seconds within the
// minute the limit counts over, when to come back.
func wantRetryAfter(t *testing.T, r response) {
	t.Helper()
	secs, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || secs < 1 || secs > 60 {
		t.Errorf("Retry-After = %q, want 1 to 60 seconds", r.header.Get("Retry-After"))
	}
}

func TestStart_RateLimitedAPI(t *testing.T) {
	t.Parallel()
	const limit = 2
	a := newApp(t, handlers.Config{StartRatePerUser: limit})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	body := fmt.Sprintf(`{"order_id": %d, "amount": 1, "reason": "flood"}`, shoes.ID)
	for i := range limit {
		wantStatus(t, a.apiStart(t, c, fmt.Sprintf("k%d", i), body), http.StatusCreated)
	}

	r := a.apiStart(t, c, "over", body)
	e := wantAPIError(t, r, http.StatusTooManyRequests, "rate_limited")
	wantRetryAfter(t, r)
	if want := "You started 2 refunds in the last minute; try again in "; !strings.HasPrefix(e.Error.Message, want) {
		t.Errorf("message = %q, want it to start with %q", e.Error.Message, want)
	}
	if got := a.runsOf(t, "customer@example.com"); got != limit {
		t.Errorf("runs = %d, want %d", got, limit)
	}
	// A retry of a start that went through is answered, not refused.
	wantStatus(t, a.apiStart(t, c, "k0", body), http.StatusOK)
}

func TestStart_RateLimitedForm(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{StartRatePerUser: 1})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	wantStatus(t, a.post(t, c, "/runs", a.startForm(t, c, shoes.ID, "1.00", "First.")), http.StatusSeeOther)

	r := a.post(t, c, "/runs", a.startForm(t, c, shoes.ID, "2.00", "Second."))
	wantStatus(t, r, http.StatusTooManyRequests)
	wantRetryAfter(t, r)
	doc := r.doc(t)
	if got, want := doc.Find("#start-error").Text(), "You started 1 refund in the last minute; try again in "; !strings.Contains(got, want) {
		t.Errorf("#start-error = %q, want it to say %q", got, want)
	}
	if got, _ := doc.Find(`#start-form input[name="amount_` + itoa(shoes.ID) + `"]`).Attr("value"); got != "2.00" {
		t.Errorf("amount = %q, want what was typed (2.00)", got)
	}
	if got := a.runsOf(t, "customer@example.com"); got != 1 {
		t.Errorf("runs = %d, want 1", got)
	}
}
