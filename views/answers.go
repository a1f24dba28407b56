package views

import (
	"cmp"
	"strings"
	"time"

	"github.com/refundd/refundd/store"
)

// Answers is the words table's final answers: the one message a run ends
// with (store.FinalMessage, the API's final_message), worded from the facts
// of its end by whoever ends it. main gives it to the store
// (store.WithAnswers: a decision nobody made, a request's end) and to the
// agent (agent.Config.Answers: every other ending), so the words live here
// and store/ and agent/ pass facts. Each answer is written in every
// language the catalogues speak ("answer.*" keys), once, when the run
// ends: a page shows its viewer's.
type Answers struct{}

// say is the answer words writes in each language spoken.
func say(words func(l Lang) string) store.Answer {
	a := store.Answer{Body: words(English)}
	for _, t := range Catalogues.Tags() {
		if l := Catalogues.Lang(t); t != English.Tag {
			if a.In == nil {
				a.In = store.Translations{}
			}
			a.In[t.String()] = words(l)
		}
	}
	return a
}

// Expired is the answer of a run nobody decided within window.
func (Answers) Expired(window time.Duration) store.Answer {
	return say(func(l Lang) string { return l.T("answer.expired", map[string]any{"Window": l.Window(window)}) })
}

// Request is a finished request's answer: what the payment provider
// refunded of what was asked, then each order's end in a word. Each
// refund's own answer stays on its own page and card (a request's page
// shows both, so this repeats none of them).
func (Answers) Request(children []store.ChildEnding, currency string) store.Answer {
	var asked, refunded int64
	for _, k := range children {
		asked += k.Amount
		refunded += k.Refunded
	}
	return say(func(l Lang) string {
		ends := make([]string, len(children))
		for i, k := range children {
			end := l.T("answer.request.not_refunded")
			switch {
			case k.Refunded > 0:
				end = l.T("answer.request.refunded", map[string]any{"Amount": l.Money(k.Refunded, currency)})
			case k.State == store.StateCanceled && k.Expired:
				end = l.T("answer.request.expired")
			case k.State == store.StateCanceled:
				end = l.T("answer.request.canceled")
			case k.Declined:
				end = l.T("answer.request.declined")
			}
			ends[i] = l.T("answer.request.order", map[string]any{"Order": k.OrderID, "End": end})
		}
		data := map[string]any{"Refunded": l.Money(refunded, currency), "Asked": l.Money(asked, currency),
			"Ends": strings.Join(ends, l.T("answer.request.join"))}
		if refunded == 0 {
			return l.T("answer.request.nothing", data)
		}
		return l.T("answer.request.some", data)
	})
}

// OrderMissing: the run's order does not exist.
func (Answers) OrderMissing() store.Answer {
	return say(func(l Lang) string { return l.T("answer.order_missing") })
}

// DoesNotFit: the refund asked is not one of the order (another currency,
// more than was paid).
func (Answers) DoesNotFit(amount int64, currency string, orderID, paid int64, paidCurrency string) store.Answer {
	return say(func(l Lang) string {
		return l.T("answer.does_not_fit", map[string]any{"Amount": l.Money(amount, currency), "Order": orderID,
			"Paid": l.Money(paid, paidCurrency)})
	})
}

// OverLimit: the policy leaves refunds above limit to a person.
func (Answers) OverLimit(limit int64, currency string) store.Answer {
	return say(func(l Lang) string {
		return l.T("answer.over_limit", map[string]any{"Limit": l.Money(limit, currency)})
	})
}

// OverPaid: the refund would take the order's refunds past what was paid.
func (Answers) OverPaid() store.Answer {
	return say(func(l Lang) string { return l.T("answer.over_paid") })
}

// Declined: the payment provider refused the refund of op, for its reason
// (the provider's own words, as it gave them).
func (Answers) Declined(amount int64, currency, reason string) store.Answer {
	return say(func(l Lang) string {
		return l.T("answer.declined", map[string]any{"Amount": l.Money(amount, currency),
			"Reason": cmp.Or(reason, l.T("answer.declined_reason"))})
	})
}

// ProviderRefused: the provider refused the request (outage: it was
// unavailable for longer than the outage budget).
func (Answers) ProviderRefused(outage bool) store.Answer {
	return say(func(l Lang) string {
		if outage {
			return l.T("answer.provider_outage")
		}
		return l.T("answer.provider_refused")
	})
}

// Refunded: the provider confirmed the refund (tooLate: a cancel was asked
// for after it had reached the provider).
func (Answers) Refunded(amount int64, currency, ref string, tooLate bool) store.Answer {
	return say(func(l Lang) string {
		return tooLateLead(l, tooLate) + l.T("answer.refunded", map[string]any{"Amount": l.Money(amount, currency), "Ref": ref})
	})
}

// tooLateLead opens an answer whose cancel came after the refund had
// reached the provider.
func tooLateLead(l Lang, tooLate bool) string {
	if !tooLate {
		return ""
	}
	return l.T("answer.cancel_too_late")
}

// Canceled: a cancel came in time (providerAsked: the provider confirmed
// it made no refund).
func (Answers) Canceled(providerAsked bool) store.Answer {
	return say(func(l Lang) string {
		if providerAsked {
			return l.T("answer.canceled_provider_asked")
		}
		return l.T("answer.canceled")
	})
}

// FoundOther: after a failover the provider holds, under this request's
// key, a refund of other details: it is not adopted.
func (Answers) FoundOther(amount int64, currency, orderRef, ref string) store.Answer {
	return say(func(l Lang) string {
		return l.T("answer.found_other", map[string]any{"Amount": l.Money(amount, currency), "Order": orderRef,
			"Ref": ref, "Lost": l.T("answer.lost")})
	})
}

// FoundRefunded: after a failover the provider held this run's refund.
func (a Answers) FoundRefunded(amount int64, currency, ref string, tooLate bool) store.Answer {
	return say(func(l Lang) string {
		return tooLateLead(l, tooLate) + l.T("answer.found_refunded", map[string]any{"Amount": l.Money(amount, currency),
			"Ref": ref, "Lost": l.T("answer.lost")})
	})
}

// FoundDeclined: after a failover the provider had declined this run's
// refund (canceled: a cancel was asked for meanwhile).
func (Answers) FoundDeclined(amount int64, currency, reason string, canceled bool) store.Answer {
	return say(func(l Lang) string {
		lead := ""
		if canceled {
			lead = l.T("answer.canceled_lead")
		}
		return lead + l.T("answer.found_declined", map[string]any{"Amount": l.Money(amount, currency),
			"Reason": reason, "Lost": l.T("answer.lost")})
	})
}

// Say is key's words in the language tag lang ("" or a language not
// spoken: English), for words written outside a page: the built-in
// narrator's lines ("narration.*").
func (Answers) Say(lang, key string, data map[string]any) string {
	return Catalogues.Choose(lang, "").T(key, data)
}

// Money is an amount as the language tag lang writes it.
func (Answers) Money(lang string, minor int64, currency string) string {
	return Catalogues.Choose(lang, "").Money(minor, currency)
}
