package views

import (
	"strconv"

	"github.com/refundd/refundd/store"
)

// pollSeconds is the run list's data-poll: RunListPoll while a run can
// still change, "" (no polling) once every run has ended.
func pollSeconds(runs []store.RunListing) string {
	for _, r := range runs {
		if !store.Terminal(r.State) {
			return strconv.Itoa(RunListPoll)
		}
	}
	return ""
}

// RunListPoll is how often, in seconds, the home page re-reads the status of
// runs that can still change (static/live-list.js).
const RunListPoll = 5

// refundOf names a run in a list: what, for which item, then its state.
func refundOf(r store.RunListing) string {
	return "Refund of " + store.FormatMoney(r.Amount, r.Currency) + " for " + r.Item + " — "
}
