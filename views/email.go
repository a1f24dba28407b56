package views

import (
	"strconv"
	"strings"
	"time"

	"github.com/refundd/refundd/store"
)

// Email is the words of one email: its subject and its plain-text body.
// Emails say what a page says (Words, FamilyWords), in the words of the
// page the link opens, for the one person the email is to; only their
// subject and the lines around the link are their own, and live here.
type Email struct {
	Subject string
	Body    string
}

// EndedEmail is the email to the owner of a request of one order (v, seen
// as its owner) once it has ended: the page's outcome, its final answer and
// the lines beside it, then a link to the run (link).
func EndedEmail(v *RunView, link string) Email {
	w := v.Words()
	return Email{
		Subject: "Your refund of " + orderWords(v.Run) + ": " + w.Status,
		Body:    paragraphs(w.Outcome, w.Answer, w.Actor, w.Reason, w.Detail, runLine(v.Run), seeIt+link),
	}
}

// RequestEndedEmail is the email to the owner of a request of several
// orders (f, seen as its owner) once its last refund has ended: one email
// for the whole request, in the words of the request's page.
func RequestEndedEmail(f *FamilyView, link string) Email {
	w := f.Words()
	return Email{
		Subject: "Your refund request for " + countOf(len(f.Children()), "order", "orders") + ": " + w.Status,
		Body:    paragraphs(w.Outcome, w.Answer, quotedReason(f.Parent().Run.Reason), seeIt+link),
	}
}

// WaitingEmail is the email to an approver (v, seen by them) when a
// request of one order starts waiting for a decision. Worded when the
// wait is fanned out: a request decided by then is told as it stands, and
// never as waiting.
func WaitingEmail(v *RunView, link string) Email {
	w := v.Words()
	if !waitsForDecision(v) {
		return Email{
			Subject: "A refund of " + orderWords(v.Run) + " asked for a decision",
			Body:    paragraphs(decidedSince, w.Status, w.Approved, w.Pending, w.Outcome, w.Reason, runLine(v.Run), seeIt+link),
		}
	}
	return Email{
		Subject: "A refund of " + orderWords(v.Run) + " waits for your decision",
		Body:    paragraphs(w.Status, runLine(v.Run), decideBy(w.DecideBy), decideAt+link),
	}
}

// RequestWaitingEmail is the email to an approver (f, seen by them) when a
// request of several orders starts waiting for a decision: one email for
// the request, however many of its refunds wait, worded as WaitingEmail.
func RequestWaitingEmail(f *FamilyView, link string) Email {
	w := f.Words()
	waiting := f.Waiting()
	subject := "A refund request for " + countOf(len(f.Children()), "order", "orders")
	if len(waiting) == 0 {
		return Email{
			Subject: subject + " asked for a decision",
			Body:    paragraphs(decidedSince, w.Status, w.Outcome, w.Answer, quotedReason(f.Parent().Run.Reason), seeIt+link),
		}
	}
	var due time.Time
	for _, c := range waiting {
		if by := c.Words().DecideBy; !by.IsZero() && (due.IsZero() || by.Before(due)) {
			due = by
		}
	}
	return Email{
		Subject: subject + " waits for your decision",
		Body: paragraphs(w.Status, w.Outcome, "Waiting for a decision: "+waitingWords(waiting)+".",
			quotedReason(f.Parent().Run.Reason), decideBy(due), decideAt+link),
	}
}

// waitsForDecision reports whether the run waits for an approver's
// decision, as the request's page counts it (FamilyView.Waiting).
func waitsForDecision(v *RunView) bool {
	return v.State == store.StateAwaitingApproval && !v.CancelRequested
}

// decidedSince leads a waiting email whose request was decided, or ended,
// before the email was written.
const decidedSince = "This request asked for a decision; it no longer waits for one. Where it stands now:"

// The lines that lead to the link.
const (
	seeIt    = "See it: "
	decideAt = "Approve or cancel it: "
)

// orderWords names a run's refund: "€5.00 for order #7".
func orderWords(r *store.Run) string {
	return store.FormatMoney(r.Amount, r.Currency) + " for order #" + strconv.FormatInt(r.OrderID, 10)
}

// runLine is what the run page says under its status: the amount, the
// order and the reason the customer gave.
func runLine(r *store.Run) string {
	return store.FormatMoney(r.Amount, r.Currency) + " · order #" + strconv.FormatInt(r.OrderID, 10) + " · " + quotedReason(r.Reason)
}

// quotedReason is the customer's reason as the pages quote it.
func quotedReason(reason string) string { return "“" + reason + "”" }

// decideBy is the deadline's sentence (DecideByLead … DecideByTail), ""
// when no deadline binds the decision.
func decideBy(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return DecideByLead + deadlineText(t) + DecideByTail
}

// paragraphs joins the non-empty lines of a body, a blank line between.
func paragraphs(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(l)
	}
	b.WriteString("\n")
	return b.String()
}
