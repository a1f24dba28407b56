package handlers

import (
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
)

// Access is how much of a run a user may see right now.
type Access int

const (
	// AccessNone: the run does not exist for this user (answered 404, never
	// 403, so its existence is not confirmed).
	AccessNone Access = iota
	// AccessStatus: the run's state and outcome only; no narration, no
	// timeline. A customer whose refund_access was revoked gets this.
	AccessStatus
	// AccessFull: state, narration, timeline, ledger.
	AccessFull
)

// runAccess decides what u may see of run, from u's current role and grants
// (reloaded from the database on every request). hasApproval says whether
// the run ever asked for an approval: approvers see those runs.
func runAccess(u *store.User, run *store.Run, hasApproval bool) Access {
	if u == nil || u.Disabled() {
		return AccessNone
	}
	switch u.Role {
	case store.RoleSupport:
		return AccessFull
	case store.RoleApprover:
		if hasApproval || run.OwnerID == u.ID {
			return AccessFull
		}
	case store.RoleCustomer:
		if run.OwnerID == u.ID {
			if u.Has(store.GrantRefundAccess) {
				return AccessFull
			}
			return AccessStatus
		}
	}
	return AccessNone
}

// loadRun parses the :id path parameter, loads the run and decides the
// current user's access to it. A malformed ID, a missing run and a run the
// user may not see are all the same 404.
func (h *Handler) loadRun(c echo.Context) (*store.Run, Access, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return nil, AccessNone, store.ErrNotFound
	}
	var (
		run         *store.Run
		hasApproval bool
	)
	if pre, ok := c.Get(ctxRunForAccess).(runForAccess); ok && pre.run.ID == id {
		run, hasApproval = pre.run, pre.hasApproval // read with the user (loadStreamUser)
	} else if run, hasApproval, err = h.store.RunForAccess(c.Request().Context(), id); err != nil {
		return nil, AccessNone, err
	}
	access := h.accessTo(currentUser(c), run, hasApproval)
	if access == AccessNone {
		return nil, AccessNone, store.ErrNotFound
	}
	return run, access, nil
}

// accessTo is runAccess under this server's settings: a customer who lost
// refund_access sees nothing when REVOKED_ACCESS is none. Every decision
// about a run (its page, its streams, the API's list) goes through it.
func (h *Handler) accessTo(u *store.User, run *store.Run, hasApproval bool) Access {
	access := runAccess(u, run, hasApproval)
	if access == AccessStatus && h.cfg.RevokedSeeNothing {
		return AccessNone
	}
	return access
}
