package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

// apiStart posts a start to the JSON API; key "" sends no Idempotency-Key.
func (a *app) apiStart(t *testing.T, c *http.Client, key, body string) response {
	t.Helper()
	hdr := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		hdr["Idempotency-Key"] = key
	}
	return a.send(t, c, http.MethodPost, "/api/runs", hdr, body)
}

func decode[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatalf("body is not the JSON expected: %v\n%s", err, r.body)
	}
	return v
}

type apiErr struct {
	Error struct{ Code, Message, State string }
}

// wantAPIError checks an API error's status and code.
func wantAPIError(t *testing.T, r response, status int, code string) apiErr {
	t.Helper()
	wantStatus(t, r, status)
	e := decode[apiErr](t, r)
	if e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("error = %+v, want code %q and a message", e.Error, code)
	}
	return e
}

type runJSON struct {
	ID        uuid.UUID `json:"id"`
	State     string    `json:"state"`
	OrderID   int64     `json:"order_id"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	Reason    string    `json:"reason"`
	CreatedAt string    `json:"created_at"`
}

func startBody(orderID, amount int64, reason string) string {
	return fmt.Sprintf(`{"order_id":%d,"amount":%d,"reason":%q}`, orderID, amount, reason)
}

func TestAPI_RequiresSession(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	for _, r := range []response{
		a.get(t, c, "/api/orders"),
		a.apiStart(t, c, "k", startBody(1, 100, "x")),
		a.get(t, c, "/api/runs/"+uuid.NewString()),
	} {
		wantAPIError(t, r, http.StatusUnauthorized, "unauthorized")
	}
}

func TestAPIOrders(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.startRun(t, "customer2@example.com", 1000) // reserves $10.00 of one order
	c := a.client(t)
	a.login(t, c, "customer2@example.com")

	r := a.get(t, c, "/api/orders")
	wantStatus(t, r, http.StatusOK)
	type order struct {
		ID          int64
		Amount      int64
		Currency    string
		Refundable  int64
		Description string
	}
	got := map[int64]order{}
	for _, o := range decode[[]order](t, r) {
		got[o.ID] = o
	}
	if len(got) != 2 {
		t.Fatalf("orders = %v, want customer2's two orders", got)
	}
	for _, want := range []store.Order{
		a.order(t, "customer2@example.com", "Espresso machine"),
		a.order(t, "customer2@example.com", "Coffee beans, 1 kg"),
	} {
		refundable := want.Amount
		if want.ID == run.OrderID {
			refundable -= 1000
		}
		o := got[want.ID]
		if o.Amount != want.Amount || o.Currency != "USD" || o.Description != want.Description || o.Refundable != refundable {
			t.Errorf("order %d = %+v, want amount %d, refundable %d", want.ID, o, want.Amount, refundable)
		}
	}
}

func TestAPIStart(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	body := startBody(shoes.ID, 1250, "Sole came off")

	r := a.apiStart(t, c, "key-1", body)
	wantStatus(t, r, http.StatusCreated)
	run := decode[runJSON](t, r)
	if run.ID == uuid.Nil || run.State != store.StateCreated || run.OrderID != shoes.ID || run.Amount != 1250 ||
		run.Currency != "EUR" || run.Reason != "Sole came off" || run.CreatedAt == "" {
		t.Errorf("run = %+v", run)
	}
	if loc := r.header.Get("Location"); loc != "/api/runs/"+run.ID.String() {
		t.Errorf("Location = %q", loc)
	}

	again := a.apiStart(t, c, "key-1", body)
	wantStatus(t, again, http.StatusOK)
	if got := decode[runJSON](t, again).ID; got != run.ID {
		t.Errorf("same key: run %s, want %s", got, run.ID)
	}
	if n := a.runsOf(t, "customer@example.com"); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}
}

// TestAPIStart_ConcurrentSameKey: a client that retries in parallel with
// one key gets one run; exactly one answer says it was created.
func TestAPIStart_ConcurrentSameKey(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	body := startBody(a.order(t, "customer@example.com", "Rain jacket").ID, 8950, "Leaks")

	const n = 20
	type answer struct {
		status int
		id     uuid.UUID
		err    error
	}
	answers := make(chan answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/api/runs", strings.NewReader(body))
			req.Header.Set("Idempotency-Key", "same-key")
			req.Header.Set("Content-Type", "application/json")
			res, err := c.Do(req)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			defer res.Body.Close()
			var run runJSON
			err = json.NewDecoder(res.Body).Decode(&run)
			answers <- answer{status: res.StatusCode, id: run.ID, err: err}
		})
	}
	close(start)
	wg.Wait()
	close(answers)

	statuses := map[int]int{}
	ids := map[uuid.UUID]bool{}
	for ans := range answers {
		if ans.err != nil {
			t.Fatal(ans.err)
		}
		statuses[ans.status]++
		ids[ans.id] = true
	}
	if statuses[http.StatusCreated] != 1 || statuses[http.StatusOK] != n-1 {
		t.Errorf("statuses = %v, want one 201 and %d 200", statuses, n-1)
	}
	if len(ids) != 1 {
		t.Errorf("answers name %d runs, want 1", len(ids))
	}
	if got := a.runsOf(t, "customer@example.com"); got != 1 {
		t.Errorf("runs = %d, want 1", got)
	}
	if got := a.count(t, `SELECT count(*) FROM run_events WHERE type = 'run.created'`); got != 1 {
		t.Errorf("run.created events = %d, want 1", got)
	}
}

// TestAPIStart_IdempotencyConflict: the same key with other parameters is
// a 422 that names the problem, never a second run.
func TestAPIStart_IdempotencyConflict(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	wantStatus(t, a.apiStart(t, c, "k", startBody(shoes.ID, 1000, "x")), http.StatusCreated)

	for name, body := range map[string]string{
		"other amount": startBody(shoes.ID, 1001, "x"),
		"other reason": startBody(shoes.ID, 1000, "y"),
		"other order":  startBody(a.order(t, "customer@example.com", "Rain jacket").ID, 1000, "x"),
	} {
		t.Run(name, func(t *testing.T) {
			wantAPIError(t, a.apiStart(t, c, "k", body), http.StatusUnprocessableEntity, store.CodeIdempotencyConflict)
		})
	}
	if n := a.runsOf(t, "customer@example.com"); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}
}

func TestAPIStart_MissingIdempotencyKey(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	body := startBody(a.order(t, "customer@example.com", "Trail running shoes").ID, 1000, "x")
	wantAPIError(t, a.apiStart(t, c, "", body), http.StatusBadRequest, "missing_idempotency_key")
	wantAPIError(t, a.apiStart(t, c, "   ", body), http.StatusBadRequest, "missing_idempotency_key")
	if n := a.runsOf(t, "customer@example.com"); n != 0 {
		t.Errorf("runs = %d, want none", n)
	}
}

// TestAPIStart_BadJSON: a body that cannot be read is a 400 that says
// what is wrong; nothing is started.
func TestAPIStart_BadJSON(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	id := a.order(t, "customer@example.com", "Trail running shoes").ID
	for _, tc := range []struct{ name, body, says string }{
		{"empty", "", "empty"},
		{"not JSON", "order_id=1&amount=100", "not a valid JSON"},
		{"truncated", `{"order_id":1,`, "not a valid JSON"},
		{"array", `[1,2]`, "not a valid JSON"},
		{"amount as major units", fmt.Sprintf(`{"order_id":%d,"amount":12.50,"reason":"x"}`, id), "amount"},
		{"amount as a string", fmt.Sprintf(`{"order_id":%d,"amount":"1250","reason":"x"}`, id), "amount"},
		{"order as a string", `{"order_id":"1","amount":1250,"reason":"x"}`, "order_id"},
		{"reason as a number", fmt.Sprintf(`{"order_id":%d,"amount":1250,"reason":5}`, id), "reason"},
		{"misspelt field", fmt.Sprintf(`{"order_id":%d,"ammount":1250,"reason":"x"}`, id), "ammount"},
		{"two objects", startBody(id, 100, "x") + startBody(id, 100, "x"), "more than one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wantAPIError(t, a.apiStart(t, c, "key-"+tc.name, tc.body), http.StatusBadRequest, "invalid_json")
			if !strings.Contains(e.Error.Message, tc.says) {
				t.Errorf("message = %q, want it to mention %q", e.Error.Message, tc.says)
			}
		})
	}
	if n := a.runsOf(t, "customer@example.com"); n != 0 {
		t.Errorf("runs = %d, want none", n)
	}
}

// TestAPIStart_Invalid: well-formed requests the store refuses are 422 with
// the code invalid.
func TestAPIStart_Invalid(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	for _, tc := range []struct{ name, body, says string }{
		{"zero amount", startBody(shoes.ID, 0, "x"), "more than zero"},
		{"negative amount", startBody(shoes.ID, -5, "x"), "more than zero"},
		{"above refundable", startBody(shoes.ID, shoes.Amount+1, "x"), "still refundable"},
		{"no reason", startBody(shoes.ID, 100, " "), "why"},
		{"no order", `{"amount":100,"reason":"x"}`, "choose an order"},
		{"someone else's order", startBody(a.order(t, "customer2@example.com", "Espresso machine").ID, 100, "x"), "no order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wantAPIError(t, a.apiStart(t, c, "key-"+tc.name, tc.body), http.StatusUnprocessableEntity, store.CodeInvalid)
			if !strings.Contains(e.Error.Message, tc.says) {
				t.Errorf("message = %q, want it to say %q", e.Error.Message, tc.says)
			}
		})
	}
	if n := a.count(t, `SELECT count(*) FROM runs`); n != 0 {
		t.Errorf("runs = %d, want none", n)
	}
}

func TestAPIStart_WithoutRefundAccess(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "approver@example.com")
	wantAPIError(t, a.apiStart(t, c, "k", startBody(1, 100, "x")), http.StatusForbidden, store.CodeForbidden)
}

type snapshotJSON struct {
	Access string `json:"access"`
	Run    struct {
		ID     uuid.UUID `json:"id"`
		State  string    `json:"state"`
		Amount int64     `json:"amount"`
	} `json:"run"`
	CoveringSeq *int64 `json:"covering_seq"`
	ReplayFloor *int64 `json:"replay_floor"`
	Operations  []struct {
		ID          uuid.UUID `json:"id"`
		State       string    `json:"state"`
		Amount      int64     `json:"amount"`
		Currency    string    `json:"currency"`
		ProviderRef *string   `json:"provider_ref"`
	} `json:"operations"`
	FinalMessage *string `json:"final_message"`
}

func TestAPIShowRun(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	ctx := context.Background()
	run := a.startRun(t, "customer@example.com", 1500)
	if _, err := a.store.RequestApproval(ctx, run.ID, proposalFor(run)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.Approve(ctx, run.ID, a.user(t, "approver@example.com").ID, ""); err != nil {
		t.Fatal(err)
	}
	op, err := a.store.SubmitOperation(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpSucceeded, ProviderRef: "re_123"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.FinishRun(ctx, run.ID, store.StateCompleted, store.Say("Refunded €15.00.")); err != nil {
		t.Fatal(err)
	}
	var lastSeq int64
	if err := a.db.QueryRow(`SELECT last_seq FROM runs WHERE id = $1`, run.ID).Scan(&lastSeq); err != nil {
		t.Fatal(err)
	}

	for _, email := range []string{"customer@example.com", "approver@example.com", "support@example.com"} {
		t.Run(email, func(t *testing.T) {
			c := a.client(t)
			a.login(t, c, email)
			r := a.get(t, c, "/api/runs/"+run.ID.String())
			wantStatus(t, r, http.StatusOK)
			s := decode[snapshotJSON](t, r)
			if s.Access != "full" || s.Run.ID != run.ID || s.Run.State != store.StateCompleted || s.Run.Amount != 1500 {
				t.Errorf("run = %+v (access %q)", s.Run, s.Access)
			}
			if s.CoveringSeq == nil || *s.CoveringSeq != lastSeq || s.ReplayFloor == nil {
				t.Errorf("covering_seq = %v, want %d; replay_floor = %v", s.CoveringSeq, lastSeq, s.ReplayFloor)
			}
			if len(s.Operations) != 1 || s.Operations[0].ID != op.ID || s.Operations[0].State != store.OpSucceeded ||
				s.Operations[0].Amount != 1500 || s.Operations[0].Currency != "EUR" ||
				s.Operations[0].ProviderRef == nil || *s.Operations[0].ProviderRef != "re_123" {
				t.Errorf("operations = %+v", s.Operations)
			}
			if s.FinalMessage == nil || *s.FinalMessage != "Refunded €15.00." {
				t.Errorf("final_message = %v", s.FinalMessage)
			}
		})
	}

	t.Run("fresh run", func(t *testing.T) {
		fresh := a.startRun(t, "customer@example.com", 50)
		c := a.client(t)
		a.login(t, c, "customer@example.com")
		r := a.get(t, c, "/api/runs/"+fresh.ID.String())
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `"operations":[]`) || !strings.Contains(r.body, `"final_message":null`) {
			t.Errorf("a fresh run's snapshot = %s, want empty operations and a null final_message", r.body)
		}
	})
}

// TestAPIShowRun_StatusOnly: a customer whose refund_access was revoked
// still learns the state and outcome of their run, nothing of its ledger.
func TestAPIShowRun_StatusOnly(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.startRun(t, "customer@example.com", 100)
	if err := a.store.SetGrant(context.Background(), run.OwnerID, store.GrantRefundAccess, false); err != nil {
		t.Fatal(err)
	}
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	r := a.get(t, c, "/api/runs/"+run.ID.String())
	wantStatus(t, r, http.StatusOK)
	s := decode[snapshotJSON](t, r)
	if s.Access != "status" || s.Run.ID != run.ID || s.Run.State != store.StateCreated {
		t.Errorf("snapshot = %+v, want the run's state with access status", s)
	}
	if strings.Contains(r.body, "operations") || strings.Contains(r.body, "reason") || s.CoveringSeq != nil {
		t.Errorf("status-only snapshot shows more than state and outcome: %s", r.body)
	}
}

// TestAPIShowRun_OtherUsersRun: another customer's run does not exist for
// you, whatever you do with it: 404, in the API and on the HTML routes.
func TestAPIShowRun_OtherUsersRun(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.startRun(t, "customer@example.com", 100)
	c := a.client(t)
	a.login(t, c, "customer2@example.com")

	wantAPIError(t, a.get(t, c, "/api/runs/"+run.ID.String()), http.StatusNotFound, store.CodeNotFound)
	wantAPIError(t, a.get(t, c, "/api/runs/"+uuid.NewString()), http.StatusNotFound, store.CodeNotFound)
	wantAPIError(t, a.get(t, c, "/api/runs/not-a-uuid"), http.StatusNotFound, store.CodeNotFound)
	for _, action := range []string{"approve", "cancel"} {
		wantAPIError(t, a.send(t, c, http.MethodPost, "/api/runs/"+run.ID.String()+"/"+action, nil, ""), http.StatusNotFound, store.CodeNotFound)
		page := a.post(t, c, "/runs/"+run.ID.String()+"/"+action, nil)
		wantStatus(t, page, http.StatusNotFound)
		if got := page.doc(t).Find("h1").Text(); got != "Not found" {
			t.Errorf("POST %s: h1 = %q, want Not found", action, got)
		}
	}
	if n := a.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'cancel.requested'`, run.ID); n != 0 {
		t.Errorf("cancel.requested events = %d, want none", n)
	}
}
