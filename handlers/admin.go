package handlers

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// Words for the admin's one-time answers.
const (
	keyOwnRole    = "refuse.own_role"
	keyOwnDisable = "refuse.own_disable"
)

// userID parses the :id path parameter; a malformed one is a 404 like a
// missing user.
func userID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, store.ErrNotFound
	}
	return id, nil
}

func (h *Handler) showAdminUsers(c echo.Context) error {
	ctx := c.Request().Context()
	users, err := h.store.Users(ctx)
	if err != nil {
		return err
	}
	tokens, err := h.store.Tokens(ctx)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.AdminUsersPage(currentUser(c), views.AdminUsers{
		Users: users, Tokens: tokens, Flash: h.takeFlash(c),
	}))
}

// grantForm gives or takes away one grant.
type grantForm struct {
	Grant string
	On    bool
}

func (f *grantForm) Validate() error {
	if !slices.Contains(store.Grants, f.Grant) {
		return store.Refuse(store.CodeInvalid, "refuse.no_grant", map[string]any{"Grant": strconv.Quote(f.Grant)})
	}
	return nil
}

func (h *Handler) setUserGrant(c echo.Context) error {
	id, err := userID(c)
	if err != nil {
		return err
	}
	on, err := strconv.ParseBool(c.FormValue("on"))
	if err != nil {
		return store.Refuse(store.CodeInvalid, "refuse.grant_on", nil)
	}
	f := grantForm{Grant: c.FormValue("grant"), On: on}
	if err := f.Validate(); err != nil {
		return err
	}
	u, err := h.store.UserByID(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if err := h.store.SetGrant(c.Request().Context(), id, f.Grant, f.On); err != nil {
		return err
	}
	data := map[string]any{"Who": u.Name + " (" + u.Email + ")", "Grant": views.GrantWordsIn(langOf(c), f.Grant)}
	if !f.On {
		return h.backToUsers(c, "form.grant_taken", data)
	}
	return h.backToUsers(c, "form.grant_given", data)
}

func (h *Handler) setUserRole(c echo.Context) error {
	id, err := userID(c)
	if err != nil {
		return err
	}
	if id == currentUser(c).ID {
		return store.Refuse(store.CodeForbidden, keyOwnRole, nil)
	}
	role := c.FormValue("role")
	ctx := c.Request().Context()
	if err := h.store.SetRole(ctx, id, role); err != nil {
		return err
	}
	u, err := h.store.UserByID(ctx, id)
	if err != nil {
		return err
	}
	return h.backToUsers(c, "form.role_set", map[string]any{"Email": u.Email, "Role": u.Role})
}

func (h *Handler) disableUser(c echo.Context) error { return h.setUserDisabled(c, true) }
func (h *Handler) enableUser(c echo.Context) error  { return h.setUserDisabled(c, false) }

func (h *Handler) setUserDisabled(c echo.Context, disabled bool) error {
	id, err := userID(c)
	if err != nil {
		return err
	}
	if disabled && id == currentUser(c).ID {
		return store.Refuse(store.CodeForbidden, keyOwnDisable, nil)
	}
	ctx := c.Request().Context()
	if err := h.store.SetDisabled(ctx, id, disabled); err != nil {
		return err
	}
	u, err := h.store.UserByID(ctx, id)
	if err != nil {
		return err
	}
	if disabled {
		return h.backToUsers(c, "form.user_disabled", map[string]any{"Email": u.Email})
	}
	return h.backToUsers(c, "form.user_enabled", map[string]any{"Email": u.Email})
}

// Session keys of a token made but not yet shown.
const (
	keyNewTokenID     = "new_token_id"
	keyNewTokenSecret = "new_token"
)

// createToken makes a token and redirects to the page that shows it, so a
// reload never makes another. The token waits for that page in the session,
// whose cookie is encrypted; it never goes into a URL or a log.
func (h *Handler) createToken(c echo.Context) error {
	id, err := userID(c)
	if err != nil {
		return err
	}
	t, secret, err := h.store.CreateToken(c.Request().Context(), id, c.FormValue("name"))
	if err != nil {
		return err
	}
	s := h.session(c)
	s.Values[keyNewTokenID] = t.ID
	s.Values[keyNewTokenSecret] = secret
	if err := s.Save(c.Request(), c.Response()); err != nil {
		return fmt.Errorf("handlers: keep new token: %w", err)
	}
	return redirect(c, "/admin/tokens/new")
}

// showNewToken shows the token createToken made, once: it leaves the
// session as it is shown, and a reload lands back on the users page.
func (h *Handler) showNewToken(c echo.Context) error {
	s := h.session(c)
	id, okID := s.Values[keyNewTokenID].(int64)
	secret, okSecret := s.Values[keyNewTokenSecret].(string)
	delete(s.Values, keyNewTokenID)
	delete(s.Values, keyNewTokenSecret)
	if !okID || !okSecret {
		return h.backToUsers(c, "form.token_shown_once", nil)
	}
	if err := s.Save(c.Request(), c.Response()); err != nil {
		return fmt.Errorf("handlers: forget new token: %w", err)
	}
	ctx := c.Request().Context()
	t, err := h.store.TokenByID(ctx, id)
	if err != nil {
		return err
	}
	owner, err := h.store.UserByID(ctx, t.UserID)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.TokenCreatedPage(currentUser(c), owner, t, secret))
}

func (h *Handler) revokeToken(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return store.ErrNotFound
	}
	if err := h.store.RevokeToken(c.Request().Context(), id); err != nil {
		return err
	}
	return h.backToUsers(c, "form.token_revoked", nil)
}

// backToUsers returns to the users page with the catalogue's key, filled
// in with data, as its flash in the admin's language.
func (h *Handler) backToUsers(c echo.Context, key string, data map[string]any) error {
	if err := h.addFlash(c, langOf(c).T(key, data)); err != nil {
		return err
	}
	return redirect(c, "/admin/users")
}
