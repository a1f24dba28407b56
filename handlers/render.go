package handlers

import (
	"bytes"
	"context"
	"net/http"
	"sync"

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
	buf := pages.Get().(*bytes.Buffer)
	defer putPage(buf)
	if err := component.Render(ctx, buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// pages holds the buffers pages are rendered into: a page is written out
// before render returns, and its buffer, grown to the page's size once,
// renders the next.
var pages = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putPage gives a page's buffer back; one grown past maxPooledPage (a run
// page with all its narration) is let go.
func putPage(b *bytes.Buffer) {
	if b.Cap() <= maxPooledPage {
		b.Reset()
		pages.Put(b)
	}
}

const maxPooledPage = 256 << 10

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
