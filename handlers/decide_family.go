package handlers

import (
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// What a decision on a request did to one of its refunds, beyond the
// single run's results: the refund had already ended, or it was not the
// approver's to approve (it does not wait for an approval).
const (
	resultRunFinished = "finished"
	resultRefused     = "refused"
)

// childDecision is what a decision on a request did to one of its refunds.
type childDecision struct {
	RunID   uuid.UUID `json:"run_id"`
	OrderID int64     `json:"order_id"`
	State   string    `json:"state"`
	Result  string    `json:"result"`
}

// familyForApprover is the request (parent run) an approver decides on:
// theirs to see when any of its refunds asked for an approval, else the
// 404 (notFound) of a run that does not exist.
func (h *Handler) familyForApprover(c echo.Context, run *store.Run, notFound error) (*store.Run, error) {
	asked, err := h.store.FamilyAskedApproval(c.Request().Context(), run.ID)
	switch {
	case err != nil:
		return nil, err
	case !asked:
		return nil, notFound
	}
	return run, nil
}

// approveFamily approves the request's refunds that wait for an approval:
// all of them, or, from the queue's "Approve all", the ones the approver
// was shown (the form's run fields). A repeat approves nothing twice.
func (h *Handler) approveFamily(c echo.Context, run *store.Run, u *store.User) (*decision, error) {
	form, err := c.FormParams()
	if err != nil {
		form = nil // a JSON or empty body names no refund: all of them
	}
	var only []uuid.UUID
	for _, raw := range form["run"] {
		id, err := uuid.Parse(strings.TrimSpace(raw))
		if err != nil {
			return nil, store.Refuse(store.CodeInvalid, "refuse.not_of_request", nil)
		}
		only = append(only, id)
	}
	fd, err := h.store.ApproveFamily(c.Request().Context(), run.ID, u.ID, decisionReason(c, u), only)
	if err != nil {
		return nil, err
	}
	return wordedFamily(fd, approveWords, familyApproveMessage)
}

// cancelFamily cancels the request: the store records the cancel on it and
// on every refund of it not yet ended, in one transaction.
func (h *Handler) cancelFamily(c echo.Context, run *store.Run, u *store.User) (*decision, error) {
	fd, err := h.store.CancelFamily(c.Request().Context(), run.ID, u.ID, decisionReason(c, u))
	if err != nil {
		return nil, err
	}
	return wordedFamily(fd, cancelWords, familyCancelMessage(run.CancelRequested()))
}

// wordedFamily is worded for a decision on a request: the request's result
// and words, and each refund's result.
func wordedFamily(fd store.FamilyDecision, words func(store.DecisionOutcome) (string, string),
	message func(views.Lang, store.FamilyDecision) string) (*decision, error) {
	d, err := worded(fd.Decision, words)
	if err != nil {
		return nil, err
	}
	d.words = func(l views.Lang) string { return message(l, fd) }
	d.Message = d.words(views.English)
	for _, cd := range fd.Children {
		result, _ := words(cd.Outcome)
		switch cd.Outcome {
		case store.DecisionRunFinished:
			result = resultRunFinished
		case store.DecisionNotAllowed:
			result = resultRefused
		}
		d.Children = append(d.Children, childDecision{RunID: cd.Run.ID, OrderID: cd.Run.OrderID, State: cd.Run.State, Result: result})
	}
	return d, nil
}

// decidedCount is how many of a request's refunds a decision left with outcome o.
func decidedCount(fd store.FamilyDecision, o store.DecisionOutcome) int {
	n := 0
	for _, cd := range fd.Children {
		if cd.Outcome == o {
			n++
		}
	}
	return n
}

// refundsWord is n refunds, in l's words.
func refundsWord(l views.Lang, n int) map[string]any {
	return map[string]any{"Refunds": l.T("decision.refunds", map[string]any{"Count": n})}
}

// familyApproveMessage words an approval of a request's refunds: what it
// approved, what had been approved before, what no longer waited. Like a
// single run's answer, it says what happened, never what will.
func familyApproveMessage(l views.Lang, fd store.FamilyDecision) string {
	done, before := decidedCount(fd, store.DecisionAccepted), decidedCount(fd, store.DecisionAlreadyMade)
	msg := l.T("decision.family.approved", refundsWord(l, done))
	if done == 0 {
		msg = l.T("decision.family.already_all")
		if before == 1 {
			msg = l.T("decision.family.already_one")
		}
	} else if before > 0 {
		msg += l.T("decision.family.before", refundsWord(l, before))
	}
	if n := len(fd.Children) - done - before; n > 0 {
		msg += l.T("decision.family.no_longer", refundsWord(l, n))
	}
	return msg
}

// familyCancelMessage words a cancel of a request; asked says a cancel of
// it had been asked for before this one (the run as read before it). The
// refunds too late to stop are counted, as a single run's too_late says.
func familyCancelMessage(asked bool) func(views.Lang, store.FamilyDecision) string {
	return func(l views.Lang, fd store.FamilyDecision) string {
		late := decidedCount(fd, store.DecisionTooLate)
		msg := l.T("decision.family.cancel")
		if asked || fd.Outcome == store.DecisionAlreadyMade {
			msg = l.T("decision.family.already_canceling")
		}
		if late > 0 {
			msg += l.T("decision.family.too_late", refundsWord(l, late))
		}
		return msg
	}
}
