package handlers

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPI is the JSON API's OpenAPI 3.1 document, written by hand beside
// the routes it describes; TestOpenAPI_MatchesRoutes keeps the two in step.
//
//go:embed openapi.json
var openAPI []byte

// apiOpenAPI is GET /api/openapi.json. It shows nobody's data, so it needs
// no sign-in.
func (h *Handler) apiOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPI)
}
