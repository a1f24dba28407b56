package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// What a decision did, as the API names it.
const (
	resultApproved         = "approved"
	resultAlreadyApproved  = "already_approved"
	resultCancelRequested  = "cancel_requested"
	resultAlreadyCanceling = "already_canceling"
	resultTooLateToCancel  = "too_late"
	// The answers say what happened, never what will: they stay true
	// whatever the run does next, even when they arrive after it.
	// Their words are the catalogues' (decision.*).
	keyApproved         = "decision.approved"
	keyAlreadyApproved  = "decision.already_approved"
	keyCancelRequested  = "decision.cancel_requested"
	keyAlreadyCanceling = "decision.already_canceling"
	keyTooLateToCancel  = "decision.too_late"
)

// runFinished refuses a decision on a run that has ended, in state.
func runFinished(state string) error {
	e := store.Refuse(store.CodeConflict, "refuse.run_finished", nil)
	e.State = state
	return e
}

// decision is what an approve or cancel did: a code for the API and the
// words a person reads, with the run as it is now.
type decision struct {
	Result  string `json:"result"`
	Message string `json:"message"` // English until in sets the viewer's
	Run     apiRun `json:"run"`
	// words are Message in a language.
	words func(views.Lang) string
	// Children, of a decision on a request, is what it did to each of the
	// request's refunds it concerned.
	Children []childDecision `json:"children,omitempty"`
}

// approve records the signed-in approver's approval of the run. Approving
// twice (double click, two tabs) is one approval: the second says so.
func (h *Handler) approve(c echo.Context) (*decision, error) {
	run, err := h.decisionRun(c)
	if err != nil {
		return nil, err
	}
	u := currentUser(c)
	if u.Role != store.RoleApprover {
		return nil, store.Refuse(store.CodeForbidden, "refuse.only_approvers", nil)
	}
	if run.IsParent() {
		return h.approveFamily(c, run, u)
	}
	d, err := h.store.Approve(c.Request().Context(), run.ID, u.ID, decisionReason(c, u))
	if err != nil {
		return nil, err
	}
	return worded(d, approveWords)
}

// cancel records a request to cancel the run, from its owner or an
// approver. It is a command: the executor honours it at its next safe
// boundary, and the store says whether it came too late to promise that no
// money moves.
func (h *Handler) cancel(c echo.Context) (*decision, error) {
	run, err := h.decisionRun(c)
	if err != nil {
		return nil, err
	}
	u := currentUser(c)
	if run.OwnerID != u.ID && u.Role != store.RoleApprover {
		return nil, store.Refuse(store.CodeForbidden, "refuse.only_owner_or_approvers", nil)
	}
	if run.IsParent() {
		return h.cancelFamily(c, run, u)
	}
	d, err := h.store.RequestCancelBecause(c.Request().Context(), run.ID, u.ID, decisionReason(c, u))
	if err != nil {
		return nil, err
	}
	return worded(d, cancelWords)
}

// decisionRun loads the run a decision is about, as loadRun does, except
// for an approver and a run large enough to need one: an approver may see
// only the runs that asked for a decision, yet such a run is theirs to
// decide, only not waiting yet (an approve sent right after the start,
// before the agent asked): that is a conflict that says the run's state,
// not a run that does not exist. A run below the threshold never asks, and
// stays unknown to approvers (404).
func (h *Handler) decisionRun(c echo.Context) (*store.Run, error) {
	run, _, err := h.loadRun(c)
	if !errors.Is(err, store.ErrNotFound) || currentUser(c).Role != store.RoleApprover {
		return run, err
	}
	id, perr := uuid.Parse(c.Param("id"))
	if perr != nil {
		return nil, err
	}
	run, _, lerr := h.store.RunForAccess(c.Request().Context(), id)
	if lerr == nil && run.IsParent() {
		return h.familyForApprover(c, run, err)
	}
	switch {
	case lerr != nil, !store.NeedsApproval(run.Amount, h.cfg.ApprovalThreshold):
		return nil, err
	case store.Terminal(run.State):
		return nil, runFinished(run.State)
	}
	return nil, store.NotAwaitingApproval(run)
}

// decisionReason is the optional reason staff give with a decision; a
// customer's form has no such field, and one sent anyway is not kept.
func decisionReason(c echo.Context, u *store.User) string {
	if u.Role == store.RoleCustomer {
		return ""
	}
	return strings.TrimSpace(c.FormValue("reason"))
}

func approveWords(o store.DecisionOutcome) (result, message string) {
	switch o {
	case store.DecisionAccepted:
		return resultApproved, keyApproved
	case store.DecisionAlreadyMade:
		return resultAlreadyApproved, keyAlreadyApproved
	}
	return "", ""
}

func cancelWords(o store.DecisionOutcome) (result, message string) {
	switch o {
	case store.DecisionAccepted:
		return resultCancelRequested, keyCancelRequested
	case store.DecisionAlreadyMade:
		return resultAlreadyCanceling, keyAlreadyCanceling
	case store.DecisionTooLate:
		return resultTooLateToCancel, keyTooLateToCancel
	}
	return "", ""
}

// worded turns what the store decided into the API's code and a person's
// words. A refusal is an error that carries its words: a finished run says
// so in ours, any other keeps the store's.
func worded(d store.Decision, words func(store.DecisionOutcome) (string, string)) (*decision, error) {
	switch d.Outcome {
	case store.DecisionRunFinished:
		return nil, runFinished(d.Run.State)
	case store.DecisionNotAllowed:
		return nil, d.Why
	}
	result, key := words(d.Outcome)
	if result == "" {
		return nil, fmt.Errorf("handlers: no words for decision outcome %d", d.Outcome)
	}
	say := func(l views.Lang) string { return l.T(key) }
	return &decision{Result: result, Message: say(views.English), Run: newAPIRun(d.Run), words: say}, nil
}

// in is d with its message in l.
func (d *decision) in(l views.Lang) *decision {
	if d.words != nil {
		d.Message = d.words(l)
	}
	return d
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
	if err != nil && htmx && errors.As(err, &se) && (se.Code == store.CodeConflict || se.Code == store.CodeForbidden || se.Code == store.CodeInvalid) {
		// htmx does not swap a 4xx answer by default, and these words are
		// the answer the person clicked for.
		return render(c, http.StatusOK, views.DecisionResult(sentence(langOf(c).Refusal(se)), nil))
	}
	if err != nil {
		return err
	}
	d.in(langOf(c))
	if htmx {
		return render(c, http.StatusOK, views.DecisionResult(d.Message, nil))
	}
	if err := h.keepAnswer(c, d.Run.ID, d.Message); err != nil {
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
	return c.JSON(http.StatusOK, d.in(viewerLang(c)))
}

// answerKey is the session key of the answer to a decision on one run, so
// a run's page never shows the answer about another.
func answerKey(runID uuid.UUID) string { return "answer:" + runID.String() }

// keepAnswer keeps a plain form's answer for the run page it is sent back
// to. Only the latest answer is kept: the session stays small however many
// decisions are made without their page being seen.
func (h *Handler) keepAnswer(c echo.Context, runID uuid.UUID, msg string) error {
	s := h.session(c)
	for k := range s.Values {
		if key, ok := k.(string); ok && strings.HasPrefix(key, "answer:") {
			delete(s.Values, k)
		}
	}
	s.AddFlash(msg, answerKey(runID))
	if err := s.Save(c.Request(), c.Response()); err != nil {
		return fmt.Errorf("handlers: save answer: %w", err)
	}
	return nil
}

// takeAnswer returns and forgets the answer kept for the run's page.
func (h *Handler) takeAnswer(c echo.Context, runID uuid.UUID) string {
	s := h.session(c)
	flashes := s.Flashes(answerKey(runID))
	if len(flashes) == 0 {
		return ""
	}
	msg, _ := flashes[0].(string)
	if err := s.Save(c.Request(), c.Response()); err != nil {
		h.log.Warn("forget answer", "err", err)
	}
	return msg
}
