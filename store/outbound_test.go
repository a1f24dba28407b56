package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// outboxFixture is a store with a customer's order and helpers to end runs
// and register endpoints.
type outboxFixture struct {
	s       *store.Store
	parties storetest.Parties
	n       int
}

func newOutbox(t *testing.T) *outboxFixture {
	t.Helper()
	s := storetest.MustOpen(t)
	return &outboxFixture{s: s, parties: storetest.MustSeedParties(t, s, 1_000_000)}
}

// endedRun starts a run and ends it failed: run.created, message.final and
// run.failed, three business events, with narration between.
func (f *outboxFixture) endedRun(t *testing.T) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	f.n++
	run, _, err := f.s.StartRun(ctx, store.StartRequest{OwnerID: f.parties.Customer.ID, ClientRequestID: fmt.Sprintf("k%d", f.n),
		OrderID: f.parties.Order.ID, Amount: 100, Reason: "broken"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Append(ctx, run.ID, store.EventOf(store.NarrationDelta{Text: "thinking"})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.FinishRun(ctx, run.ID, store.StateFailed, store.Say("No refund.")); err != nil {
		t.Fatal(err)
	}
	return run.ID
}

func (f *outboxFixture) endpoint(t *testing.T, types ...string) store.WebhookEndpoint {
	t.Helper()
	ep, err := f.s.AddWebhook(context.Background(), store.NewWebhook{URL: "https://example.com/hook",
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", EventTypes: types}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func (f *outboxFixture) fanOut(t *testing.T, planner store.MailPlanner) int {
	t.Helper()
	n, err := f.s.FanOut(context.Background(), 1000, planner)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *outboxFixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := storetest.DB(t, f.s).Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *outboxFixture) claim(t *testing.T, limit int, busy map[uuid.UUID]int) []store.Delivery {
	t.Helper()
	return f.claimWith(t, store.DeliveryClaim{Limit: limit, Busy: busy})
}

// claimLanes claims up to limit lanes of up to lane deliveries each.
func (f *outboxFixture) claimLanes(t *testing.T, limit, lane int) []store.Delivery {
	t.Helper()
	return f.claimWith(t, store.DeliveryClaim{Limit: limit, Lane: lane})
}

// claimWith claims as c says, for a minute, 16 per endpoint.
func (f *outboxFixture) claimWith(t *testing.T, c store.DeliveryClaim) []store.Delivery {
	t.Helper()
	c.Lease, c.PerEndpoint = time.Minute, 16
	ds, err := f.s.ClaimDeliveries(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func (f *outboxFixture) record(t *testing.T, outcome string, ds ...store.Delivery) []uuid.UUID {
	t.Helper()
	var rs []store.DeliveryResult
	for _, d := range ds {
		rs = append(rs, store.DeliveryResult{EndpointID: d.EndpointID, RunID: d.Event.RunID, Seq: d.Event.Seq,
			EventID: d.Event.EventID, Resend: d.Resend, Outcome: outcome, Status: 500, Error: "boom",
			Duration: 3 * time.Millisecond, At: time.Now(), NextAt: time.Now().Add(-time.Second)})
	}
	disabled, err := f.s.RecordDeliveries(context.Background(), rs, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return disabled
}

type plannerFunc func(ev store.QueuedEvent) []store.NewMail

func (p plannerFunc) Plan(_ context.Context, ev store.QueuedEvent) ([]store.NewMail, error) {
	return p(ev), nil
}

func TestFanOut_EveryEndpointThatWants(t *testing.T) {
	t.Parallel()
	f := newOutbox(t)
	all := f.endpoint(t)
	ends := f.endpoint(t, store.EventRunFailed)
	run := f.endedRun(t)
	late := f.endpoint(t) // registered after the run's events: receives none of them
	mailed := plannerFunc(func(ev store.QueuedEvent) []store.NewMail {
		if ev.Type != store.EventRunFailed {
			return nil
		}
		m := store.NewMail{MessageID: "<" + ev.RunID.String() + ".ended@refundd>", RunID: ev.RunID, Kind: store.MailEnded,
			Recipient: "c@example.com", Subject: "Your request ended", Body: "No refund."}
		return []store.NewMail{m, m} // twice: recorded once
	})
	if got, want := f.fanOut(t, mailed), 3; got != want {
		t.Fatalf("fanned out %d events, want %d (business only)", got, want)
	}
	for _, c := range []struct {
		ep   store.WebhookEndpoint
		want int
	}{{all, 3}, {ends, 1}, {late, 0}} {
		if got := f.count(t, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND run_id = $2`, c.ep.ID, run); got != c.want {
			t.Errorf("endpoint %v: %d deliveries, want %d", c.ep.EventTypes, got, c.want)
		}
	}
	if got := f.count(t, `SELECT count(*) FROM mails WHERE run_id = $1`, run); got != 1 {
		t.Errorf("mails: got %d, want 1", got)
	}
	if got := f.count(t, `SELECT count(*) FROM outbound_queue`); got != 0 {
		t.Errorf("outbox after fan-out: %d rows, want 0", got)
	}
	if got := f.fanOut(t, mailed); got != 0 {
		t.Errorf("second fan-out: %d events, want 0", got)
	}
}

func TestFanOut_NoDestinationsDrains(t *testing.T) {
	t.Parallel()
	f := newOutbox(t)
	f.endedRun(t)
	if got, want := f.fanOut(t, nil), 3; got != want {
		t.Fatalf("fanned out %d, want %d", got, want)
	}
	if got := f.count(t, `SELECT count(*) FROM outbound_queue`); got != 0 {
		t.Errorf("outbox: %d rows, want 0", got)
	}
}

// TestFanOut_OneDispatcherAtATime: while another dispatcher holds the lock,
// FanOut does nothing and says so.
func TestFanOut_OneDispatcherAtATime(t *testing.T) {
	t.Parallel()
	f := newOutbox(t)
	f.endedRun(t)
	tx, err := storetest.DB(t, f.s).Beginx()
	if err != nil {
		t.Fatal(err)
	}
	var locked bool
	if err := tx.Get(&locked, `SELECT pg_try_advisory_xact_lock($1)`, int64(0x7266_6464_6f75_7462)); err != nil || !locked {
		t.Fatalf("take the fan-out lock: %v %v", locked, err)
	}
	if got := f.fanOut(t, nil); got != 0 {
		t.Errorf("fan-out while locked: %d, want 0", got)
	}
	tx.Rollback()
	if got := f.fanOut(t, nil); got != 3 {
		t.Errorf("fan-out after: %d, want 3", got)
	}
}

func seqsOf(ds []store.Delivery, run uuid.UUID) []int64 {
	var out []int64
	for _, d := range ds {
		if d.Event.RunID == run {
			out = append(out, d.Event.Seq)
		}
	}
	slices.Sort(out)
	return out
}

// TestClaimDeliveries_PerRunInSeqOrder: only the earliest pending event of
// each run is claimed, runs side by side; a failed one holds back its
// run's later events until it is delivered.
func TestClaimDeliveries_PerRunInSeqOrder(t *testing.T) {
	t.Parallel()
	f := newOutbox(t)
	ep := f.endpoint(t)
	a, b := f.endedRun(t), f.endedRun(t)
	f.fanOut(t, nil)
	first := f.claim(t, 10, nil)
	if len(first) != 2 || len(seqsOf(first, a)) != 1 || len(seqsOf(first, b)) != 1 {
		t.Fatalf("first claim: %d deliveries, want one per run", len(first))
	}
	for _, d := range first {
		if d.URL != ep.URL || len(d.Secrets) != 1 || d.Event.Type != store.EventRunCreated || len(d.Event.Payload) == 0 || d.Event.CorrelationID != d.Event.RunID {
			t.Errorf("claimed %+v: want the endpoint and run.created as streamed", d)
		}
	}
	if got := f.claim(t, 10, nil); len(got) != 0 {
		t.Fatalf("claim while leased: %d deliveries, want 0", len(got))
	}
	// a's first fails (due again at once), b's is delivered.
	var da, db store.Delivery
	for _, d := range first {
		if d.Event.RunID == a {
			da = d
		} else {
			db = d
		}
	}
	f.record(t, store.DeliveryRetry, da)
	f.record(t, store.DeliveryDelivered, db)
	second := f.claim(t, 10, nil)
	if got, want := seqsOf(second, a), []int64{da.Event.Seq}; !slices.Equal(got, want) {
		t.Errorf("run a after a failure: claimed seqs %v, want %v (the same again, nothing after it)", got, want)
	}
	if got := seqsOf(second, b); len(got) != 1 || got[0] <= db.Event.Seq {
		t.Errorf("run b after a delivery: claimed %v, want its next event after %d", got, db.Event.Seq)
	}
	var attempts, status int
	if err := storetest.DB(t, f.s).QueryRow(`SELECT attempts, last_status FROM webhook_deliveries WHERE endpoint_id = $1 AND run_id = $2 AND seq = $3`,
		ep.ID, a, da.Event.Seq).Scan(&attempts, &status); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || status != 500 {
		t.Errorf("after a retry: attempts %d status %d, want 1 and 500", attempts, status)
	}
	if got := f.count(t, `SELECT count(*) FROM webhook_attempts WHERE endpoint_id = $1`, ep.ID); got != 2 {
		t.Errorf("attempt rows: %d, want 2", got)
	}
}

// TestClaimDeliveries_FullAndDisabledEndpoints: an endpoint with no room
// left in this worker, or disabled, is not claimed from.
func TestClaimDeliveries_FullAndDisabledEndpoints(t *testing.T) {
	t.Parallel()
	f := newOutbox(t)
	full, off, free := f.endpoint(t), f.endpoint(t), f.endpoint(t)
	for range 3 {
		f.endedRun(t)
	}
	f.fanOut(t, nil)
	if err := f.s.DisableWebhook(context.Background(), off.ID); err != nil {
		t.Fatal(err)
	}
	ds, err := f.s.ClaimDeliveries(context.Background(), store.DeliveryClaim{Limit: 100, Lease: time.Minute, PerEndpoint: 2,
		Busy: map[uuid.UUID]int{full.ID: 2}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[uuid.UUID]int{}
	for _, d := range ds {
		got[d.EndpointID]++
	}
	if got[full.ID] != 0 || got[off.ID] != 0 || got[free.ID] != 2 {
		t.Errorf("claimed per endpoint: full %d, disabled %d, free %d; want 0, 0, 2 (its room)", got[full.ID], got[off.ID], got[free.ID])
	}
}

// TestRecordDeliveries_DisablesFailingAndGone: an endpoint failing longer
// than DisableAfter is disabled as failing, one that answered 410 as gone,
// and a success clears failing_since.
func TestRecordDeliveries_DisablesFailingAndGone(t *testing.T) {
	t.Parallel()
	f := newOutbox(t)
	failing, gone, healed := f.endpoint(t), f.endpoint(t), f.endpoint(t)
	f.endedRun(t)
	f.fanOut(t, nil)
	db := storetest.DB(t, f.s)
	if _, err := db.Exec(`UPDATE webhook_endpoints SET failing_since = now() - interval '2 hours' WHERE id IN ($1, $2)`, failing.ID, healed.ID); err != nil {
		t.Fatal(err)
	}
	byEndpoint := map[uuid.UUID]store.Delivery{}
	for _, d := range f.claim(t, 10, nil) {
		byEndpoint[d.EndpointID] = d
	}
	disabled := f.record(t, store.DeliveryRetry, byEndpoint[failing.ID])
	disabled = append(disabled, f.record(t, store.DeliveryGone, byEndpoint[gone.ID])...)
	disabled = append(disabled, f.record(t, store.DeliveryDelivered, byEndpoint[healed.ID])...)
	if len(disabled) != 2 {
		t.Errorf("disabled %v, want the failing and the gone endpoints", disabled)
	}
	for _, c := range []struct {
		id       uuid.UUID
		reason   string
		clearing bool
	}{{failing.ID, store.WebhookFailing, false}, {gone.ID, store.WebhookGone, false}, {healed.ID, "", true}} {
		ep, err := f.s.Webhook(context.Background(), c.id)
		if err != nil {
			t.Fatal(err)
		}
		if ep.DisabledReason.String != c.reason || ep.DisabledAt.Valid != (c.reason != "") {
			t.Errorf("endpoint %s: disabled %v (%q), want %q", c.id, ep.DisabledAt.Valid, ep.DisabledReason.String, c.reason)
		}
		if c.clearing && ep.FailingSince.Valid {
			t.Errorf("endpoint %s: failing since %v after a success, want cleared", c.id, ep.FailingSince.Time)
		}
	}
	if got := f.claim(t, 10, nil); len(got) != 1 || got[0].EndpointID != healed.ID {
		t.Errorf("after disabling: claimed %d deliveries, want only the healed endpoint's next", len(got))
	}
}

// TestClaimDeliveries_Resend: an acknowledged delivery an admin asks to
// send again is claimed outside the run's order and stays delivered.
func TestClaimDeliveries_Resend(t *testing.T) {
	t.Parallel()
	f := newOutbox(t)
	ep := f.endpoint(t)
	run := f.endedRun(t)
	f.fanOut(t, nil)
	d := f.claim(t, 10, nil)[0]
	f.record(t, store.DeliveryDelivered, d)
	next := f.claim(t, 10, nil) // the run's second event, leased
	if len(next) != 1 {
		t.Fatalf("claimed %d, want the run's next event", len(next))
	}
	if _, err := storetest.DB(t, f.s).Exec(`UPDATE webhook_deliveries SET resend_at = now() WHERE endpoint_id = $1 AND run_id = $2 AND seq = $3`,
		ep.ID, run, d.Event.Seq); err != nil {
		t.Fatal(err)
	}
	again := f.claim(t, 10, nil)
	if len(again) != 1 || !again[0].Resend || again[0].Event.Seq != d.Event.Seq {
		t.Fatalf("claimed %+v, want the resend of seq %d", again, d.Event.Seq)
	}
	f.record(t, store.DeliveryDelivered, again...)
	var state string
	var resend *time.Time
	if err := storetest.DB(t, f.s).QueryRow(`SELECT state, resend_at FROM webhook_deliveries WHERE endpoint_id = $1 AND run_id = $2 AND seq = $3`,
		ep.ID, run, d.Event.Seq).Scan(&state, &resend); err != nil {
		t.Fatal(err)
	}
	if state != "delivered" || resend != nil {
		t.Errorf("after the resend: state %q resend_at %v, want delivered and cleared", state, resend)
	}
}

func TestWebhookLag(t *testing.T) {
	t.Parallel()
	f := newOutbox(t)
	behind, caughtUp := f.endpoint(t), f.endpoint(t, store.EventMessageFinal)
	f.endedRun(t)
	f.fanOut(t, nil)
	if _, err := storetest.DB(t, f.s).Exec(`UPDATE webhook_deliveries SET event_at = now() - interval '1 minute' WHERE endpoint_id = $1`, behind.ID); err != nil {
		t.Fatal(err)
	}
	for _, d := range f.claim(t, 10, nil) {
		if d.EndpointID == caughtUp.ID {
			f.record(t, store.DeliveryDelivered, d)
		}
	}
	lags, err := f.s.WebhookLag(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Since(lags[behind.ID]); got < time.Minute || got > 2*time.Minute {
		t.Errorf("lag of the endpoint behind: %v, want about a minute", got)
	}
	if got, ok := lags[caughtUp.ID]; !ok || !got.IsZero() {
		t.Errorf("oldest undelivered of the endpoint caught up: %v (listed %v), want none", got, ok)
	}
}

// TestRecordDeliveries_HoldsBackTheRun: the events behind a delivery that
// waits for a retry wait as long (the claims never read them meanwhile),
// those fanned out later too, and they are due once it is delivered.
func TestRecordDeliveries_HoldsBackTheRun(t *testing.T) {
	t.Parallel()
	f := newOutbox(t)
	ep := f.endpoint(t)
	ctx := context.Background()
	run, _, err := f.s.StartRun(ctx, store.StartRequest{OwnerID: f.parties.Customer.ID, ClientRequestID: "held",
		OrderID: f.parties.Order.ID, Amount: 100, Reason: "broken"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Transition(ctx, run.ID, store.StateCreated, store.StatePlanning, store.EventOf(store.RunPlanning{})); err != nil {
		t.Fatal(err)
	}
	f.fanOut(t, nil)
	head := f.claim(t, 10, nil)[0]
	later := time.Now().Add(time.Hour)
	if _, err := f.s.RecordDeliveries(ctx, []store.DeliveryResult{{EndpointID: head.EndpointID, RunID: head.Event.RunID,
		Seq: head.Event.Seq, EventID: head.Event.EventID, Outcome: store.DeliveryRetry, Status: 503, At: time.Now(), NextAt: later}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.FinishRun(ctx, run.ID, store.StateFailed, store.Say("No refund.")); err != nil {
		t.Fatal(err)
	}
	f.fanOut(t, nil)
	if got := f.count(t, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND seq > $2 AND next_at < $3`,
		ep.ID, head.Event.Seq, later.Add(-time.Second)); got != 0 {
		t.Errorf("%d events behind the retried one are due before it, want 0", got)
	}
	if got := f.claim(t, 10, nil); len(got) != 0 {
		t.Fatalf("claimed %d while the run's first event waits, want 0", len(got))
	}
	// Its time comes (moved here to now), it is delivered: the next is due.
	if _, err := storetest.DB(t, f.s).Exec(`UPDATE webhook_deliveries SET next_at = now() WHERE seq = $1`, head.Event.Seq); err != nil {
		t.Fatal(err)
	}
	f.record(t, store.DeliveryDelivered, f.claim(t, 10, nil)...)
	if next := f.claim(t, 10, nil); len(next) != 1 || next[0].Event.Seq <= head.Event.Seq {
		t.Errorf("after the delivery: claimed %d, want the run's next event", len(next))
	}
}

// TestClaimDeliveries_LaneInSeqOrder: a claim leases a run's due pending
// deliveries together, in seq order behind their head, up to the first
// one leased (none skipped); a lane counts as one of the limit.
func TestClaimDeliveries_LaneInSeqOrder(t *testing.T) {
	t.Parallel()
	f := newOutbox(t)
	ep := f.endpoint(t)
	a, b := f.endedRun(t), f.endedRun(t)
	f.fanOut(t, nil)
	// The third event of b is leased (a worker that holds it): b's lane
	// stops before it.
	if _, err := storetest.DB(t, f.s).Exec(`UPDATE webhook_deliveries SET leased_until = now() + interval '1 minute'
        WHERE run_id = $1 AND seq = (SELECT max(seq) FROM webhook_deliveries WHERE run_id = $1)`, b); err != nil {
		t.Fatal(err)
	}
	one := f.claimLanes(t, 1, 32)
	if len(one) != 3 {
		t.Fatalf("claim of one lane: %d deliveries, want the 3 business events of one run", len(one))
	}
	run := one[0].Event.RunID
	for i, d := range one {
		if d.EndpointID != ep.ID || d.Event.RunID != run || d.Follows != (i > 0) || (i > 0 && d.Event.Seq <= one[i-1].Event.Seq) {
			t.Errorf("lane[%d]: run %s seq %d follows %v; want one run in seq order, all but the head following", i, d.Event.RunID, d.Event.Seq, d.Follows)
		}
	}
	other := a
	if run == a {
		other = b
	}
	rest := f.claimLanes(t, 10, 32)
	wantLen := 3
	if other == b {
		wantLen = 2
	}
	if len(rest) != wantLen || seqsOf(rest, run) != nil {
		t.Errorf("second claim: %d deliveries (of the first run: %v), want %d of the other run only", len(rest), seqsOf(rest, run), wantLen)
	}
	if got := f.claimLanes(t, 10, 32); len(got) != 0 {
		t.Errorf("claim while every lane is leased: %d, want 0", len(got))
	}
}

// TestRecordDeliveries_LaneFailsInTheMiddle: a lane's head is delivered,
// its second fails, the third was not sent: the third's lease ends with no
// attempt counted or recorded, it waits as long as the failed one, and
// once that one is delivered it is claimed.
func TestRecordDeliveries_LaneFailsInTheMiddle(t *testing.T) {
	t.Parallel()
	f := newOutbox(t)
	ep := f.endpoint(t)
	f.endedRun(t)
	f.fanOut(t, nil)
	lane := f.claimLanes(t, 10, 32)
	if len(lane) != 3 {
		t.Fatalf("claimed %d, want a lane of 3", len(lane))
	}
	ctx := context.Background()
	now, later := time.Now(), time.Now().Add(time.Hour)
	result := func(d store.Delivery, outcome string, status int) store.DeliveryResult {
		return store.DeliveryResult{EndpointID: d.EndpointID, RunID: d.Event.RunID, Seq: d.Event.Seq, EventID: d.Event.EventID,
			Outcome: outcome, Status: status, At: now, NextAt: later}
	}
	if _, err := f.s.RecordDeliveries(ctx, []store.DeliveryResult{result(lane[0], store.DeliveryDelivered, 200),
		result(lane[1], store.DeliveryRetry, 503), result(lane[2], store.DeliveryUnsent, 0)}, time.Hour); err != nil {
		t.Fatal(err)
	}
	type row struct {
		State    string     `db:"state"`
		Attempts int        `db:"attempts"`
		Leased   *time.Time `db:"leased_until"`
		NextAt   time.Time  `db:"next_at"`
		Status   *int       `db:"last_status"`
	}
	var rows []row
	if err := storetest.DB(t, f.s).Select(&rows, `SELECT state, attempts, leased_until, next_at, last_status FROM webhook_deliveries
        WHERE endpoint_id = $1 ORDER BY seq`, ep.ID); err != nil {
		t.Fatal(err)
	}
	if rows[0].State != "delivered" || rows[1].State != "pending" || rows[1].Attempts != 1 {
		t.Errorf("head %+v, second %+v: want delivered, and pending after one attempt", rows[0], rows[1])
	}
	if u := rows[2]; u.State != "pending" || u.Attempts != 0 || u.Leased != nil || u.Status != nil || u.NextAt.Before(later.Add(-time.Second)) {
		t.Errorf("unsent third: %+v, want pending, no attempt, no lease, due with the failed one", u)
	}
	if got := f.count(t, `SELECT count(*) FROM webhook_attempts WHERE endpoint_id = $1`, ep.ID); got != 2 {
		t.Errorf("attempt rows: %d, want 2 (the unsent one has none)", got)
	}
	if got := f.claimLanes(t, 10, 32); len(got) != 0 {
		t.Fatalf("claimed %d while the failed one waits, want 0", len(got))
	}
	if _, err := storetest.DB(t, f.s).Exec(`UPDATE webhook_deliveries SET next_at = now() WHERE endpoint_id = $1 AND seq = $2`,
		ep.ID, lane[1].Event.Seq); err != nil {
		t.Fatal(err)
	}
	again := f.claimLanes(t, 10, 32)
	if len(again) != 1 || again[0].Event.Seq != lane[1].Event.Seq {
		t.Fatalf("claimed %d, want the failed one alone (the one behind it waits as long)", len(again))
	}
	f.record(t, store.DeliveryDelivered, again...)
	if last := f.claimLanes(t, 10, 32); len(last) != 1 || last[0].Event.Seq != lane[2].Event.Seq || last[0].Follows {
		t.Errorf("after the delivery: claimed %d, want the unsent one as a head", len(last))
	}
}
