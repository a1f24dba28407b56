package views

import (
	"strings"
	"time"

	"github.com/refundd/refundd/store"
)

// Email is the words of one email: its subject and its plain-text body.
// Emails say what a page says (Words, FamilyWords), in the words of the
// page the link opens, for the one person the email is to and in their
// language (the Viewer's Lang: the one they saved, else English); only
// their subject and the lines around the link are their own, and live here
// and in the catalogues' email.* keys.
type Email struct {
	Subject string
	Body    string
}

// EndedEmail is the email to the owner of a request of one order (v, seen
// as its owner) once it has ended: the page's outcome, its final answer and
// the lines beside it, then a link to the run (link).
func EndedEmail(v *RunView, link string) Email {
	w, l := v.Words(), v.Viewer.Lang
	return Email{
		Subject: l.T("email.ended.subject", refundData(l, v.Run, "Status", w.Status)),
		Body:    paragraphs(w.Outcome, w.Answer, w.Actor, w.Reason, w.Detail, runLine(l, v.Run), seeIt(l, link)),
	}
}

// RequestEndedEmail is the email to the owner of a request of several
// orders (f, seen as its owner) once its last refund has ended: one email
// for the whole request, in the words of the request's page.
func RequestEndedEmail(f *FamilyView, link string) Email {
	w, l := f.Words(), f.Parent().Viewer.Lang
	return Email{
		Subject: l.T("email.request_ended.subject", map[string]any{"Orders": counted(l, "email.orders", len(f.Children())), "Status": w.Status}),
		Body:    paragraphs(w.Outcome, w.Answer, quotedReason(l, f.Parent().Run.Reason), seeIt(l, link)),
	}
}

// WaitingEmail is the email to an approver (v, seen by them) when a
// request of one order starts waiting for a decision. Worded when the
// wait is fanned out: a request decided by then is told as it stands, and
// never as waiting.
func WaitingEmail(v *RunView, link string) Email {
	w, l := v.Words(), v.Viewer.Lang
	if !waitsForDecision(v) {
		return Email{
			Subject: l.T("email.waiting_decided.subject", refundData(l, v.Run)),
			Body: paragraphs(l.T("email.decided_since"), w.Status, w.Approved, w.Pending, w.Outcome, w.Reason,
				runLine(l, v.Run), seeIt(l, link)),
		}
	}
	return Email{
		Subject: l.T("email.waiting.subject", refundData(l, v.Run)),
		Body:    paragraphs(w.Status, runLine(l, v.Run), decideBy(l, w.DecideBy), decideAt(l, link)),
	}
}

// RequestWaitingEmail is the email to an approver (f, seen by them) when a
// request of several orders starts waiting for a decision: one email for
// the request, however many of its refunds wait, worded as WaitingEmail.
func RequestWaitingEmail(f *FamilyView, link string) Email {
	w, l := f.Words(), f.Parent().Viewer.Lang
	waiting := f.Waiting()
	orders := map[string]any{"Orders": counted(l, "email.orders", len(f.Children()))}
	reason := quotedReason(l, f.Parent().Run.Reason)
	if len(waiting) == 0 {
		return Email{
			Subject: l.T("email.request_waiting_decided.subject", orders),
			Body:    paragraphs(l.T("email.decided_since"), w.Status, w.Outcome, w.Answer, reason, seeIt(l, link)),
		}
	}
	var due time.Time
	for _, c := range waiting {
		if by := c.Words().DecideBy; !by.IsZero() && (due.IsZero() || by.Before(due)) {
			due = by
		}
	}
	return Email{
		Subject: l.T("email.request_waiting.subject", orders),
		Body: paragraphs(w.Status, w.Outcome, l.T("email.waiting_for", map[string]any{"Refunds": waitingRefunds(l, waiting)}),
			reason, decideBy(l, due), decideAt(l, link)),
	}
}

// waitsForDecision reports whether the run waits for an approver's
// decision, as the request's page counts it (FamilyView.Waiting).
func waitsForDecision(v *RunView) bool {
	return v.State == store.StateAwaitingApproval && !v.CancelRequested
}

// seeIt and decideAt are the lines that lead to the link.
func seeIt(l Lang, link string) string {
	return l.T("email.see_it", map[string]any{"Link": link})
}

func decideAt(l Lang, link string) string {
	return l.T("email.decide_at", map[string]any{"Link": link})
}

// refundData is what a sentence about a run's refund fills in: its amount
// in l and its order's number, and more (name, value pairs).
func refundData(l Lang, r *store.Run, more ...string) map[string]any {
	data := map[string]any{"Amount": l.Money(r.Amount, r.Currency), "Order": r.OrderID}
	for i := 0; i+1 < len(more); i += 2 {
		data[more[i]] = more[i+1]
	}
	return data
}

// runLine is what the run page says under its status: the amount, the
// order and the reason the customer gave.
func runLine(l Lang, r *store.Run) string {
	return l.T("email.run_line", refundData(l, r, "Reason", quotedReason(l, r.Reason)))
}

// quotedReason is the customer's reason as the pages quote it.
func quotedReason(l Lang, reason string) string {
	return l.T("email.quoted", map[string]any{"Text": reason})
}

// counted is n things of key ("email.orders": "one order", "three
// orders", "3 个订单"): key.one for one, key.other for any other count.
func counted(l Lang, key string, n int) string {
	form := ".other"
	if n == 1 {
		form = ".one"
	}
	return l.T(key+form, map[string]any{"Count": n, "Words": numberWord(n)})
}

// waitingRefunds names the refunds an approval of all would approve: "the
// refund of €2.00 for order #7", "two refunds, €3.50 in all".
func waitingRefunds(l Lang, waiting []*RunView) string {
	if len(waiting) == 1 {
		return l.T("email.waiting_one", refundData(l, waiting[0].Run))
	}
	var sum int64
	for _, v := range waiting {
		sum += v.Run.Amount
	}
	return l.T("email.waiting_many", map[string]any{"Refunds": counted(l, "email.refunds", len(waiting)),
		"Amount": l.Money(sum, waiting[0].Run.Currency)})
}

// decideBy is the deadline's sentence, in l ("An approver may decide
// until …", as the run page words it), "" when no deadline binds the
// decision.
func decideBy(l Lang, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return l.T("email.decide_by", map[string]any{"Deadline": l.Time(t)})
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
