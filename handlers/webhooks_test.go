package handlers_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/store"
)

// testDNS resolves the tests' names without the network: hooks.example.com
// is public, internal.example.com private (10.0.0.1).
func testDNS(_ context.Context, host string) ([]netip.Addr, error) {
	switch host {
	case "hooks.example.com":
		return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
	case "internal.example.com":
		return []netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil
	}
	return nil, errors.New("no such host")
}

// serveWebhookConfig is serve's webhook policy, resolving with testDNS.
func serveWebhookConfig() handlers.Config {
	return handlers.Config{WebhookPolicy: outbound.Policy{LookupIP: testDNS}}
}

type apiWebhookAnswer struct {
	ID                  uuid.UUID
	URL                 string
	Description         string
	EventTypes          []string `json:"event_types"`
	State               string
	DisabledReason      *string    `json:"disabled_reason"`
	Secret              string     `json:"secret"`
	PreviousSecretUntil *time.Time `json:"previous_secret_until"`
}

func (a *app) postJSON(t *testing.T, c *http.Client, path, body string) response {
	t.Helper()
	return a.send(t, c, http.MethodPost, path, map[string]string{"Content-Type": "application/json"}, body)
}

func (a *app) mustCreateWebhook(t *testing.T, admin *http.Client, body string) apiWebhookAnswer {
	t.Helper()
	r := a.postJSON(t, admin, "/api/webhooks", body)
	wantStatus(t, r, http.StatusCreated)
	return decode[apiWebhookAnswer](t, r)
}

func (a *app) storedWebhook(t *testing.T, id uuid.UUID) store.WebhookEndpoint {
	t.Helper()
	ep, err := a.store.Webhook(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// TestWebhooksAPI_SecretShownOnce: the answer that makes an endpoint holds
// its secret; the list, the admin's page and the audit log never do.
func TestWebhooksAPI_SecretShownOnce(t *testing.T) {
	t.Parallel()
	a := newApp(t, serveWebhookConfig())
	admin := a.signedIn(t, "admin@example.com")
	made := a.mustCreateWebhook(t, admin, `{"url":"https://hooks.example.com/refundd","description":"orders","event_types":["run.completed","run.failed"]}`)
	if !strings.HasPrefix(made.Secret, "whsec_") {
		t.Fatalf("secret = %q, want whsec_…", made.Secret)
	}
	if got := a.storedWebhook(t, made.ID).Secret; got != made.Secret {
		t.Errorf("stored secret differs from the one answered")
	}
	if made.URL != "https://hooks.example.com/refundd" || made.Description != "orders" || len(made.EventTypes) != 2 {
		t.Errorf("answer = %+v", made)
	}
	list := a.get(t, admin, "/api/webhooks")
	wantStatus(t, list, http.StatusOK)
	page := a.get(t, admin, "/admin/webhooks")
	wantStatus(t, page, http.StatusOK)
	for name, body := range map[string]string{"list": list.body, "page": page.body} {
		if strings.Contains(body, made.Secret) || strings.Contains(body, "whsec_") {
			t.Errorf("the %s shows a secret", name)
		}
	}
	eps := decode[[]apiWebhookAnswer](t, list)
	if len(eps) != 1 || eps[0].ID != made.ID || eps[0].State != "active" {
		t.Errorf("list = %+v, want the one active endpoint", eps)
	}
	if got := page.doc(t).Find("#" + "webhook-" + made.ID.String() + " .webhook-url").Text(); got != made.URL {
		t.Errorf("page's endpoint URL = %q, want %q", got, made.URL)
	}
	if n := a.count(t, `SELECT count(*) FROM audit_log WHERE action = 'webhook.created' AND details::text NOT LIKE '%whsec_%'`); n != 1 {
		t.Errorf("audit entries of the creation without a secret = %d, want 1", n)
	}
}

// TestWebhooksAPI_RefusesUnsafeURLs: serve's policy refuses, in words,
// what would reach this machine, its network or the cloud's metadata, and
// registers nothing; WEBHOOK_ALLOW_HOSTS lets a named host through.
func TestWebhooksAPI_RefusesUnsafeURLs(t *testing.T) {
	t.Parallel()
	a := newApp(t, serveWebhookConfig())
	admin := a.signedIn(t, "admin@example.com")
	for _, tc := range []struct{ url, words string }{
		{"http://127.0.0.1/x", "https://"},
		{"https://127.0.0.1/x", "loopback"},
		{"https://169.254.169.254/", "metadata"},
		{"https://[::1]/", "loopback"},
		{"https://internal.example.com/hook", "private"},
		{"https://nowhere.invalid/", "does not resolve"},
		{"https://user:pw@hooks.example.com/", "user name"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			r := a.postJSON(t, admin, "/api/webhooks", `{"url":"`+tc.url+`"}`)
			e := wantAPIError(t, r, http.StatusUnprocessableEntity, "invalid_webhook_url")
			if !strings.Contains(e.Error.Message, tc.words) {
				t.Errorf("message = %q, want it to say %q", e.Error.Message, tc.words)
			}
		})
	}
	if n := a.count(t, `SELECT count(*) FROM webhook_endpoints`); n != 0 {
		t.Errorf("%d endpoints registered, want none", n)
	}
	t.Run("allowed host", func(t *testing.T) {
		cfg := serveWebhookConfig()
		cfg.WebhookPolicy.AllowHosts = []string{"internal.example.com"}
		b := newApp(t, cfg)
		b.mustCreateWebhook(t, b.signedIn(t, "admin@example.com"), `{"url":"https://internal.example.com/hook"}`)
	})
}

func TestWebhooksAPI_RefusesUnknownEventType(t *testing.T) {
	t.Parallel()
	a := newApp(t, serveWebhookConfig())
	admin := a.signedIn(t, "admin@example.com")
	for _, typ := range []string{"run.exploded", "narration.delta"} {
		r := a.postJSON(t, admin, "/api/webhooks", `{"url":"https://hooks.example.com/","event_types":["`+typ+`"]}`)
		e := wantAPIError(t, r, http.StatusUnprocessableEntity, "unknown_event_type")
		if !strings.Contains(e.Error.Message, typ) {
			t.Errorf("message = %q, want it to name %s", e.Error.Message, typ)
		}
	}
	if n := a.count(t, `SELECT count(*) FROM webhook_endpoints`); n != 0 {
		t.Errorf("%d endpoints registered, want none", n)
	}
}

// TestWebhooksAPI_AdminsOnly: nobody but an admin sees or changes
// endpoints, by session or by token.
func TestWebhooksAPI_AdminsOnly(t *testing.T) {
	t.Parallel()
	a := newApp(t, serveWebhookConfig())
	made := a.mustCreateWebhook(t, a.signedIn(t, "admin@example.com"), `{"url":"https://hooks.example.com/"}`)
	for _, email := range []string{"customer@example.com", "approver@example.com", "support@example.com"} {
		c := a.signedIn(t, email)
		wantAPIError(t, a.get(t, c, "/api/webhooks"), http.StatusForbidden, "forbidden")
		wantAPIError(t, a.postJSON(t, c, "/api/webhooks", `{"url":"https://hooks.example.com/"}`), http.StatusForbidden, "forbidden")
		wantAPIError(t, a.send(t, c, http.MethodDelete, "/api/webhooks/"+made.ID.String(), nil, ""), http.StatusForbidden, "forbidden")
		wantAPIError(t, a.postJSON(t, c, "/api/webhooks/"+made.ID.String()+"/rotate", ""), http.StatusForbidden, "forbidden")
		wantStatus(t, a.get(t, c, "/admin/webhooks"), http.StatusForbidden)
	}
	wantUnauthorized(t, a.get(t, a.client(t), "/api/webhooks"))
	if n := a.count(t, `SELECT count(*) FROM webhook_endpoints`); n != 1 {
		t.Errorf("%d endpoints, want the admin's one", n)
	}
	if got := a.storedWebhook(t, made.ID).Secret; got != made.Secret {
		t.Error("the secret changed")
	}
}

func TestWebhooksAPI_Delete(t *testing.T) {
	t.Parallel()
	a := newApp(t, serveWebhookConfig())
	admin := a.signedIn(t, "admin@example.com")
	made := a.mustCreateWebhook(t, admin, `{"url":"https://hooks.example.com/"}`)
	wantStatus(t, a.send(t, admin, http.MethodDelete, "/api/webhooks/"+made.ID.String(), nil, ""), http.StatusNoContent)
	if n := a.count(t, `SELECT count(*) FROM webhook_endpoints`); n != 0 {
		t.Errorf("%d endpoints after delete, want 0", n)
	}
	wantAPIError(t, a.send(t, admin, http.MethodDelete, "/api/webhooks/"+made.ID.String(), nil, ""), http.StatusNotFound, "not_found")
	wantAPIError(t, a.send(t, admin, http.MethodDelete, "/api/webhooks/not-an-id", nil, ""), http.StatusNotFound, "not_found")
}

// TestWebhooksAPI_Rotate: a new secret, different, answered once; the
// store keeps the previous one signing for 24 hours.
func TestWebhooksAPI_Rotate(t *testing.T) {
	t.Parallel()
	a := newApp(t, serveWebhookConfig())
	admin := a.signedIn(t, "admin@example.com")
	made := a.mustCreateWebhook(t, admin, `{"url":"https://hooks.example.com/"}`)
	r := a.postJSON(t, admin, "/api/webhooks/"+made.ID.String()+"/rotate", "")
	wantStatus(t, r, http.StatusOK)
	rotated := decode[apiWebhookAnswer](t, r)
	if !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.Secret == made.Secret {
		t.Fatalf("rotated secret = %q, want a new whsec_ (old %q)", rotated.Secret, made.Secret)
	}
	ep := a.storedWebhook(t, made.ID)
	if ep.Secret != rotated.Secret || ep.PreviousSecret.String != made.Secret {
		t.Errorf("stored secrets: current is new %v, previous is old %v", ep.Secret == rotated.Secret, ep.PreviousSecret.String == made.Secret)
	}
	if left := time.Until(ep.PreviousUntil.Time); left < 23*time.Hour || left > 24*time.Hour+time.Minute {
		t.Errorf("previous secret signs for %s more, want 24 h", left)
	}
	if got := ep.Secrets(time.Now()); len(got) != 2 {
		t.Errorf("signing now with %d secrets, want 2", len(got))
	}
	if got := ep.Secrets(time.Now().Add(24*time.Hour + time.Minute)); len(got) != 1 || got[0] != rotated.Secret {
		t.Errorf("signing after 24 h with %d secrets, want the new one alone", len(got))
	}
	if rotated.PreviousSecretUntil == nil {
		t.Error("the answer does not say until when the previous secret signs")
	}
	if n := a.count(t, `SELECT count(*) FROM audit_log WHERE action = 'webhook.rotated' AND details::text NOT LIKE '%whsec_%'`); n != 1 {
		t.Errorf("audit entries of the rotation = %d, want 1", n)
	}
}

// TestWebhooksAPI_MaxWebhooksRefused: past MAX_WEBHOOKS an endpoint is
// refused in words, with a code.
func TestWebhooksAPI_MaxWebhooksRefused(t *testing.T) {
	t.Parallel()
	cfg := serveWebhookConfig()
	cfg.MaxWebhooks = 2
	a := newApp(t, cfg)
	admin := a.signedIn(t, "admin@example.com")
	for range 2 {
		a.mustCreateWebhook(t, admin, `{"url":"https://hooks.example.com/"}`)
	}
	e := wantAPIError(t, a.postJSON(t, admin, "/api/webhooks", `{"url":"https://hooks.example.com/"}`), http.StatusConflict, "too_many_webhooks")
	if !strings.Contains(e.Error.Message, "MAX_WEBHOOKS") || !strings.Contains(e.Error.Message, "Delete one") {
		t.Errorf("message = %q, want it to say the limit and what to do", e.Error.Message)
	}
	if n := a.count(t, `SELECT count(*) FROM webhook_endpoints`); n != 2 {
		t.Errorf("%d endpoints, want 2", n)
	}
}

// TestWebhooksAPI_DisableEnableFrom: an endpoint disabled and enabled from
// a time skips what waited from before it, and is active again.
func TestWebhooksAPI_DisableEnableFrom(t *testing.T) {
	t.Parallel()
	a := newApp(t, serveWebhookConfig())
	admin := a.signedIn(t, "admin@example.com")
	made := a.mustCreateWebhook(t, admin, `{"url":"https://hooks.example.com/"}`)
	run := uuid.New()
	for seq, at := range map[int64]string{1: "2026-01-01T00:00:00Z", 2: "2026-01-03T00:00:00Z"} {
		a.insertDelivery(t, made.ID, run, seq, "pending", at)
	}
	r := a.postJSON(t, admin, "/api/webhooks/"+made.ID.String()+"/disable", "")
	wantStatus(t, r, http.StatusOK)
	if got := decode[apiWebhookAnswer](t, r); got.State != "disabled" || got.DisabledReason == nil || *got.DisabledReason != "admin" {
		t.Errorf("after disable: %+v, want disabled by admin", got)
	}
	wantAPIError(t, a.postJSON(t, admin, "/api/webhooks/"+made.ID.String()+"/enable", `{"from":"yesterday"}`), http.StatusUnprocessableEntity, "invalid")
	r = a.postJSON(t, admin, "/api/webhooks/"+made.ID.String()+"/enable", `{"from":"2026-01-02T00:00:00Z"}`)
	wantStatus(t, r, http.StatusOK)
	if got := decode[apiWebhookAnswer](t, r); got.State != "active" {
		t.Errorf("after enable: state %q, want active", got.State)
	}
	if got := a.count(t, `SELECT count(*) FROM webhook_deliveries WHERE state = 'skipped' AND seq = 1`); got != 1 {
		t.Errorf("skipped deliveries from before from = %d, want 1", got)
	}
	if got := a.count(t, `SELECT count(*) FROM webhook_deliveries WHERE state = 'pending' AND seq = 2 AND next_at <= now()`); got != 1 {
		t.Errorf("due deliveries from after from = %d, want 1", got)
	}
	wantStatus(t, a.send(t, admin, http.MethodPost, "/api/webhooks/"+made.ID.String()+"/enable", nil, ""), http.StatusOK)
}

// insertDelivery puts a delivery with one failed attempt where the engine
// would.
func (a *app) insertDelivery(t *testing.T, endpoint, run uuid.UUID, seq int64, state, eventAt string) {
	t.Helper()
	ctx := context.Background()
	if _, err := a.db.ExecContext(ctx, `INSERT INTO webhook_deliveries (endpoint_id, run_id, seq, event_id, type, event_at, state, attempts, next_at, last_status)
		VALUES ($1, $2, $3, $4, 'run.completed', $5, $6, 1, now() + interval '1 hour', 503)`, endpoint, run, seq, uuid.New(), eventAt, state); err != nil {
		t.Fatal(err)
	}
	if _, err := a.db.ExecContext(ctx, `INSERT INTO webhook_attempts (endpoint_id, run_id, seq, event_id, attempt, status, error, duration_ms, next_at)
		VALUES ($1, $2, $3, $4, 1, 503, 'the receiver answered 503', 42, now() + interval '1 hour')`, endpoint, run, seq, uuid.New()); err != nil {
		t.Fatal(err)
	}
}

// TestWebhooksPage_AddShowsSecretOnce: the page's form adds an endpoint and
// the page after it shows the secret, once; a refused URL shows the page
// again with the policy's words and what was entered.
func TestWebhooksPage_AddShowsSecretOnce(t *testing.T) {
	t.Parallel()
	a := newApp(t, serveWebhookConfig())
	admin := a.signedIn(t, "admin@example.com")
	made := a.post(t, admin, "/admin/webhooks", url.Values{"url": {"https://hooks.example.com/p"}, "event_types": {"run.completed"}})
	wantRedirect(t, made, "/admin/webhooks")
	shown := a.get(t, admin, "/admin/webhooks")
	wantStatus(t, shown, http.StatusOK)
	secret := strings.TrimSpace(shown.doc(t).Find("#new-webhook-secret-value").Text())
	var stored string
	if err := a.db.Get(&stored, `SELECT secret FROM webhook_endpoints`); err != nil {
		t.Fatal(err)
	}
	if secret != stored || !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("shown secret = %q, want the stored one", secret)
	}
	if got := shown.doc(t).Find("#new-webhook-secret").Text(); !strings.Contains(got, "will not be shown again") {
		t.Errorf("the secret's words = %q, want it to say it will not be shown again", got)
	}
	if again := a.get(t, admin, "/admin/webhooks"); strings.Contains(again.body, secret) || strings.Contains(again.body, "whsec_") {
		t.Error("the reload shows the secret again")
	}
	refused := a.post(t, admin, "/admin/webhooks", url.Values{"url": {"https://169.254.169.254/latest"}, "description": {"meta"}})
	wantStatus(t, refused, http.StatusUnprocessableEntity)
	doc := refused.doc(t)
	if got := doc.Find("#webhook-error").Text(); !strings.Contains(got, "metadata") {
		t.Errorf("#webhook-error = %q, want the policy's words", got)
	}
	if got := doc.Find(`#add-webhook input[name=url]`).AttrOr("value", ""); got != "https://169.254.169.254/latest" {
		t.Errorf("the form lost the URL entered: %q", got)
	}
}

// TestWebhooksPage_SendAgain: "send again" on an acknowledged delivery
// sets its resend_at; on a pending one it makes it due now.
func TestWebhooksPage_SendAgain(t *testing.T) {
	t.Parallel()
	a := newApp(t, serveWebhookConfig())
	admin := a.signedIn(t, "admin@example.com")
	made := a.mustCreateWebhook(t, admin, `{"url":"https://hooks.example.com/"}`)
	run := uuid.New()
	a.insertDelivery(t, made.ID, run, 1, "delivered", "2026-01-01T00:00:00Z")
	a.insertDelivery(t, made.ID, run, 2, "pending", "2026-01-01T00:00:01Z")
	page := a.get(t, admin, "/admin/webhooks")
	if n := page.doc(t).Find(".webhook-attempt").Length(); n != 2 {
		t.Fatalf("attempts shown = %d, want 2", n)
	}
	base := "/admin/webhooks/" + made.ID.String() + "/deliveries/" + run.String()
	wantRedirect(t, a.post(t, admin, base+"/1/resend", nil), "/admin/webhooks")
	wantRedirect(t, a.post(t, admin, base+"/2/resend", nil), "/admin/webhooks")
	if got := a.count(t, `SELECT count(*) FROM webhook_deliveries WHERE seq = 1 AND resend_at IS NOT NULL AND state = 'delivered'`); got != 1 {
		t.Errorf("delivered one with resend_at = %d, want 1", got)
	}
	if got := a.count(t, `SELECT count(*) FROM webhook_deliveries WHERE seq = 2 AND resend_at IS NULL AND next_at <= now()`); got != 1 {
		t.Errorf("pending one due now = %d, want 1", got)
	}
	audit := a.get(t, admin, "/support/audit?action=webhook.resent")
	if got := audit.body; !strings.Contains(got, "asked to send run.completed (event 1) again to") || !strings.Contains(got, "https://hooks.example.com/") {
		t.Errorf("the audit log does not say who asked to send what again:\n%s", got)
	}
	wantStatus(t, a.post(t, admin, base+"/9/resend", nil), http.StatusNotFound)
	wantStatus(t, a.post(t, a.signedIn(t, "support@example.com"), base+"/1/resend", nil), http.StatusForbidden)
}

// TestOpenAPI_WebhookDelivery: the document describes what a receiver
// gets, under OpenAPI 3.1's webhooks: a POST of {type, timestamp, data:
// Event} with the three Standard Webhooks headers.
func TestOpenAPI_WebhookDelivery(t *testing.T) {
	t.Parallel()
	doc, _ := openAPIDoc(t)
	hooks, _ := doc["webhooks"].(map[string]any)
	ev, _ := hooks["refundEvent"].(map[string]any)
	post, _ := ev["post"].(map[string]any)
	if post == nil {
		t.Fatal("no webhooks.refundEvent.post")
	}
	var headers []string
	params, _ := post["parameters"].([]any)
	for _, p := range params {
		if m, _ := p.(map[string]any); m["in"] == "header" && m["required"] == true {
			headers = append(headers, m["name"].(string))
		}
	}
	if got, want := strings.Join(headers, " "), "webhook-id webhook-timestamp webhook-signature"; got != want {
		t.Errorf("required headers = %q, want %q", got, want)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	payload, _ := schemas["WebhookPayload"].(map[string]any)
	props, _ := payload["properties"].(map[string]any)
	data, _ := props["data"].(map[string]any)
	if data["$ref"] != "#/components/schemas/Event" || props["type"] == nil || props["timestamp"] == nil {
		t.Errorf("WebhookPayload = %v, want type, timestamp and data: Event", payload)
	}
}

// TestSupportRun_ListsDeliveries: support's page of a run lists its
// deliveries to every endpoint, with their state, attempts, last status
// and next try.
func TestSupportRun_ListsDeliveries(t *testing.T) {
	t.Parallel()
	a := newApp(t, serveWebhookConfig())
	run := a.startRun(t, "customer@example.com", 1)
	admin := a.signedIn(t, "admin@example.com")
	first := a.mustCreateWebhook(t, admin, `{"url":"https://hooks.example.com/first"}`)
	second := a.mustCreateWebhook(t, admin, `{"url":"https://hooks.example.com/second"}`)
	a.insertDelivery(t, first.ID, run.ID, 1, "delivered", "2026-01-01T00:00:00Z")
	a.insertDelivery(t, second.ID, run.ID, 1, "pending", "2026-01-01T00:00:00Z")
	r := a.get(t, a.signedIn(t, "support@example.com"), "/support/runs/"+run.ID.String())
	wantStatus(t, r, http.StatusOK)
	rows := r.doc(t).Find("#support-deliveries .support-delivery")
	if rows.Length() != 2 {
		t.Fatalf("deliveries listed = %d, want 2", rows.Length())
	}
	if got := rows.Eq(0).Text(); !strings.Contains(got, "/first") || !strings.Contains(got, "Delivered") {
		t.Errorf("first row = %q, want the first endpoint, delivered", got)
	}
	if got := rows.Eq(1).Text(); !strings.Contains(got, "/second") || !strings.Contains(got, "Not yet acknowledged") || !strings.Contains(got, "503") {
		t.Errorf("second row = %q, want the second endpoint, waiting, last status 503", got)
	}
}

// TestSupportRun_ListsMails: support's page of a run lists its request's
// emails, a permanent refusal in the server's words.
func TestSupportRun_ListsMails(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	run := a.startRun(t, "customer@example.com", 1)
	if _, err := a.db.Exec(`INSERT INTO mails (message_id, run_id, kind, recipient, subject, body, state, attempts, last_error)
		VALUES ('<ended.x@refundd>', $1, 'ended', 'customer@example.com', 'Your refund', 'b', 'failed', 1, '550 no such mailbox')`, run.ID); err != nil {
		t.Fatal(err)
	}
	r := a.get(t, a.signedIn(t, "support@example.com"), "/support/runs/"+run.ID.String())
	wantStatus(t, r, http.StatusOK)
	rows := r.doc(t).Find("#support-mails .support-mail")
	if rows.Length() != 1 {
		t.Fatalf("emails listed = %d, want 1", rows.Length())
	}
	if got := rows.Text(); !strings.Contains(got, "Refused for good: 550 no such mailbox") || !strings.Contains(got, "<ended.x@refundd>") {
		t.Errorf("email row = %q, want the refusal's words and the Message-ID", got)
	}
}

// TestWebhooksPage_Buttons: the page's buttons rotate (the new secret
// shown once), disable, enable from a time and delete an endpoint.
func TestWebhooksPage_Buttons(t *testing.T) {
	t.Parallel()
	a := newApp(t, serveWebhookConfig())
	admin := a.signedIn(t, "admin@example.com")
	made := a.mustCreateWebhook(t, admin, `{"url":"https://hooks.example.com/"}`)
	base := "/admin/webhooks/" + made.ID.String()

	wantRedirect(t, a.post(t, admin, base+"/rotate", nil), "/admin/webhooks")
	shown := strings.TrimSpace(a.get(t, admin, "/admin/webhooks").doc(t).Find("#new-webhook-secret-value").Text())
	if stored := a.storedWebhook(t, made.ID); shown != stored.Secret || shown == made.Secret {
		t.Errorf("shown after rotate = %q, want the new stored secret", shown)
	}
	if again := a.get(t, admin, "/admin/webhooks"); strings.Contains(again.body, "whsec_") {
		t.Error("the reload shows the rotated secret again")
	}

	wantRedirect(t, a.post(t, admin, base+"/disable", nil), "/admin/webhooks")
	page := a.get(t, admin, "/admin/webhooks").doc(t)
	if got := page.Find(".webhook-state").AttrOr("data-state", ""); got != "disabled" {
		t.Errorf("state after disable = %q, want disabled", got)
	}
	if got := page.Find(".flash").Text(); !strings.Contains(got, "Disabled https://hooks.example.com/") {
		t.Errorf("flash = %q", got)
	}
	wantStatus(t, a.post(t, admin, base+"/enable", url.Values{"from": {"soon"}}), http.StatusUnprocessableEntity)
	wantRedirect(t, a.post(t, admin, base+"/enable", url.Values{"from": {"2026-01-02T15:04"}}), "/admin/webhooks")
	if got := a.get(t, admin, "/admin/webhooks").doc(t).Find(".flash").Text(); !strings.Contains(got, "2026-01-02 15:04 UTC") {
		t.Errorf("flash after enable = %q, want the time it goes on from", got)
	}
	if ep := a.storedWebhook(t, made.ID); ep.DisabledAt.Valid {
		t.Error("still disabled after enable")
	}
	wantStatus(t, a.post(t, admin, base+"/explode", nil), http.StatusNotFound)
	wantRedirect(t, a.post(t, admin, base+"/delete", nil), "/admin/webhooks")
	if n := a.count(t, `SELECT count(*) FROM webhook_endpoints`); n != 0 {
		t.Errorf("%d endpoints after delete, want 0", n)
	}
	wantStatus(t, a.post(t, admin, base+"/delete", nil), http.StatusNotFound)
}
