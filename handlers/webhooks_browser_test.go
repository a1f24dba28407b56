package handlers_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
)

// TestBrowser_WebhookSecretShownOnce: in Chromium an admin adds an
// endpoint on /admin/webhooks and sees its secret, once; a reload does not
// show it. "Send again" on a delivered event sets its resend_at in
// PostgreSQL; the page fits 360 and 1280 px.
func TestBrowser_WebhookSecretShownOnce(t *testing.T) {
	t.Parallel()
	a := newApp(t, serveWebhookConfig())
	ctx := browsertest.New(t)
	if err := browsertest.Login(ctx, a.srv.URL, "admin@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(a.srv.URL+"/admin/webhooks"),
		chromedp.WaitVisible(chromedp.CSS(`#add-webhook`)),
		chromedp.SendKeys(chromedp.CSS(`#add-webhook input[name="url"]`), "https://hooks.example.com/orders"),
		chromedp.SendKeys(chromedp.CSS(`#add-webhook input[name="description"]`), "order system"),
		chromedp.Click(chromedp.CSS(`#add-webhook input[value="run.completed"]`)),
		chromedp.Click(chromedp.CSS(`#add-webhook button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#new-webhook-secret-value`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#new-webhook-secret-value').textContent.trim()`))
	if err != nil {
		t.Fatal(err)
	}
	var id uuid.UUID
	var secret string
	var types []byte
	if err := a.db.QueryRow(`SELECT id, secret, event_types::text FROM webhook_endpoints`).Scan(&id, &secret, &types); err != nil {
		t.Fatal(err)
	}
	if shown != secret || !strings.HasPrefix(shown, "whsec_") {
		t.Fatalf("shown secret = %q, want the stored one", shown)
	}
	if string(types) != "{run.completed}" {
		t.Errorf("event types stored = %s, want {run.completed}", types)
	}
	said, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#new-webhook-secret').innerText`))
	if err != nil || !strings.Contains(said, "will not be shown again") {
		t.Errorf("the page says %q (%v), want it to say the secret will not be shown again", said, err)
	}

	// Reload: the endpoint is listed, its secret is not.
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#"+"webhook-"+id.String()))); err != nil {
		t.Fatal(err)
	}
	page, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page, secret) || strings.Contains(page, "whsec_") {
		t.Error("the reloaded page shows the secret")
	}

	a.insertDelivery(t, id, uuid.New(), 1, "delivered", "2026-01-01T00:00:00Z")
	err = chromedp.Do(ctx,
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`.webhook-attempt button[type="submit"]`)),
		chromedp.Click(chromedp.CSS(`.webhook-attempt button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.count(t, `SELECT count(*) FROM webhook_deliveries WHERE resend_at IS NOT NULL AND state = 'delivered'`); got != 1 {
		t.Errorf("deliveries asked to be sent again = %d, want 1", got)
	}
	flash, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.flash').innerText`))
	if err != nil || !strings.Contains(flash, "again") {
		t.Errorf("flash = %q (%v), want it to say the event is sent again", flash, err)
	}
	// With an endpoint and its attempts the page fits a phone and a laptop
	// (SCREENSHOTS=1 writes docs/screenshots/admin-webhooks-*.png).
	for _, w := range pageWidths {
		checkPage(t, ctx, a.srv.URL, shownPage{name: "admin-webhooks", path: "/admin/webhooks", ready: ".webhook-attempt",
			nav: "/admin/webhooks", whole: ""}, w)
	}
}
