package handlers

import (
	"bytes"
	"context"
	"net/http"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/views"
)

// render writes a templ component as the whole response. It renders into a
// buffer first, so a failing component becomes a clean error page instead
// of half a page with a 200.
func render(c echo.Context, status int, component templ.Component) error {
	// The path lets the layout mark the current page in the navigation;
	// the language is the viewer's (langOf).
	ctx := views.WithLang(views.WithPath(c.Request().Context(), c.Request().URL.Path), langOf(c))
	body, err := renderBytes(ctx, component)
	if err != nil {
		return err
	}
	return c.HTMLBlob(status, body)
}

// renderBytes renders a component into bytes: a page's body, or a
// stream's data.
func renderBytes(ctx context.Context, c templ.Component) ([]byte, error) {
	var buf bytes.Buffer
	err := c.Render(ctx, &buf)
	return buf.Bytes(), err
}

// redirect answers a form POST (or a page the visitor may not see) with a
// 303, so the browser follows it with a GET.
func redirect(c echo.Context, to string) error {
	return c.Redirect(http.StatusSeeOther, to)
}
