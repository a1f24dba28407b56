package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// mxWebhookRows are the authorization matrix's rows of the webhook routes:
// admins only, by session; everyone else is refused and changes nothing.
// The URLs are addresses for documentation (TEST-NET-3), which serve's
// policy allows without a DNS lookup and nothing ever calls.
func mxWebhookRows() []mxRow {
	const L = "303 /login"
	const page = "303 /admin/webhooks"
	const F = "403"
	return []mxRow{
		// mxWant columns: anonymous, customer (owner), other-customer, revoked-customer (owner), approver, support, admin, customer-token.
		{"GET", "/admin/webhooks", false, mxPath("/admin/webhooks"), mxWant{L, F, F, F, F, F, "200", L}},
		{"POST", "/admin/webhooks", false, mxNewWebhook(false), mxWant{L, F, F, F, F, F, page, L}},
		{"POST", "/admin/webhooks/:id/:action", false, mxOnWebhook("disable"), mxWant{L, F, F, F, F, F, page, L}},
		{"POST", "/admin/webhooks/:id/deliveries/:run/:seq/resend", false, mxResend, mxWant{L, F, F, F, F, F, page, L}},

		{"GET", "/api/webhooks", false, mxPath("/api/webhooks"), mxWant{"401", F, F, F, F, F, "200", F}},
		{"POST", "/api/webhooks", false, mxNewWebhook(true), mxWant{"401", F, F, F, F, F, "201", F}},
		{"DELETE", "/api/webhooks/:id", false, mxOnWebhook("delete"), mxWant{"401", F, F, F, F, F, "204", F}},
		{"POST", "/api/webhooks/:id/rotate", false, mxOnWebhook("rotate"), mxWant{"401", F, F, F, F, F, "200", F}},
		{"POST", "/api/webhooks/:id/enable", false, mxOnWebhook("enable"), mxWant{"401", F, F, F, F, F, "200", F}},
		{"POST", "/api/webhooks/:id/disable", false, mxOnWebhook("disable"), mxWant{"401", F, F, F, F, F, "200", F}},
	}
}

// mxNewWebhook registers a fresh URL, by the page's form or the API; its
// change is that URL's endpoint existing.
func mxNewWebhook(api bool) mxCellFunc {
	return func(t *testing.T, m *mxApp, _ mxRow, _ int, _ *http.Client) *mxCell {
		u := "https://203.0.113.7/" + uuid.NewString()
		c := &mxCell{path: "/admin/webhooks", form: url.Values{"url": {u}}}
		if api {
			c = &mxCell{path: "/api/webhooks", json: `{"url":"` + u + `"}`}
		}
		c.changed = func(t *testing.T) bool {
			return m.count(t, `SELECT count(*) FROM webhook_endpoints WHERE url = $1`, u) > 0
		}
		return c
	}
}

// mxWebhook is a fresh endpoint, disabled if asked.
func (m *mxApp) mxWebhook(t *testing.T, disabled bool) uuid.UUID {
	t.Helper()
	ep, err := m.store.AddWebhook(context.Background(), store.NewWebhook{URL: "https://203.0.113.7/" + uuid.NewString(), Secret: "whsec_bXg="}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if disabled {
		if err := m.store.DisableWebhook(context.Background(), ep.ID); err != nil {
			t.Fatal(err)
		}
	}
	return ep.ID
}

// mxOnWebhook is a request on a fresh endpoint (of the API when the route
// is, else the page's button action); its change is the one action names.
func mxOnWebhook(action string) mxCellFunc {
	return func(t *testing.T, m *mxApp, row mxRow, _ int, _ *http.Client) *mxCell {
		id := m.mxWebhook(t, action == "enable")
		path := strings.Replace(strings.Replace(row.route, ":id", id.String(), 1), ":action", action, 1)
		query := map[string]string{
			"disable": `SELECT count(*) FROM webhook_endpoints WHERE id = $1 AND disabled_at IS NOT NULL`,
			"enable":  `SELECT count(*) FROM webhook_endpoints WHERE id = $1 AND disabled_at IS NULL`,
			"rotate":  `SELECT count(*) FROM webhook_endpoints WHERE id = $1 AND previous_secret IS NOT NULL`,
			"delete":  `SELECT 1 - count(*) FROM webhook_endpoints WHERE id = $1`,
		}[action]
		return &mxCell{path: path, changed: func(t *testing.T) bool { return m.count(t, query, id) > 0 }}
	}
}

// mxResend is "send again" on a delivered event of a fresh endpoint; its
// change is the delivery's resend_at.
func mxResend(t *testing.T, m *mxApp, _ mxRow, _ int, _ *http.Client) *mxCell {
	id, run := m.mxWebhook(t, false), uuid.New()
	m.insertDelivery(t, id, run, 1, "delivered", "2026-01-01T00:00:00Z")
	return &mxCell{path: "/admin/webhooks/" + id.String() + "/deliveries/" + run.String() + "/1/resend", changed: func(t *testing.T) bool {
		return m.count(t, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND resend_at IS NOT NULL`, id) > 0
	}}
}
