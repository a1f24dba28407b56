package handlers

import (
	"context"
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// What a decision did, as the API names it.
const (
	resultApproved          = "approved"
	resultAlreadyApproved   = "already_approved"
	resultCancelRequested   = "cancel_requested"
	resultAlreadyCanceling  = "already_canceling"
	resultTooLateToCancel   = "too_late"
	msgApproved             = "Approved."
	msgAlreadyApproved      = "Already approved."
	msgCancelRequested      = "Cancel requested. The agent will stop before any money moves."
	msgAlreadyCanceling     = "Cancel already requested. The agent will stop before any money moves."
	msgTooLateToCancel      = "Too late to cancel: the refund has reached the payment provider; we are confirming the result."
	msgRunFinished          = "The run has already finished."
	msgOnlyApprovers        = "Only approvers can approve refunds."
	msgOnlyOwnerOrApprovers = "Only the customer who asked for this refund, or an approver, can cancel it."
)

// decision is what an approve or cancel did: a code for the API and the
// words a person reads, with the run as it is now.
type decision struct {
	Result  string `json:"result"`
	Message string `json:"message"`
	Run     apiRun `json:"run"`
}

// approve records the signed-in approver's approval of the run. Approving
// twice (double click, two tabs) is one approval: the second says so.
func (h *Handler) approve(c echo.Context) (*decision, error) {
	run, _, err := h.loadRun(c)
	if err != nil {
		return nil, err
	}
	u := currentUser(c)
	if u.Role != store.RoleApprover {
		return nil, store.Errorf(store.CodeForbidden, msgOnlyApprovers)
	}
	ctx := c.Request().Context()
	updated, err := h.store.Approve(ctx, run.ID, u.ID)
	switch {
	case err == nil:
		return &decision{Result: resultApproved, Message: msgApproved, Run: newAPIRun(updated)}, nil
	case errors.Is(err, store.ErrAlreadyDone):
		if updated, err = h.store.RunByID(ctx, run.ID); err != nil {
			return nil, err
		}
		return &decision{Result: resultAlreadyApproved, Message: msgAlreadyApproved, Run: newAPIRun(updated)}, nil
	case errors.Is(err, store.ErrConflict):
		return nil, h.finishedOr(ctx, run.ID, err)
	}
	return nil, err
}

// cancel records a request to cancel the run, from its owner or an
// approver. It is a command: the executor honours it at its next safe
// boundary. Once an operation exists the refund may have reached the
// provider, and the answer says it is too late.
func (h *Handler) cancel(c echo.Context) (*decision, error) {
	run, _, err := h.loadRun(c)
	if err != nil {
		return nil, err
	}
	u := currentUser(c)
	if run.OwnerID != u.ID && u.Role != store.RoleApprover {
		return nil, store.Errorf(store.CodeForbidden, msgOnlyOwnerOrApprovers)
	}
	ctx := c.Request().Context()
	updated, err := h.store.RequestCancel(ctx, run.ID, u.ID)
	already := errors.Is(err, store.ErrAlreadyDone)
	switch {
	case already:
		if updated, err = h.store.RunByID(ctx, run.ID); err != nil {
			return nil, err
		}
	case errors.Is(err, store.ErrConflict):
		return nil, h.finishedOr(ctx, run.ID, err)
	case err != nil:
		return nil, err
	}
	// Read after the cancel committed: an operation that exists now may
	// reach the provider whatever the executor does next.
	ops, err := h.store.OperationsByRun(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	d := &decision{Result: resultCancelRequested, Message: msgCancelRequested, Run: newAPIRun(updated)}
	switch {
	case len(ops) > 0 || updated.State == store.StateReconciling:
		d.Result, d.Message = resultTooLateToCancel, msgTooLateToCancel
	case already:
		d.Result, d.Message = resultAlreadyCanceling, msgAlreadyCanceling
	}
	return d, nil
}

// finishedOr words a store conflict: a finished run is "already finished"
// (409); other conflicts keep the store's own words.
func (h *Handler) finishedOr(ctx context.Context, runID uuid.UUID, conflict error) error {
	run, err := h.store.RunByID(ctx, runID)
	if err != nil {
		return err
	}
	if store.Terminal(run.State) {
		return store.Errorf(store.CodeConflict, msgRunFinished)
	}
	return conflict
}

func (h *Handler) approveRun(c echo.Context) error { return h.answerDecision(c, h.approve) }
func (h *Handler) cancelRun(c echo.Context) error  { return h.answerDecision(c, h.cancel) }

// answerDecision answers a decision made from the run page: htmx gets the
// DecisionResult fragment; a plain form gets the words as a flash on the run
// page it is sent back to.
func (h *Handler) answerDecision(c echo.Context, decide func(echo.Context) (*decision, error)) error {
	d, err := decide(c)
	htmx := c.Request().Header.Get("HX-Request") == "true"
	var se *store.Error
	if err != nil && htmx && errors.As(err, &se) && (se.Code == store.CodeConflict || se.Code == store.CodeForbidden) {
		// htmx does not swap a 4xx answer by default, and these words are
		// the answer the person clicked for.
		return render(c, http.StatusOK, views.DecisionResult(sentence(se.Message)))
	}
	if err != nil {
		return err
	}
	if htmx {
		return render(c, http.StatusOK, views.DecisionResult(d.Message))
	}
	if err := h.addFlash(c, d.Message); err != nil {
		return err
	}
	return redirect(c, "/runs/"+d.Run.ID.String())
}

func (h *Handler) apiApproveRun(c echo.Context) error { return apiAnswerDecision(c, h.approve) }
func (h *Handler) apiCancelRun(c echo.Context) error  { return apiAnswerDecision(c, h.cancel) }

func apiAnswerDecision(c echo.Context, decide func(echo.Context) (*decision, error)) error {
	d, err := decide(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}
