package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// langCookie holds a visitor's chosen language until they log in; a
// signed-in user's choice is saved with them (users.language).
const langCookie = "lang"

// langOf is the viewer's language: the one they chose (saved with them, or
// a visitor's cookie), else their browser's Accept-Language, else English.
func langOf(c echo.Context) views.Lang { return langFor(c, currentUser(c)) }

// langFor is langOf for user u (nil: a visitor), for requests whose user is
// read by the handler itself, as a stream's open does.
func langFor(c echo.Context, u *store.User) views.Lang {
	saved := ""
	if u != nil {
		saved = u.Language
	} else if ck, err := c.Cookie(langCookie); err == nil {
		saved = ck.Value
	}
	return views.Catalogues.Choose(saved, c.Request().Header.Get("Accept-Language"))
}

// chooseLanguage saves the language picked on any page (POST /language,
// fields lang and back) and returns to that page: with the user when
// signed in, else in a cookie for a year.
func (h *Handler) chooseLanguage(c echo.Context) error {
	tag, ok := views.Catalogues.Spoken(c.FormValue("lang"))
	if !ok {
		return store.Refuse(store.CodeInvalid, "refuse.no_such_language", nil)
	}
	if u := currentUser(c); u != nil {
		if err := h.store.SetLanguage(c.Request().Context(), u.ID, tag.String()); err != nil {
			return err
		}
	} else {
		c.SetCookie(&http.Cookie{Name: langCookie, Value: tag.String(), Path: "/", MaxAge: int((365 * 24 * time.Hour).Seconds()),
			HttpOnly: true, Secure: h.cfg.CookieSecure, SameSite: http.SameSiteLaxMode})
	}
	back := c.FormValue("back")
	if back != "/login" {
		back = safeNext(back)
	}
	return redirect(c, back)
}
