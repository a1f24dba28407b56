package outbound_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// attemptRow is one recorded attempt of a delivery.
type attemptRow struct {
	Attempt int        `db:"attempt"`
	Status  *int       `db:"status"`
	Error   *string    `db:"error"`
	At      time.Time  `db:"at"`
	NextAt  *time.Time `db:"next_at"`
}

func attemptsOf(t testing.TB, st *store.Store, endpoint uuid.UUID) []attemptRow {
	t.Helper()
	var rows []attemptRow
	if err := storetest.DB(t, st).Select(&rows, `SELECT attempt, status, error, at, next_at FROM webhook_attempts
        WHERE endpoint_id = $1 ORDER BY id`, endpoint); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestWebhook_GoneDisables: a 410 disables the endpoint and its
// deliveries stop; a second endpoint, the witness, goes on receiving.
func TestWebhook_GoneDisables(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	gone, witness := newReceiver(t), newReceiver(t)
	gone.behave = func(w http.ResponseWriter, _ *http.Request, _ int) bool {
		w.WriteHeader(http.StatusGone)
		return true
	}
	ep, _ := mustEndpoint(t, st, gone.URL())
	wep, _ := mustEndpoint(t, st, witness.URL())
	startEngine(t, st, outbound.Config{})
	m := newRunMaker(t, st)
	m.single(t)
	waitFor(t, 10*time.Second, "the endpoint disabled", func() bool {
		e, err := st.Webhook(context.Background(), ep.ID)
		return err == nil && e.DisabledAt.Valid
	})
	if e, _ := st.Webhook(context.Background(), ep.ID); e.DisabledReason.String != store.WebhookGone {
		t.Errorf("disabled because %q, want %q", e.DisabledReason.String, store.WebhookGone)
	}
	before := gone.count()
	runs := []uuid.UUID{m.single(t), m.single(t)}
	want := total(businessEvents(t, st, runs)) + 4
	allDelivered(t, st, wep.ID, want, 10*time.Second)
	if got := gone.count(); got != before || got != 1 {
		t.Errorf("the gone endpoint got %d POSTs (%d when disabled), want 1", got, before)
	}
	if s := deliveryStates(t, st, ep.ID); s["pending"] != want || s["delivered"] != 0 {
		t.Errorf("the gone endpoint's deliveries: %v, want all %d pending (kept for a re-enable)", s, want)
	}
}

// TestWebhook_ServerErrorRetries: a 500 is retried on the (shortened)
// schedule, every attempt recorded, until a 2xx.
func TestWebhook_ServerErrorRetries(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	rcv := newReceiver(t)
	rcv.behave = func(w http.ResponseWriter, _ *http.Request, n int) bool {
		if n <= 2 {
			http.Error(w, "down", http.StatusInternalServerError)
			return true
		}
		return false
	}
	ep, _ := mustEndpoint(t, st, rcv.URL(), store.EventRunCreated)
	schedule := []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}
	startEngine(t, st, outbound.Config{Schedule: schedule})
	newRunMaker(t, st).single(t)
	allDelivered(t, st, ep.ID, 1, 10*time.Second)
	rows := attemptsOf(t, st, ep.ID)
	if len(rows) != 3 {
		t.Fatalf("%d attempts recorded, want 3", len(rows))
	}
	for i, r := range rows {
		wantStatus := []int{500, 500, 204}[i]
		if r.Attempt != i+1 || r.Status == nil || *r.Status != wantStatus {
			t.Errorf("attempt %d: %d with status %v, want %d", i+1, r.Attempt, r.Status, wantStatus)
		}
		if i < 2 && (r.NextAt == nil || r.Error == nil) {
			t.Errorf("attempt %d: next try %v, error %v; want both recorded", i+1, r.NextAt, r.Error)
		}
		if i > 0 {
			// The schedule's step, less 10% jitter.
			if gap, min := r.At.Sub(rows[i-1].At), schedule[i-1]*9/10; gap < min {
				t.Errorf("attempt %d came %v after the one before, want at least %v", i+1, gap, min)
			}
		}
	}
}

// TestWebhook_RetryAfterHonoured: a 503 with Retry-After waits what the
// receiver asked, not the schedule's first step.
func TestWebhook_RetryAfterHonoured(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	rcv := newReceiver(t)
	rcv.behave = func(w http.ResponseWriter, _ *http.Request, n int) bool {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	ep, _ := mustEndpoint(t, st, rcv.URL(), store.EventRunCreated)
	startEngine(t, st, outbound.Config{Schedule: []time.Duration{50 * time.Millisecond, 10 * time.Second}})
	newRunMaker(t, st).single(t)
	allDelivered(t, st, ep.ID, 1, 10*time.Second)
	rows := attemptsOf(t, st, ep.ID)
	if len(rows) != 2 {
		t.Fatalf("%d attempts, want 2", len(rows))
	}
	if gap := rows[1].At.Sub(rows[0].At); gap < 950*time.Millisecond {
		t.Errorf("the retry came %v after a Retry-After of 1 s, want at least 1 s", gap)
	}
}

// TestWebhook_RedirectNotFollowed: a 3xx is a failure, retried; the
// redirect's target receives nothing.
func TestWebhook_RedirectNotFollowed(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	target, rcv := newReceiver(t), newReceiver(t)
	rcv.behave = func(w http.ResponseWriter, r *http.Request, _ int) bool {
		http.Redirect(w, r, target.URL(), http.StatusTemporaryRedirect)
		return true
	}
	ep, _ := mustEndpoint(t, st, rcv.URL(), store.EventRunCreated)
	startEngine(t, st, outbound.Config{})
	newRunMaker(t, st).single(t)
	waitFor(t, 10*time.Second, "two attempts", func() bool { return len(attemptsOf(t, st, ep.ID)) >= 2 })
	if got := target.count(); got != 0 {
		t.Errorf("the redirect's target got %d POSTs, want 0", got)
	}
	if r := attemptsOf(t, st, ep.ID)[0]; r.Status == nil || *r.Status != http.StatusTemporaryRedirect {
		t.Errorf("attempt status %v, want 307", r.Status)
	}
	if s := deliveryStates(t, st, ep.ID); s["pending"] != 1 {
		t.Errorf("deliveries %v, want the redirected one pending", s)
	}
}
