package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// Webhook endpoints, for admins: the JSON API (/api/webhooks) and the
// admin's page (/admin/webhooks). A secret is shown once, in the answer
// that made it; afterwards no page, answer or log holds it.

// DefaultMaxWebhooks is Config.MaxWebhooks's default.
const DefaultMaxWebhooks = 50

// SecretOverlap is how long a rotated-out secret goes on signing beside the
// new one, so receivers can switch without losing a delivery.
const SecretOverlap = 24 * time.Hour

// Codes of the webhooks' refusals.
const (
	codeInvalidWebhookURL = "invalid_webhook_url"
	codeUnknownEventType  = "unknown_event_type"
	codeTooManyWebhooks   = "too_many_webhooks"
)

// Limits of what an admin registers (the table's own checks).
const (
	maxWebhookURL         = 2048
	maxWebhookDescription = 500
)

// webhookForm is what an admin registers, from the API's JSON or the
// page's form.
type webhookForm struct {
	URL         string   `json:"url"`
	Description string   `json:"description"`
	EventTypes  []string `json:"event_types"`
}

// Validate checks the form's shape; the URL's safety is the policy's.
func (f *webhookForm) Validate() error {
	f.URL, f.Description = strings.TrimSpace(f.URL), strings.TrimSpace(f.Description)
	switch {
	case f.URL == "":
		return store.Refuse(codeInvalidWebhookURL, "refuse.webhook_no_url", nil)
	case len(f.URL) > maxWebhookURL:
		return store.Refuse(codeInvalidWebhookURL, "refuse.webhook_url_long", map[string]any{"Max": maxWebhookURL})
	case utf8.RuneCountInString(f.Description) > maxWebhookDescription:
		return store.Refuse(store.CodeInvalid, "refuse.webhook_description_long", map[string]any{"Max": maxWebhookDescription})
	}
	business := slices.DeleteFunc(store.EventTypes(), func(t string) bool { return store.ClassOf(t) != store.ClassBusiness })
	for _, t := range f.EventTypes {
		if !slices.Contains(business, t) {
			return store.Refuse(codeUnknownEventType, "refuse.webhook_unknown_type",
				map[string]any{"Type": strconv.Quote(t), "Types": strings.Join(business, ", ")})
		}
	}
	slices.Sort(f.EventTypes)
	f.EventTypes = slices.Compact(f.EventTypes)
	return nil
}

// addWebhook validates f, checks its URL with the policy and registers it
// for the signed-in admin: the endpoint and its secret.
func (h *Handler) addWebhook(ctx context.Context, admin *store.User, f webhookForm) (store.WebhookEndpoint, error) {
	if err := f.Validate(); err != nil {
		return store.WebhookEndpoint{}, err
	}
	if err := h.cfg.WebhookPolicy.Check(ctx, f.URL); err != nil {
		if errors.Is(err, outbound.ErrRefusedURL) {
			return store.WebhookEndpoint{}, refusedWords(err)
		}
		return store.WebhookEndpoint{}, err
	}
	secret, err := outbound.NewSecret()
	if err != nil {
		return store.WebhookEndpoint{}, fmt.Errorf("handlers: webhook secret: %w", err)
	}
	ep, err := h.store.AddWebhook(ctx, store.NewWebhook{URL: f.URL, Description: f.Description, EventTypes: f.EventTypes,
		Secret: secret, CreatedBy: admin.ID}, h.cfg.MaxWebhooks)
	if errors.Is(err, store.ErrConflict) {
		var se *store.Error
		if errors.As(err, &se) {
			tooMany := *se
			tooMany.Code = codeTooManyWebhooks
			return ep, &tooMany
		}
		return ep, err
	}
	return ep, err
}

// refusedWords are the policy's words for a refused URL, without the
// package's prefix, as a sentence.
func refusedWords(err error) *store.Error {
	msg := strings.TrimPrefix(err.Error(), outbound.ErrRefusedURL.Error()+": ")
	return store.Refuse(codeInvalidWebhookURL, "refuse.webhook_url_refused", map[string]any{"Why": msg})
}

// rotateWebhook gives an endpoint a new secret; the old one signs beside
// it for SecretOverlap.
func (h *Handler) rotateWebhook(ctx context.Context, id uuid.UUID) (store.WebhookEndpoint, error) {
	secret, err := outbound.NewSecret()
	if err != nil {
		return store.WebhookEndpoint{}, fmt.Errorf("handlers: webhook secret: %w", err)
	}
	return h.store.RotateWebhook(ctx, id, secret, SecretOverlap)
}

// webhookID parses the :id path parameter; a malformed one is a 404.
func webhookID(c echo.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return uuid.Nil, store.ErrNotFound
	}
	return id, nil
}

// parseFrom reads the time an endpoint is enabled from: RFC 3339, or (from
// the page's datetime-local field) a minute in UTC. Empty is zero: from
// where it stopped.
func parseFrom(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02T15:04", v, time.UTC); err == nil {
		return t, nil
	}
	return time.Time{}, store.Refuse(store.CodeInvalid, "refuse.not_a_time", map[string]any{"Value": strconv.Quote(v)})
}

// apiWebhook is an endpoint as the API shows it: never its secrets.
type apiWebhook struct {
	ID             uuid.UUID  `json:"id"`
	URL            string     `json:"url"`
	Description    string     `json:"description"`
	EventTypes     []string   `json:"event_types"`
	CreatedAt      time.Time  `json:"created_at"`
	State          string     `json:"state"` // active, failing or disabled
	DisabledAt     *time.Time `json:"disabled_at"`
	DisabledReason *string    `json:"disabled_reason"`
	FailingSince   *time.Time `json:"failing_since"`
	// OldestPendingAt is when its oldest undelivered event was
	// committed; LagSeconds the time since (0 when nothing waits).
	OldestPendingAt *time.Time `json:"oldest_pending_at"`
	LagSeconds      float64    `json:"lag_seconds"`
}

// apiWebhookWithSecret is the answer that makes a secret, the only one
// that holds it.
type apiWebhookWithSecret struct {
	apiWebhook
	Secret string `json:"secret"`
	// PreviousSecretUntil, after a rotation: until when the previous
	// secret signs too.
	PreviousSecretUntil *time.Time `json:"previous_secret_until,omitempty"`
}

func newAPIWebhook(ep store.WebhookEndpoint, oldest time.Time, now time.Time) apiWebhook {
	out := apiWebhook{ID: ep.ID, URL: ep.URL, Description: ep.Description, EventTypes: []string(ep.EventTypes),
		CreatedAt: ep.CreatedAt, State: views.WebhookState(ep)}
	if out.EventTypes == nil {
		out.EventTypes = []string{}
	}
	if ep.DisabledAt.Valid {
		out.DisabledAt = &ep.DisabledAt.Time
		out.DisabledReason = &ep.DisabledReason.String
	}
	if ep.FailingSince.Valid {
		out.FailingSince = &ep.FailingSince.Time
	}
	if !oldest.IsZero() {
		out.OldestPendingAt = &oldest
		out.LagSeconds = max(now.Sub(oldest), 0).Seconds()
	}
	return out
}

// apiCreateWebhook is POST /api/webhooks: 201 with the endpoint and its
// secret, shown this once.
func (h *Handler) apiCreateWebhook(c echo.Context) error {
	var f webhookForm
	if bad := decodeJSON(c.Request().Body, &f); bad != nil {
		return writeBad(c, bad)
	}
	ep, err := h.addWebhook(c.Request().Context(), currentUser(c), f)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/webhooks/"+ep.ID.String())
	return c.JSON(http.StatusCreated, apiWebhookWithSecret{apiWebhook: newAPIWebhook(ep, time.Time{}, time.Now()), Secret: ep.Secret})
}

// apiListWebhooks is GET /api/webhooks: every endpoint, oldest first, with
// its state and lag.
func (h *Handler) apiListWebhooks(c echo.Context) error {
	ctx := c.Request().Context()
	eps, err := h.store.Webhooks(ctx)
	if err != nil {
		return err
	}
	lags, err := h.store.WebhookLag(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	out := make([]apiWebhook, len(eps))
	for i, ep := range eps {
		out[i] = newAPIWebhook(ep, lags[ep.ID], now)
	}
	return c.JSON(http.StatusOK, out)
}

// apiDeleteWebhook is DELETE /api/webhooks/{id}: 204.
func (h *Handler) apiDeleteWebhook(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	if err := h.store.DeleteWebhook(c.Request().Context(), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// apiRotateWebhook is POST /api/webhooks/{id}/rotate: 200 with the new
// secret, shown this once.
func (h *Handler) apiRotateWebhook(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	ep, err := h.rotateWebhook(c.Request().Context(), id)
	if err != nil {
		return err
	}
	out := apiWebhookWithSecret{apiWebhook: newAPIWebhook(ep, time.Time{}, time.Now()), Secret: ep.Secret}
	if ep.PreviousUntil.Valid {
		out.PreviousSecretUntil = &ep.PreviousUntil.Time
	}
	return c.JSON(http.StatusOK, out)
}

// apiEnableBody is POST /api/webhooks/{id}/enable's optional body.
type apiEnableBody struct {
	From string `json:"from"`
}

// apiEnableWebhook is POST /api/webhooks/{id}/enable: deliveries go on
// from where they stopped, or from the events committed at or after from.
func (h *Handler) apiEnableWebhook(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	var body apiEnableBody
	if c.Request().ContentLength != 0 {
		if bad := decodeJSON(c.Request().Body, &body); bad != nil {
			return writeBad(c, bad)
		}
	}
	from, err := parseFrom(body.From)
	if err != nil {
		return err
	}
	return h.answerWebhook(c, id, h.store.EnableWebhook(c.Request().Context(), id, from))
}

// apiDisableWebhook is POST /api/webhooks/{id}/disable: deliveries wait
// until it is enabled again.
func (h *Handler) apiDisableWebhook(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	return h.answerWebhook(c, id, h.store.DisableWebhook(c.Request().Context(), id))
}

// answerWebhook answers a change to endpoint id with the endpoint as it is
// now, or with the change's error.
func (h *Handler) answerWebhook(c echo.Context, id uuid.UUID, changed error) error {
	if changed != nil {
		return changed
	}
	ctx := c.Request().Context()
	ep, err := h.store.Webhook(ctx, id)
	if err != nil {
		return err
	}
	lags, err := h.store.WebhookLag(ctx)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newAPIWebhook(ep, lags[id], time.Now()))
}

// deliveryKey names one delivery in the page's send-again path.
func deliveryKey(c echo.Context) (endpoint, run uuid.UUID, seq int64, err error) {
	if endpoint, err = webhookID(c); err != nil {
		return
	}
	if run, err = uuid.Parse(c.Param("run")); err != nil {
		return endpoint, run, 0, store.ErrNotFound
	}
	if seq, err = strconv.ParseInt(c.Param("seq"), 10, 64); err != nil || seq < 1 {
		return endpoint, run, 0, store.ErrNotFound
	}
	return endpoint, run, seq, nil
}
