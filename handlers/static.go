package handlers

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/static"
)

var staticFiles = http.StripPrefix("/static/", http.FileServerFS(static.FS()))

// static serves the embedded files. A URL carrying the file's current
// content version (see static.URL) can be cached for good; anything else is
// revalidated.
func (h *Handler) static(c echo.Context) error {
	name := strings.TrimPrefix(c.Request().URL.Path, "/static/")
	if v := c.QueryParam("v"); v != "" && v == static.Version(name) {
		c.Response().Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		c.Response().Header().Set("Cache-Control", "no-cache")
	}
	staticFiles.ServeHTTP(c.Response(), c.Request())
	return nil
}
