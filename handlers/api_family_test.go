package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

// familyJSON is POST /api/runs' answer to a family start: the parent with
// its children.
type familyJSON struct {
	ID            uuid.UUID  `json:"id"`
	State         string     `json:"state"`
	Kind          string     `json:"kind"`
	ParentRunID   *uuid.UUID `json:"parent_run_id"`
	CorrelationID uuid.UUID  `json:"correlation_id"`
	OrderID       int64      `json:"order_id"`
	Amount        int64      `json:"amount"`
	Currency      string     `json:"currency"`
	Children      []struct {
		ID            uuid.UUID  `json:"id"`
		Kind          string     `json:"kind"`
		ParentRunID   *uuid.UUID `json:"parent_run_id"`
		CorrelationID uuid.UUID  `json:"correlation_id"`
		OrderID       int64      `json:"order_id"`
		Amount        int64      `json:"amount"`
		CoveringSeq   *int64     `json:"covering_seq"`
	} `json:"children"`
}

// ids are the parent's ID and its children's, in family order.
func (f familyJSON) ids() []uuid.UUID {
	out := []uuid.UUID{f.ID}
	for _, c := range f.Children {
		out = append(out, c.ID)
	}
	return out
}

// refundsBody is a family start's body: one refund per order, amounts in
// minor units.
func refundsBody(reason string, orders []int64, amounts []int64) string {
	items := make([]string, len(orders))
	for i := range orders {
		items[i] = fmt.Sprintf(`{"order_id":%d,"amount":%d}`, orders[i], amounts[i])
	}
	return fmt.Sprintf(`{"refunds":[%s],"reason":%q}`, strings.Join(items, ","), reason)
}

// threeOrders are the demo customer's three orders (EUR), in the order the
// family names them, with the amounts asked of each.
func (a *app) threeOrders(t *testing.T) (orders, amounts []int64) {
	t.Helper()
	for _, d := range []string{"Trail running shoes", "Rain jacket", "Water bottle"} {
		orders = append(orders, a.order(t, "customer@example.com", d).ID)
	}
	return orders, []int64{300, 200, 100}
}

// TestAPIStartFamily: a refunds body starts a parent and a child per order
// (201); the same key answers 200 with the same family; another body under
// that key is 422 and changes nothing.
func TestAPIStartFamily(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	orders, amounts := a.threeOrders(t)
	body := refundsBody("late delivery", orders, amounts)

	r := a.apiStart(t, c, "fam-1", body)
	wantStatus(t, r, http.StatusCreated)
	fam := decode[familyJSON](t, r)
	if fam.Kind != "request" || fam.ParentRunID != nil || fam.CorrelationID != fam.ID || fam.OrderID != 0 ||
		fam.Amount != 600 || fam.Currency != "EUR" || fam.State != store.StateCreated {
		t.Errorf("parent = %+v, want a request of €6.00, its own root, with no order", fam)
	}
	if loc := r.header.Get("Location"); loc != "/api/runs/"+fam.ID.String() {
		t.Errorf("Location = %q, want the parent's", loc)
	}
	if len(fam.Children) != 3 {
		t.Fatalf("children = %d, want 3", len(fam.Children))
	}
	for i, ch := range fam.Children {
		if ch.Kind != "refund" || ch.ParentRunID == nil || *ch.ParentRunID != fam.ID || ch.CorrelationID != fam.ID ||
			ch.OrderID != orders[i] || ch.Amount != amounts[i] || ch.CoveringSeq == nil || *ch.CoveringSeq != 1 {
			t.Errorf("child %d = %+v, want order %d, %d cents, under parent %s", i+1, ch, orders[i], amounts[i], fam.ID)
		}
	}

	again := a.apiStart(t, c, "fam-1", body)
	wantStatus(t, again, http.StatusOK)
	if got := decode[familyJSON](t, again).ids(); fmt.Sprint(got) != fmt.Sprint(fam.ids()) {
		t.Errorf("repeat answered family %v, want %v", got, fam.ids())
	}

	changed := map[string]string{
		"other amount":    refundsBody("late delivery", orders, []int64{300, 200, 101}),
		"fewer orders":    refundsBody("late delivery", orders[:2], amounts[:2]),
		"other order":     refundsBody("late delivery", []int64{orders[1], orders[0], orders[2]}, amounts),
		"other reason":    refundsBody("changed my mind", orders, amounts),
		"one order alone": startBody(orders[0], 300, "late delivery"),
	}
	for name, other := range changed {
		t.Run(name, func(t *testing.T) {
			e := wantAPIError(t, a.apiStart(t, c, "fam-1", other), http.StatusUnprocessableEntity, store.CodeIdempotencyConflict)
			if !strings.Contains(e.Error.Message, "already used") {
				t.Errorf("message = %q, want it to say the key was already used", e.Error.Message)
			}
		})
	}
	if n := a.runsOf(t, "customer@example.com"); n != 4 {
		t.Errorf("runs = %d, want 4 (a parent and three children)", n)
	}
	if n := a.count(t, `SELECT count(*) FROM run_events WHERE type = 'child.started'`); n != 3 {
		t.Errorf("child.started events = %d, want 3", n)
	}
}

// TestAPIStartFamily_ConcurrentSameKey: a client retrying a family start in
// parallel with one key gets one family; exactly one answer is a 201.
func TestAPIStartFamily_ConcurrentSameKey(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	orders, amounts := a.threeOrders(t)
	body := refundsBody("late delivery", orders, amounts)

	const n = 12
	statuses := make([]int, n)
	families := make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			req, err := http.NewRequest(http.MethodPost, a.srv.URL+"/api/runs", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Idempotency-Key", "same-family")
			req.Header.Set("Content-Type", "application/json")
			res, err := c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil {
				t.Error(err)
			}
			var fam familyJSON
			if err := json.Unmarshal(body, &fam); err != nil {
				t.Error(err)
			}
			if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
				t.Logf("start %d answered %d: %s", i, res.StatusCode, body)
			}
			statuses[i], families[i] = res.StatusCode, fmt.Sprint(fam.ids())
		})
	}
	close(start)
	wg.Wait()

	count := map[int]int{}
	distinct := map[string]bool{}
	for i := range n {
		count[statuses[i]]++
		distinct[families[i]] = true
	}
	if count[http.StatusCreated] != 1 || count[http.StatusOK] != n-1 {
		t.Errorf("statuses = %v, want one 201 and %d 200", count, n-1)
	}
	if len(distinct) != 1 {
		t.Errorf("answers name %d families, want 1: %v", len(distinct), distinct)
	}
	if got := a.runsOf(t, "customer@example.com"); got != 4 {
		t.Errorf("runs = %d, want 4", got)
	}
	if got := a.count(t, `SELECT count(*) FROM run_events WHERE type = 'run.created'`); got != 4 {
		t.Errorf("run.created events = %d, want 4 (one per run)", got)
	}
}

// TestAPIStartFamily_Refused: bodies that cannot be a family are refused
// in words, and nothing is started.
func TestAPIStartFamily_Refused(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{MaxFamilySize: 2})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	orders, amounts := a.threeOrders(t)
	mug, err := a.store.CreateOrder(context.Background(), a.user(t, "customer@example.com").ID, "Mug", 1500, "USD")
	if err != nil {
		t.Fatal(err)
	}
	two := refundsBody("x", orders[:2], amounts[:2])
	for _, tc := range []struct {
		name, body string
		status     int
		code, says string
	}{
		{"order_id and refunds", strings.Replace(two, `{"refunds"`, fmt.Sprintf(`{"order_id":%d,"amount":100,"refunds"`, orders[2]), 1),
			http.StatusBadRequest, "invalid_json", "not both"},
		{"unknown field", strings.Replace(two, `"reason"`, `"reasons"`, 1), http.StatusBadRequest, "invalid_json", `unknown field "reasons"`},
		{"unknown field in a refund", strings.Replace(two, `"amount":200`, `"amount":200,"sku":7`, 1), http.StatusBadRequest, "invalid_json", "sku"},
		{"field in capitals", strings.Replace(two, `"refunds"`, `"Refunds"`, 1), http.StatusBadRequest, "invalid_json", `did you mean "refunds"`},
		{"amount as a string", strings.Replace(two, `"amount":200`, `"amount":"200"`, 1), http.StatusBadRequest, "invalid_json", "amount"},
		{"too many refunds", refundsBody("x", orders, amounts), http.StatusUnprocessableEntity, store.CodeInvalid, "at most 2 orders; this one names 3"},
		{"no refunds", `{"refunds":[],"reason":"x"}`, http.StatusUnprocessableEntity, store.CodeInvalid, "at least one order"},
		{"one order twice", refundsBody("x", []int64{orders[0], orders[0]}, []int64{1, 2}), http.StatusUnprocessableEntity, store.CodeInvalid, "named twice"},
		{"mixed currencies", refundsBody("x", []int64{orders[0], mug.ID}, []int64{100, 100}), http.StatusUnprocessableEntity, store.CodeInvalid,
			"different currencies (EUR, USD)"},
		{"more than refundable", refundsBody("x", orders[:2], []int64{100, 8951}), http.StatusUnprocessableEntity, store.CodeInvalid,
			fmt.Sprintf("order %d is more than what is still refundable", orders[1])},
		{"someone else's order", refundsBody("x", []int64{orders[0], a.order(t, "customer2@example.com", "Espresso machine").ID}, []int64{1, 1}),
			http.StatusUnprocessableEntity, store.CodeInvalid, "no order"},
		{"zero amount", refundsBody("x", orders[:2], []int64{100, 0}), http.StatusUnprocessableEntity, store.CodeInvalid, "refund 2: "},
		{"no reason", refundsBody(" ", orders[:2], amounts[:2]), http.StatusUnprocessableEntity, store.CodeInvalid, "why"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wantAPIError(t, a.apiStart(t, c, "key-"+tc.name, tc.body), tc.status, tc.code)
			if !strings.Contains(e.Error.Message, tc.says) {
				t.Errorf("message = %q, want it to say %q", e.Error.Message, tc.says)
			}
		})
	}
	if n := a.count(t, `SELECT count(*) FROM runs`); n != 0 {
		t.Errorf("runs = %d, want none", n)
	}
}

// TestAPIStartFamily_DefaultMaxSize: without MAX_FAMILY_SIZE a request may
// name at most DefaultMaxFamilySize orders, and is told so.
func TestAPIStartFamily_DefaultMaxSize(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	n := handlers.DefaultMaxFamilySize + 1
	orders, amounts := make([]int64, n), make([]int64, n)
	for i := range n {
		orders[i], amounts[i] = int64(i+1), 1
	}
	e := wantAPIError(t, a.apiStart(t, c, "too-many", refundsBody("x", orders, amounts)), http.StatusUnprocessableEntity, store.CodeInvalid)
	if want := fmt.Sprintf("at most %d orders; this one names %d", n-1, n); !strings.Contains(e.Error.Message, want) {
		t.Errorf("message = %q, want it to say %q", e.Error.Message, want)
	}
}

// TestAPIStart_SingleOrderUnchangedByFamilies: the one-order body answers
// as it always did, a root of its own family, with no children listed.
func TestAPIStart_SingleOrderUnchangedByFamilies(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	r := a.apiStart(t, c, "single", startBody(shoes.ID, 1250, "Sole came off"))
	wantStatus(t, r, http.StatusCreated)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.body), &raw); err != nil {
		t.Fatal(err)
	}
	run := decode[familyJSON](t, r)
	if _, ok := raw["children"]; ok {
		t.Errorf("a single run's answer lists children: %s", r.body)
	}
	if run.Kind != "refund" || string(raw["parent_run_id"]) != "null" || run.CorrelationID != run.ID || run.OrderID != shoes.ID {
		t.Errorf("run = %s, want a refund run, root of its own family", r.body)
	}
	snap := a.get(t, c, "/api/runs/"+run.ID.String())
	wantStatus(t, snap, http.StatusOK)
	if strings.Contains(snap.body, `"children"`) {
		t.Errorf("a single run's snapshot lists children: %s", snap.body)
	}
}

// eventsOf reads a run's whole log through GET /api/runs/{id}/events.
func (a *app) eventsOf(t *testing.T, c *http.Client, id uuid.UUID) []map[string]json.RawMessage {
	t.Helper()
	r := a.get(t, c, "/api/runs/"+id.String()+"/events?after=0&limit=500")
	wantStatus(t, r, http.StatusOK)
	page := decode[struct {
		More   bool                         `json:"more"`
		Events []map[string]json.RawMessage `json:"events"`
	}](t, r)
	if page.More {
		t.Fatalf("run %s has more than a page of events", id)
	}
	return page.Events
}

// TestAPIFamily_EventsCarryTheFamily: every event of the parent and of
// each child, as GET /api/runs/{id}/events shows it, names its parent (null
// for the root) and the root's ID as its correlation ID; the parent's log
// has child.started per child and child.finished per ended child, with
// what the child refunded.
func TestAPIFamily_EventsCarryTheFamily(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	orders, amounts := a.threeOrders(t)
	r := a.apiStart(t, c, "fam", refundsBody("late delivery", orders, amounts))
	wantStatus(t, r, http.StatusCreated)
	fam := decode[familyJSON](t, r)
	a.refundChild(t, fam.Children[0].ID, true)
	a.refundChild(t, fam.Children[1].ID, false)

	root := `"` + fam.ID.String() + `"`
	for i, id := range fam.ids() {
		wantParent := root
		if i == 0 {
			wantParent = "null"
		}
		evs := a.eventsOf(t, c, id)
		if len(evs) == 0 {
			t.Fatalf("run %d has no events", i)
		}
		for _, ev := range evs {
			if got := string(ev["parent_run_id"]); got != wantParent {
				t.Errorf("run %d, event %s %s: parent_run_id = %s, want %s", i, ev["seq"], ev["type"], got, wantParent)
			}
			if got := string(ev["correlation_id"]); got != root {
				t.Errorf("run %d, event %s %s: correlation_id = %s, want the root's %s", i, ev["seq"], ev["type"], got, root)
			}
		}
	}

	var started, finished []string
	var refunded int64
	for _, ev := range a.eventsOf(t, c, fam.ID) {
		var p struct {
			ChildRunID uuid.UUID `json:"child_run_id"`
			State      string    `json:"state"`
			Refunded   int64     `json:"refunded"`
		}
		if err := json.Unmarshal(ev["payload"], &p); err != nil {
			t.Fatal(err)
		}
		switch string(ev["type"]) {
		case `"child.started"`:
			started = append(started, p.ChildRunID.String())
		case `"child.finished"`:
			finished = append(finished, p.ChildRunID.String()+" "+p.State)
			refunded += p.Refunded
		}
	}
	if want := fmt.Sprint(fam.ids()[1:]); fmt.Sprint(started) != want {
		t.Errorf("child.started for %v, want %v", started, want)
	}
	if want := fmt.Sprintf("[%s completed %s failed]", fam.Children[0].ID, fam.Children[1].ID); fmt.Sprint(finished) != want {
		t.Errorf("child.finished for %v, want %s", finished, want)
	}
	if refunded != amounts[0] {
		t.Errorf("child.finished says %d refunded, want %d (the one succeeded refund)", refunded, amounts[0])
	}
}

// refundChild walks a child to its end through the store, as a worker
// does: a refund the provider confirms (completed) or declines (failed).
func (a *app) refundChild(t *testing.T, id uuid.UUID, succeed bool) {
	t.Helper()
	ctx := context.Background()
	op, err := a.store.SubmitOperation(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	out, state, msg := store.Outcome{State: store.OpSucceeded, ProviderRef: "re_" + id.String()[:8]}, store.StateCompleted, "Refunded."
	if !succeed {
		out, state, msg = store.Outcome{State: store.OpFailed, Reason: "declined"}, store.StateFailed, "Declined."
	}
	if _, err := a.store.RecordOutcome(ctx, op.ID, out); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.FinishRun(ctx, id, state, store.Say(msg)); err != nil {
		t.Fatal(err)
	}
}

// familySnapshotJSON is GET /api/runs/{parent}.
type familySnapshotJSON struct {
	Run struct {
		ID    uuid.UUID `json:"id"`
		State string    `json:"state"`
	} `json:"run"`
	CoveringSeq int64 `json:"covering_seq"`
	Children    []struct {
		// What names the child, beside its run (DESIGN.md's interface).
		ID      uuid.UUID `json:"id"`
		State   string    `json:"state"`
		OrderID int64     `json:"order_id"`
		Amount  int64     `json:"amount"`
		Run     struct {
			ID          uuid.UUID  `json:"id"`
			State       string     `json:"state"`
			ParentRunID *uuid.UUID `json:"parent_run_id"`
			OrderID     int64      `json:"order_id"`
			Amount      int64      `json:"amount"`
		} `json:"run"`
		CoveringSeq int64 `json:"covering_seq"`
		Operations  []struct {
			State  string `json:"state"`
			Amount int64  `json:"amount"`
		} `json:"operations"`
		FinalMessage *string `json:"final_message"`
	} `json:"children"`
}

// TestAPIFamily_SnapshotHoldsEveryChild: the parent's snapshot lists each
// child with its state, operations and a covering seq equal to the last
// seq of its own log, before, while and after the children end.
func TestAPIFamily_SnapshotHoldsEveryChild(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	orders, amounts := a.threeOrders(t)
	r := a.apiStart(t, c, "fam", refundsBody("late delivery", orders, amounts))
	wantStatus(t, r, http.StatusCreated)
	fam := decode[familyJSON](t, r)

	check := func(t *testing.T, parentState string, childStates ...string) {
		t.Helper()
		s := a.get(t, c, "/api/runs/"+fam.ID.String())
		wantStatus(t, s, http.StatusOK)
		snap := decode[familySnapshotJSON](t, s)
		if snap.Run.ID != fam.ID || snap.Run.State != parentState {
			t.Errorf("parent %s is %s, want %s", snap.Run.ID, snap.Run.State, parentState)
		}
		if last := lastSeq(t, a.eventsOf(t, c, fam.ID)); snap.CoveringSeq != last {
			t.Errorf("parent covering_seq = %d, want its last seq %d", snap.CoveringSeq, last)
		}
		if len(snap.Children) != len(childStates) {
			t.Fatalf("snapshot lists %d children, want %d", len(snap.Children), len(childStates))
		}
		for i, ch := range snap.Children {
			if ch.Run.ID != fam.Children[i].ID || ch.Run.ParentRunID == nil || *ch.Run.ParentRunID != fam.ID ||
				ch.Run.OrderID != orders[i] || ch.Run.Amount != amounts[i] || ch.Run.State != childStates[i] {
				t.Errorf("child %d = %+v, want %s of order %d in state %s", i+1, ch.Run, fam.Children[i].ID, orders[i], childStates[i])
			}
			if ch.ID != ch.Run.ID || ch.State != ch.Run.State || ch.OrderID != orders[i] || ch.Amount != amounts[i] {
				t.Errorf("child %d is named %s %s order %d amount %d beside its run %+v", i+1, ch.ID, ch.State, ch.OrderID, ch.Amount, ch.Run)
			}
			if last := lastSeq(t, a.eventsOf(t, c, ch.Run.ID)); ch.CoveringSeq != last {
				t.Errorf("child %d covering_seq = %d, want its last seq %d", i+1, ch.CoveringSeq, last)
			}
			if ended := store.Terminal(ch.Run.State); ended != (ch.FinalMessage != nil) || ended != (len(ch.Operations) == 1) {
				t.Errorf("child %d is %s with operations %+v and final message %v", i+1, ch.Run.State, ch.Operations, ch.FinalMessage)
			}
		}
	}
	t.Run("started", func(t *testing.T) { check(t, store.StateCreated, "created", "created", "created") })
	a.refundChild(t, fam.Children[1].ID, true)
	t.Run("one ended", func(t *testing.T) { check(t, store.StateCreated, "created", "completed", "created") })
	a.refundChild(t, fam.Children[0].ID, false)
	a.refundChild(t, fam.Children[2].ID, true)
	t.Run("all ended", func(t *testing.T) { check(t, store.StateCompleted, "failed", "completed", "completed") })
}

// lastSeq is the seq of a log's last event.
func lastSeq(t *testing.T, evs []map[string]json.RawMessage) int64 {
	t.Helper()
	var seq int64
	if err := json.Unmarshal(evs[len(evs)-1]["seq"], &seq); err != nil {
		t.Fatal(err)
	}
	return seq
}

// TestAPIFamily_SnapshotConsistentWhileChildrenEnd reads the parent's
// snapshot over and over while its children narrate and end: every read
// is one moment of the whole family, so the child.finished events the
// parent's covering seq covers are exactly the children it shows ended,
// and each child's covering seq covers its terminal event exactly when it
// shows the child ended.
func TestAPIFamily_SnapshotConsistentWhileChildrenEnd(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	orders, amounts := a.threeOrders(t)
	for i := range 5 {
		o, err := a.store.CreateOrder(context.Background(), a.user(t, "customer@example.com").ID, fmt.Sprintf("Extra %d", i), 1000, "EUR")
		if err != nil {
			t.Fatal(err)
		}
		orders, amounts = append(orders, o.ID), append(amounts, 100)
	}
	r := a.apiStart(t, c, "fam", refundsBody("late delivery", orders, amounts))
	wantStatus(t, r, http.StatusCreated)
	fam := decode[familyJSON](t, r)

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, ch := range fam.Children {
			if err := a.endChild(ch.ID, i%3 != 1); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	reads := 0
	for finished := false; !finished; reads++ {
		select {
		case <-done:
			finished = true
		default:
		}
		s := a.get(t, c, "/api/runs/"+fam.ID.String())
		wantStatus(t, s, http.StatusOK)
		a.checkFamilyMoment(t, c, decode[familySnapshotJSON](t, s))
	}
	if reads < 2 {
		t.Errorf("read the snapshot %d times while the children ended, want several", reads)
	}
}

// endChild narrates on a child, then ends it as refundChild does, without
// failing the test from another goroutine.
func (a *app) endChild(id uuid.UUID, succeed bool) error {
	ctx := context.Background()
	for range 3 {
		if _, err := a.store.Append(ctx, id, store.EventOf(store.NarrationDelta{Text: "checking "})); err != nil {
			return err
		}
	}
	op, err := a.store.SubmitOperation(ctx, id)
	if err != nil {
		return err
	}
	out, state := store.Outcome{State: store.OpSucceeded, ProviderRef: "re_" + id.String()[:8]}, store.StateCompleted
	if !succeed {
		out, state = store.Outcome{State: store.OpFailed, Reason: "declined"}, store.StateFailed
	}
	if _, err := a.store.RecordOutcome(ctx, op.ID, out); err != nil {
		return err
	}
	_, err = a.store.FinishRun(ctx, id, state, store.Say("Done."))
	return err
}

// checkFamilyMoment checks one family snapshot against the logs, read
// afterwards: what each covering seq covers agrees with what it shows.
func (a *app) checkFamilyMoment(t *testing.T, c *http.Client, snap familySnapshotJSON) {
	t.Helper()
	covered := func(id uuid.UUID, upTo int64) (types []string) {
		for _, ev := range a.eventsOf(t, c, id) {
			var seq int64
			var typ string
			if json.Unmarshal(ev["seq"], &seq) != nil || json.Unmarshal(ev["type"], &typ) != nil {
				t.Fatalf("event %v", ev)
			}
			if seq <= upTo {
				types = append(types, typ)
			}
		}
		return types
	}
	ended := 0
	for i, ch := range snap.Children {
		evs := covered(ch.Run.ID, ch.CoveringSeq)
		last := evs[len(evs)-1]
		terminal := last == "run.completed" || last == "run.failed"
		if terminal != store.Terminal(ch.Run.State) {
			t.Errorf("child %d shows %s, but its covering seq %d ends its log at %s", i+1, ch.Run.State, ch.CoveringSeq, last)
		}
		if store.Terminal(ch.Run.State) {
			ended++
		}
	}
	finished := 0
	for _, typ := range covered(snap.Run.ID, snap.CoveringSeq) {
		if typ == "child.finished" {
			finished++
		}
	}
	if finished != ended {
		t.Errorf("the parent's covering seq %d covers %d child.finished, but the snapshot shows %d children ended", snap.CoveringSeq, finished, ended)
	}
}
