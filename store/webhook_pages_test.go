package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// asAdmin is a context whose actor is the seeded admin.
func asAdmin(t *testing.T, s *store.Store) context.Context {
	t.Helper()
	u, err := s.UserByEmail(context.Background(), "admin@example.com")
	if err != nil {
		t.Fatal(err)
	}
	return store.WithActor(context.Background(), store.Actor{UserID: u.ID, IP: "192.0.2.1"})
}

func mustAddWebhook(t *testing.T, ctx context.Context, s *store.Store, url string) store.WebhookEndpoint {
	t.Helper()
	ep, err := s.AddWebhook(ctx, store.NewWebhook{URL: url, Secret: "whsec_c2VjcmV0"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func auditActions(t *testing.T, s *store.Store) []string {
	t.Helper()
	entries, err := s.AuditLogBefore(context.Background(), "", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Action, "webhook.") {
			out = append(out, e.Action)
			if strings.Contains(string(e.Details), "whsec_") {
				t.Errorf("audit entry %s holds a secret: %s", e.Action, e.Details)
			}
		}
	}
	return out
}

func TestAddWebhook_MaxWebhooksRace(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	ctx := asAdmin(t, s)
	const max = 3
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := s.AddWebhook(ctx, store.NewWebhook{URL: "https://hooks.example.com/", Secret: "whsec_c2VjcmV0"}, max)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	var ok, refused int
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, store.ErrConflict) && strings.Contains(err.Error(), "MAX_WEBHOOKS"):
			refused++
		default:
			t.Errorf("AddWebhook: %v", err)
		}
	}
	if ok != max || refused != 8-max {
		t.Errorf("added %d, refused %d; want %d and %d", ok, refused, max, 8-max)
	}
	eps, err := s.Webhooks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != max {
		t.Errorf("%d endpoints stored, want %d", len(eps), max)
	}
}

func TestAddWebhook_RefusesNarration(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	_, err := s.AddWebhook(asAdmin(t, s), store.NewWebhook{URL: "https://h.example.com/", Secret: "whsec_c2VjcmV0",
		EventTypes: []string{store.EventNarrationDelta}}, 0)
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("err = %v, want invalid", err)
	}
}

func TestWebhookAdmin_Audited(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	ctx := asAdmin(t, s)
	ep := mustAddWebhook(t, ctx, s, "https://hooks.example.com/a")
	rotated, err := s.RotateWebhook(ctx, ep.ID, "whsec_bmV3", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Secret != "whsec_bmV3" || rotated.PreviousSecret.String != ep.Secret {
		t.Errorf("secret, previous = %q, %q; want whsec_bmV3, %q", rotated.Secret, rotated.PreviousSecret.String, ep.Secret)
	}
	if until := rotated.PreviousUntil.Time; time.Until(until) < 23*time.Hour || time.Until(until) > 25*time.Hour {
		t.Errorf("previous secret kept until %s, want about 24 h from now", until)
	}
	if err := s.DisableWebhook(ctx, ep.ID); err != nil {
		t.Fatal(err)
	}
	got, err := s.Webhook(ctx, ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.DisabledAt.Valid || got.DisabledReason.String != store.WebhookByAdmin {
		t.Errorf("disabled = %v, %q; want disabled by admin", got.DisabledAt.Valid, got.DisabledReason.String)
	}
	if err := s.EnableWebhook(ctx, ep.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWebhook(ctx, ep.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWebhook(ctx, ep.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: err = %v, want ErrNotFound", err)
	}
	want := []string{store.AuditWebhookDeleted, store.AuditWebhookEnabled, store.AuditWebhookDisabled, store.AuditWebhookRotated, store.AuditWebhookCreated}
	if got := auditActions(t, s); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("audit = %q, want %q", got, want)
	}
}

// insertDelivery puts a delivery and its attempts where the engine would.
func insertDelivery(t *testing.T, s *store.Store, ep uuid.UUID, run uuid.UUID, seq int64, state string, attempts int) {
	t.Helper()
	db := storetest.DB(t, s)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `INSERT INTO webhook_deliveries (endpoint_id, run_id, seq, event_id, type, event_at, state, attempts, next_at, last_status)
		VALUES ($1, $2, $3, $4, 'run.created', now() - interval '1 hour', $5, $6, now() + interval '1 hour', 500)`,
		ep, run, seq, uuid.New(), state, attempts); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= attempts; i++ {
		if _, err := db.ExecContext(ctx, `INSERT INTO webhook_attempts (endpoint_id, run_id, seq, event_id, attempt, status, duration_ms)
			VALUES ($1, $2, $3, $4, $5, 500, 12)`, ep, run, seq, uuid.New(), i); err != nil {
			t.Fatal(err)
		}
	}
}

func TestResendDelivery(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	ctx := asAdmin(t, s)
	ep := mustAddWebhook(t, ctx, s, "https://hooks.example.com/a")
	run := uuid.New()
	insertDelivery(t, s, ep.ID, run, 1, "delivered", 1)
	insertDelivery(t, s, ep.ID, run, 2, "pending", 2)
	for _, seq := range []int64{1, 2} {
		if typ, err := s.ResendDelivery(ctx, ep.ID, run, seq); err != nil || typ != "run.created" {
			t.Fatalf("resend %d: %q, %v; want run.created", seq, typ, err)
		}
	}
	if _, err := s.ResendDelivery(ctx, ep.ID, run, 3); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("resend of a missing delivery: err = %v, want ErrNotFound", err)
	}
	ds, err := s.RunDeliveries(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 {
		t.Fatalf("%d deliveries, want 2", len(ds))
	}
	if !ds[0].ResendAt.Valid || ds[0].State != "delivered" {
		t.Errorf("delivered one: resend_at set %v, state %s; want set, delivered", ds[0].ResendAt.Valid, ds[0].State)
	}
	if ds[1].ResendAt.Valid || time.Until(ds[1].NextAt) > time.Minute {
		t.Errorf("pending one: resend_at set %v, next at %s; want unset, due now", ds[1].ResendAt.Valid, ds[1].NextAt)
	}
	attempts, err := s.WebhookAttempts(ctx, ep.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 3 || attempts[0].Seq != 2 || attempts[0].Type != "run.created" || attempts[0].State != "pending" {
		t.Errorf("attempts = %+v, want 3, newest first, of run.created", attempts)
	}
	lags, err := s.WebhookLag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lag := time.Since(lags[ep.ID]); lag < 59*time.Minute || lag > 2*time.Hour {
		t.Errorf("lag = %s, want about an hour", lag)
	}
}
