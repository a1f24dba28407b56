package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/refundd/refundd/handlers"
)

// TestClientText_RefusedNamingTheField: NUL, invalid UTF-8, a JSON lone
// surrogate and control characters in any text a client sends (a reason
// by form and by API, a token's name, a search, a header) are a 422 that
// names the field, and nothing is stored: they used to be a 500, or
// quietly stored as U+FFFD.
func TestClientText_RefusedNamingTheField(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.awaitingApproval(t, "customer@example.com")
	page := "/runs/" + run.ID.String()
	approver, admin, support := a.client(t), a.client(t), a.client(t)
	a.login(t, approver, "approver@example.com")
	a.login(t, admin, "admin@example.com")
	a.login(t, support, "support@example.com")
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	jsonType := map[string]string{"Content-Type": "application/json"}
	customer := a.user(t, "customer@example.com")
	for _, tc := range []struct {
		name, field  string
		c            *http.Client
		method, path string
		hdr          map[string]string
		body         string
	}{
		{"NUL in a form reason", "reason", approver, http.MethodPost, page + "/cancel", form, "reason=a%00b"},
		{"%FF in a form reason", "reason", approver, http.MethodPost, page + "/approve", form, "reason=caf%FF"},
		{"ESC in a form reason", "reason", approver, http.MethodPost, page + "/approve", form, "reason=%1B%5B31mred"},
		{"NUL in an API reason", "reason", approver, http.MethodPost, "/api" + page + "/cancel", jsonType, `{"reason":"a\u0000b"}`},
		{"lone surrogate in an API reason", "reason", approver, http.MethodPost, "/api" + page + "/approve", jsonType, `{"reason":"a\ud800b"}`},
		{"invalid UTF-8 in an API reason", "reason", approver, http.MethodPost, "/api" + page + "/approve", jsonType, "{\"reason\":\"caf\xff\"}"},
		{"NUL in a token name", "name", admin, http.MethodPost, fmt.Sprintf("/admin/users/%d/tokens", customer.ID), form, "name=ci%00"},
		{"NUL in a search", "q", support, http.MethodGet, "/support/runs?q=a%00", nil, ""},
		{"control character in Idempotency-Key", "Idempotency-Key", approver, http.MethodPost, "/api/runs",
			map[string]string{"Content-Type": "application/json", "Idempotency-Key": "k\xff"}, `{"order_id":1,"amount":1,"reason":"x"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.send(t, tc.c, tc.method, tc.path, tc.hdr, tc.body)
			wantStatus(t, r, http.StatusUnprocessableEntity)
			if !strings.Contains(r.body, fmt.Sprintf("&#34;%s&#34;", tc.field)) && !strings.Contains(r.body, fmt.Sprintf(`\"%s\"`, tc.field)) {
				t.Errorf("the answer does not name the field %q:\n%s", tc.field, r.body)
			}
		})
	}
	t.Run("nothing was stored", func(t *testing.T) {
		if n := a.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type IN ('cancel.requested', 'approval.granted')`, run.ID); n != 0 {
			t.Errorf("%d decisions recorded, want none", n)
		}
		if n := a.count(t, `SELECT count(*) FROM api_tokens`); n != 0 {
			t.Errorf("%d tokens created, want none", n)
		}
	})
	t.Run("line breaks and tabs are text", func(t *testing.T) {
		r := a.send(t, approver, http.MethodPost, "/api"+page+"/approve", jsonType, `{"reason":"first line\nsecond\tline"}`)
		wantStatus(t, r, http.StatusOK)
	})
}

// TestQueryIntegers_OutsideTheirColumn: an integer query parameter that
// fits its column is read (before=2147483648 was a 500: the query
// compared it with an int4); one that fits no integer is 400.
func TestQueryIntegers_OutsideTheirColumn(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	support := a.client(t)
	a.login(t, support, "support@example.com")
	wantStatus(t, a.get(t, support, "/support/audit?before=2147483648"), http.StatusOK)
	wantStatus(t, a.get(t, support, "/support/audit?before=9223372036854775808"), http.StatusBadRequest)
	wantStatus(t, a.get(t, support, "/support/runs?page=99999999999999999999"), http.StatusBadRequest)
	wantStatus(t, a.get(t, support, "/support/runs?"+url.Values{"page": {"2"}}.Encode()), http.StatusOK)
}
