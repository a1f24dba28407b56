package views

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/refundd/refundd/store"
)

// Answers is the words table's final answers: the one message a run ends
// with (store.FinalMessage, the API's final_message), worded from the facts
// of its end by whoever ends it. main gives it to the store
// (store.WithAnswers: a decision nobody made, a request's end) and to the
// agent (agent.Config.Answers: every other ending), so the words live here
// and store/ and agent/ pass facts.
type Answers struct{}

// Expired is the answer of a run nobody decided within window.
func (Answers) Expired(window time.Duration) string {
	return "No approver decided within " + store.FormatWindow(window) +
		", so the system canceled this refund request. Nothing was refunded and no money moved."
}

// Request is a finished request's answer: what the payment provider
// refunded of what was asked, then each order's end in a word. Each
// refund's own answer stays on its own page and card (a request's page
// shows both, so this repeats none of them).
func (Answers) Request(children []store.ChildEnding, currency string) string {
	var asked, refunded int64
	ends := make([]string, len(children))
	for i, k := range children {
		asked += k.Amount
		refunded += k.Refunded
		end := "not refunded"
		switch {
		case k.Refunded > 0:
			end = "refunded " + store.FormatMoney(k.Refunded, currency)
		case k.State == store.StateCanceled && k.Expired:
			end = "canceled (no approver decided in time)"
		case k.State == store.StateCanceled:
			end = "canceled"
		case k.Declined:
			end = "declined by the payment provider"
		}
		ends[i] = fmt.Sprintf("order #%d %s", k.OrderID, end)
	}
	lead := "Refunded " + store.FormatMoney(refunded, currency) + " of " + store.FormatMoney(asked, currency)
	if refunded == 0 {
		lead = "Nothing was refunded of " + store.FormatMoney(asked, currency) + " asked; no money moved"
	}
	return lead + ": " + strings.Join(ends, ", ") + "."
}

// OrderMissing: the run's order does not exist.
func (Answers) OrderMissing() string {
	return "The order for this refund could not be found, so nothing was refunded."
}

// DoesNotFit: the refund asked is not one of the order (another currency,
// more than was paid).
func (Answers) DoesNotFit(amount int64, currency string, orderID, paid int64, paidCurrency string) string {
	return fmt.Sprintf("This refund of %s does not fit order #%d (paid %s), so nothing was refunded.",
		store.FormatMoney(amount, currency), orderID, store.FormatMoney(paid, paidCurrency))
}

// OverLimit: the policy leaves refunds above limit to a person.
func (Answers) OverLimit(limit int64, currency string) string {
	return fmt.Sprintf("Refunds above %s need a person: support decides them, not the agent. Nothing was refunded.",
		store.FormatMoney(limit, currency))
}

// OverPaid: the refund would take the order's refunds past what was paid.
func (Answers) OverPaid() string {
	return "This refund would take the order's refunds past what was paid, so nothing was refunded."
}

// Declined: the payment provider refused the refund of op, for its reason.
func (Answers) Declined(amount int64, currency, reason string) string {
	return fmt.Sprintf("The payment provider did not refund %s (%s). No money moved.",
		store.FormatMoney(amount, currency), cmp.Or(reason, "declined"))
}

// ProviderRefused: the provider refused the request (outage: it was
// unavailable for longer than the outage budget).
func (Answers) ProviderRefused(outage bool) string {
	if outage {
		return "The payment provider could not take the refund after several tries. Nothing was refunded."
	}
	return "The payment provider refused this refund request. Nothing was refunded."
}

// Refunded: the provider confirmed the refund (tooLate: a cancel was asked
// for after it had reached the provider).
func (Answers) Refunded(amount int64, currency, ref string, tooLate bool) string {
	msg := fmt.Sprintf("Refunded %s to the original payment method. The payment provider's reference is %s.",
		store.FormatMoney(amount, currency), ref)
	if tooLate {
		return cancelTooLate + msg
	}
	return msg
}

const cancelTooLate = "The cancel arrived too late: the refund had already reached the payment provider. "

// Canceled: a cancel came in time (providerAsked: the provider confirmed
// it made no refund).
func (Answers) Canceled(providerAsked bool) string {
	if providerAsked {
		return "Canceled before the refund reached the payment provider, which confirmed that no refund was made. No money moved."
	}
	return "Canceled. No refund was made and no money moved."
}

// lost is how a refund found after a failover was made.
const lost = "before the database lost its record of it (a database failover); it was found there by this request's key"

// FoundOther: after a failover the provider holds, under this request's
// key, a refund of other details: it is not adopted.
func (Answers) FoundOther(amount int64, currency, orderRef, ref string) string {
	return fmt.Sprintf("The payment provider already holds a refund of %s for order %s under this request's key (reference %s), made %s. "+
		"It does not match this request, so nothing more was refunded; support can look into it.",
		store.FormatMoney(amount, currency), orderRef, ref, lost)
}

// FoundRefunded: after a failover the provider held this run's refund.
func (a Answers) FoundRefunded(amount int64, currency, ref string, tooLate bool) string {
	msg := fmt.Sprintf("Refunded %s to the original payment method. The payment provider's reference is %s. "+
		"The payment provider had made this refund %s, and it was not made again.", store.FormatMoney(amount, currency), ref, lost)
	if tooLate {
		return cancelTooLate + msg
	}
	return msg
}

// FoundDeclined: after a failover the provider had declined this run's
// refund (canceled: a cancel was asked for meanwhile).
func (Answers) FoundDeclined(amount int64, currency, reason string, canceled bool) string {
	msg := fmt.Sprintf("The payment provider had declined this refund of %s (%s) %s. No money moved.",
		store.FormatMoney(amount, currency), reason, lost)
	if canceled {
		return "Canceled. " + msg
	}
	return msg
}
