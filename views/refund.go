package views

import (
	"slices"
	"strconv"
	"strings"

	"github.com/refundd/refundd/store"
)

// Home is what the home page shows; each role uses its own fields.
type Home struct {
	Orders   []store.Order    // a customer's orders, with what is still refundable
	CanStart bool             // the customer may start refunds (refund_access)
	Form     StartForm        // the refund request form, fresh or as typed
	Queue    *store.QueuePage // a page of the approval queue (approvers)

	// Runs are a customer's runs, newest first, with their orders' items,
	// and the list's version.
	Runs *store.OwnRuns
}

// StartForm is the refund request form. RequestID is the hidden client
// request ID made when the form was first rendered: submitting the same form
// twice starts one run (or one request). The other fields are what the
// customer ticked and typed, kept when the form comes back with Error.
type StartForm struct {
	RequestID string
	Orders    []string          // the order IDs ticked, as posted
	Amounts   map[string]string // the amount typed for each order, by its ID as posted
	Reason    string
	Error     string
	// RetryOf is the run this form asks again for (a hidden field), ""
	// for a new request of its own.
	RetryOf string
}

// Ticked reports whether the order with this ID was ticked.
func (f StartForm) Ticked(orderID string) bool { return slices.Contains(f.Orders, orderID) }

// OrderRowID is the stable element ID of an order's row on the home page.
func OrderRowID(orderID int64) string { return "order-" + strconv.FormatInt(orderID, 10) }

// stateWords is a run state as the support search's filter names it;
// a listed run's status comes from ListWords.
func stateWords(state string) string { return strings.ReplaceAll(state, "_", " ") }

// runHref is where a run's page lives.
func runHref(id string) string { return "/runs/" + id }
