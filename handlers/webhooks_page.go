package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// The admin's webhooks page (/admin/webhooks). A secret made by a POST
// waits in the session (its cookie is encrypted) for the page the POST
// redirects to, which shows it and forgets it: a reload never shows it
// again, and it never goes into a URL or a log.

// Session keys of a webhook secret made but not yet shown.
const (
	keyWebhookURL     = "new_webhook_url"
	keyWebhookSecret  = "new_webhook_secret"
	keyWebhookRotated = "new_webhook_rotated"
)

// webhookAttemptsShown is how many recent attempts each endpoint shows.
const webhookAttemptsShown = 10

func (h *Handler) showAdminWebhooks(c echo.Context) error {
	v := views.AdminWebhooks{Flash: h.takeFlash(c)}
	secret, err := h.takeNewWebhookSecret(c)
	if err != nil {
		return err
	}
	v.NewSecret = secret
	return h.renderWebhooks(c, http.StatusOK, v)
}

// renderWebhooks reads every endpoint, its lag and its recent attempts
// into v and renders the page.
func (h *Handler) renderWebhooks(c echo.Context, status int, v views.AdminWebhooks) error {
	ctx := c.Request().Context()
	eps, err := h.store.Webhooks(ctx)
	if err != nil {
		return err
	}
	lags, err := h.store.WebhookLag(ctx)
	if err != nil {
		return err
	}
	v.Now = time.Now()
	for _, ep := range eps {
		attempts, err := h.store.WebhookAttempts(ctx, ep.ID, webhookAttemptsShown)
		if err != nil {
			return err
		}
		v.Endpoints = append(v.Endpoints, views.WebhookRow{Endpoint: ep, OldestPending: lags[ep.ID], Attempts: attempts})
	}
	return render(c, status, views.AdminWebhooksPage(currentUser(c), v))
}

// takeNewWebhookSecret returns the secret a POST left for this page and
// forgets it; nil when there is none.
func (h *Handler) takeNewWebhookSecret(c echo.Context) (*views.NewWebhookSecret, error) {
	s := h.session(c)
	url, okURL := s.Values[keyWebhookURL].(string)
	secret, okSecret := s.Values[keyWebhookSecret].(string)
	rotated, _ := s.Values[keyWebhookRotated].(bool)
	if !okURL || !okSecret {
		return nil, nil
	}
	delete(s.Values, keyWebhookURL)
	delete(s.Values, keyWebhookSecret)
	delete(s.Values, keyWebhookRotated)
	if err := s.Save(c.Request(), c.Response()); err != nil {
		return nil, fmt.Errorf("handlers: forget webhook secret: %w", err)
	}
	return &views.NewWebhookSecret{URL: url, Secret: secret, Rotated: rotated}, nil
}

// keepNewWebhookSecret leaves a secret for the page, then redirects to it.
func (h *Handler) keepNewWebhookSecret(c echo.Context, ep store.WebhookEndpoint, rotated bool) error {
	s := h.session(c)
	s.Values[keyWebhookURL] = ep.URL
	s.Values[keyWebhookSecret] = ep.Secret
	s.Values[keyWebhookRotated] = rotated
	if err := s.Save(c.Request(), c.Response()); err != nil {
		return fmt.Errorf("handlers: keep webhook secret: %w", err)
	}
	return redirect(c, "/admin/webhooks")
}

// saveWebhook adds an endpoint from the page's form; a refusal shows the
// page again with what was entered and why.
func (h *Handler) saveWebhook(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	f := webhookForm{URL: form.Get("url"), Description: form.Get("description"), EventTypes: form["event_types"]}
	ep, err := h.addWebhook(c.Request().Context(), currentUser(c), f)
	var se *store.Error
	if errors.As(err, &se) {
		p := problemIn(err, langOf(c))
		return h.renderWebhooks(c, p.status, views.AdminWebhooks{Error: p.message,
			Form: views.WebhookFormValues{URL: f.URL, Description: f.Description, EventTypes: f.EventTypes}})
	}
	if err != nil {
		return err
	}
	return h.keepNewWebhookSecret(c, ep, false)
}

// changeWebhook is a button of the page on one endpoint:
// /admin/webhooks/{id}/rotate, delete, disable or enable.
func (h *Handler) changeWebhook(c echo.Context) error {
	switch c.Param("action") {
	case "rotate":
		return h.rotateWebhookSecret(c)
	case "delete":
		return h.removeWebhook(c)
	case "disable":
		return h.disableWebhook(c)
	case "enable":
		return h.enableWebhook(c)
	}
	return store.ErrNotFound
}

func (h *Handler) rotateWebhookSecret(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	ep, err := h.rotateWebhook(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return h.keepNewWebhookSecret(c, ep, true)
}

func (h *Handler) removeWebhook(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	ep, err := h.store.Webhook(ctx, id)
	if err != nil {
		return err
	}
	if err := h.store.DeleteWebhook(ctx, id); err != nil {
		return err
	}
	return h.backToWebhooks(c, views.WebhookDeletedWordsIn(langOf(c), ep.URL))
}

func (h *Handler) disableWebhook(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := h.store.DisableWebhook(ctx, id); err != nil {
		return err
	}
	ep, err := h.store.Webhook(ctx, id)
	if err != nil {
		return err
	}
	return h.backToWebhooks(c, views.WebhookDisabledWordsIn(langOf(c), ep.URL))
}

func (h *Handler) enableWebhook(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	from, err := parseFrom(c.FormValue("from"))
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := h.store.EnableWebhook(ctx, id, from); err != nil {
		return err
	}
	ep, err := h.store.Webhook(ctx, id)
	if err != nil {
		return err
	}
	return h.backToWebhooks(c, views.WebhookEnabledWordsIn(langOf(c), ep.URL, from))
}

// resendDelivery is "send again" on one attempt's row: the delivery is
// replayed (or, still pending, tried now).
func (h *Handler) resendDelivery(c echo.Context) error {
	endpoint, run, seq, err := deliveryKey(c)
	if err != nil {
		return err
	}
	typ, err := h.store.ResendDelivery(c.Request().Context(), endpoint, run, seq)
	if err != nil {
		return err
	}
	return h.backToWebhooks(c, views.WebhookResentWordsIn(langOf(c), typ, seq))
}

func (h *Handler) backToWebhooks(c echo.Context, msg string) error {
	if err := h.addFlash(c, msg); err != nil {
		return err
	}
	return redirect(c, "/admin/webhooks")
}
