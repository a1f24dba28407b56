package handlers

import (
	"context"
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// roleGate is what the state streams (the approver's queue, a customer's
// run list) share: the one role they are for, found again through the
// stream's credential, and the words their page shows when they end.
type roleGate struct {
	h         *Handler
	cred      store.StreamCredential
	role      string
	signedOut string // catalogue key of the words for a viewer whose session has ended
	denied    string // catalogue key of the words for a viewer of another role
}

// refuse answers a request the gate does not let through with the close
// event (so the browser stops asking), or says it may go on (false).
func (g roleGate) refuse(c echo.Context, u *store.User) (bool, error) {
	switch {
	case u == nil:
		return true, g.answer(c, langOf(c).T(g.signedOut))
	case u.Role != g.role:
		return true, g.answer(c, langOf(c).T(g.denied))
	}
	return false, nil
}

// answer closes the stream with words, in the viewer's language.
func (g roleGate) answer(c echo.Context, words string) error {
	data, err := renderBytes(c.Request().Context(), views.StreamClosed(words))
	if err != nil {
		return err
	}
	return g.h.engine.Answer(c, 0, "close", data)
}

// Recheck reloads the user through the stream's credential; one who signed
// out or no longer has the role gets the close event.
func (g roleGate) Recheck(ctx context.Context) error {
	u, err := g.h.userOf(ctx, g.cred)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return stream.SignedOut
	case err != nil:
		return err
	case u.Role != g.role:
		return stream.Denied
	}
	return nil
}

// Closing says why the stream ends, or that the server restarts, in the
// language ctx carries (the stream's page's: its view puts it there).
func (g roleGate) Closing(ctx context.Context, r stream.Reason) ([]byte, error) {
	l := views.LangFrom(ctx)
	switch r {
	case stream.Restarting:
		return renderBytes(ctx, views.StreamRestarting())
	case stream.SignedOut:
		return renderBytes(ctx, views.StreamClosed(l.T(g.signedOut)))
	}
	return renderBytes(ctx, views.StreamClosed(l.T(g.denied)))
}
