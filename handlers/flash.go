package handlers

import (
	"fmt"

	"github.com/labstack/echo/v4"
)

// addFlash keeps a one-time message in the session for the next page the
// browser loads (after a form POST's 303), such as "Approved."
func (h *Handler) addFlash(c echo.Context, msg string) error {
	s := h.session(c)
	s.AddFlash(msg)
	if err := s.Save(c.Request(), c.Response()); err != nil {
		return fmt.Errorf("handlers: save flash: %w", err)
	}
	return nil
}

// takeFlash returns and forgets the pending one-time messages.
func (h *Handler) takeFlash(c echo.Context) []string {
	s := h.session(c)
	flashes := s.Flashes()
	if len(flashes) == 0 {
		return nil
	}
	out := make([]string, 0, len(flashes))
	for _, f := range flashes {
		if m, ok := f.(string); ok {
			out = append(out, m)
		}
	}
	if err := s.Save(c.Request(), c.Response()); err != nil {
		h.log.Warn("forget flash", "err", err)
	}
	return out
}
