package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// TestVerify_WebhookCursorNeverPastAnUnacknowledgedEvent: verify finds an
// endpoint that acknowledged a later event of a run while an earlier one
// waits, and an event that was never queued for an endpoint that wants it;
// an event still in the outbox is not yet a violation.
func TestVerify_WebhookCursorNeverPastAnUnacknowledgedEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	db := storetest.DB(t, f.s)
	ep, err := f.s.AddWebhook(ctx, store.NewWebhook{URL: "https://example.com/hook", Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	run := f.start(t, "verify-webhook", 100)
	if _, err := f.s.Append(ctx, run.ID, store.EventOf(store.RunPlanning{})); err != nil {
		t.Fatal(err)
	}
	if problems, err := f.s.Verify(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("verify with the events still in the outbox: %q, %v", problems, err)
	}
	// Fanned out: seq 1 waits, seq 2 (wrongly) acknowledged.
	if _, err := db.ExecContext(ctx, `INSERT INTO webhook_deliveries (endpoint_id, run_id, seq, event_id, type, event_at, state)
		SELECT $1, run_id, seq, event_id, type, created_at, CASE WHEN seq = 1 THEN 'pending' ELSE 'delivered' END
		FROM run_events WHERE run_id = $2 AND class = 'business'`, ep.ID, run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM outbound_queue WHERE run_id = $1`, run.ID); err != nil {
		t.Fatal(err)
	}
	problems, err := f.s.Verify(ctx)
	if err != nil || len(problems) != 1 || !strings.Contains(problems[0], "seq 2 acknowledged while seq 1 waits") {
		t.Errorf("verify = %q, %v; want seq 2 acknowledged past seq 1", problems, err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE run_id = $1 AND seq = 1`, run.ID); err != nil {
		t.Fatal(err)
	}
	problems, err = f.s.Verify(ctx)
	if err != nil || len(problems) != 1 || !strings.Contains(problems[0], "seq 1 (run.created) was never queued for it") {
		t.Errorf("verify = %q, %v; want seq 1 never queued", problems, err)
	}
}

// TestVerify_MailCheckFindsARequestThatEndedWithoutItsEmail: with the mail
// check, a request that ended after the ledger's first email, and was
// fanned out, without an email to its customer is a violation; without
// the check (no SMTP_URL) it is not.
func TestVerify_MailCheckFindsARequestThatEndedWithoutItsEmail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	db := storetest.DB(t, f.s)
	first := f.start(t, "mailed", 100)
	if _, err := db.ExecContext(ctx, `INSERT INTO mails (message_id, run_id, kind, recipient, subject, body, created_at)
		VALUES ('<ended.first@refundd>', $1, 'ended', 'c@example.com', 's', 'b', now() - interval '1 hour')`, first.ID); err != nil {
		t.Fatal(err)
	}
	run := f.start(t, "unmailed", 100)
	for _, q := range []string{
		`UPDATE runs SET state = 'canceled', finished_at = now() WHERE id = $1`,
		`INSERT INTO final_messages (run_id, body) VALUES ($1, 'x')`,
		`DELETE FROM outbound_queue WHERE run_id = $1 OR run_id IS NOT NULL`,
	} {
		if _, err := db.ExecContext(ctx, q, run.ID); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := f.s.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plain {
		if strings.Contains(p, "email") {
			t.Errorf("verify without the mail check: %q", p)
		}
	}
	problems, err := f.s.Verify(ctx, store.WithMailCheck())
	if err != nil {
		t.Fatal(err)
	}
	want := "request " + run.ID.String() + " ended canceled"
	if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, want) }) {
		t.Errorf("verify with the mail check = %q; want %q", problems, want)
	}
}
