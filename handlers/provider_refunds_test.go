package handlers_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

// fakeLedger is a payment provider's ledger as support's page reads it.
type fakeLedger struct {
	refunds []store.ProviderRefund
	err     error
}

func (l fakeLedger) Refunds(context.Context) ([]store.ProviderRefund, error) { return l.refunds, l.err }

var _ handlers.ProviderLedger = fakeLedger{}

// TestSupportProvider_ListsRefundsNoRunExplains: support's page lists the
// refunds the provider holds under a key no operation of ours has (made
// under a run a failover made the database forget), and only those; a
// provider that does not answer is said so in words.
func TestSupportProvider_ListsRefundsNoRunExplains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ledger := &fakeLedger{}
	a := newApp(t, handlers.Config{ProviderLedger: ledger})
	run := a.startRun(t, "customer@example.com", 500)
	if _, err := a.store.RequestApproval(ctx, run.ID, store.ActionProposed{Amount: 500}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.Approve(ctx, run.ID, a.user(t, "approver@example.com").ID, ""); err != nil {
		t.Fatal(err)
	}
	op, err := a.store.SubmitOperation(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	made := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	ledger.refunds = []store.ProviderRefund{
		{Key: op.ID.String(), Ref: "re_ours", OrderRef: "1", Amount: 500, Currency: "EUR", Status: "succeeded", CreatedAt: made},
		{Key: "3f0c8a8e-0000-5000-8000-000000000001", Ref: "re_lost", OrderRef: "1", Amount: 700, Currency: "EUR", Status: "succeeded", CreatedAt: made},
	}
	support := a.client(t)
	a.login(t, support, "support@example.com")

	res := a.get(t, support, "/support/provider")
	if res.status != http.StatusOK {
		t.Fatalf("GET /support/provider: %d", res.status)
	}
	doc := res.doc(t)
	rows := doc.Find("#provider-unexplained .provider-refund")
	if rows.Length() != 1 || rows.AttrOr("data-key", "") != ledger.refunds[1].Key || rows.Find("td").Eq(3).Text() != "€7.00" {
		t.Errorf("listed %d refunds (%q, %q), want only the one no run explains", rows.Length(), rows.AttrOr("data-key", ""), rows.Find("td").Eq(3).Text())
	}
	if got, want := doc.Find("#provider-unexplained-count").Text(), "1 of the 2 refunds the payment provider holds match no run of ours."; got != want {
		t.Errorf("count = %q, want %q", got, want)
	}

	ledger.refunds = ledger.refunds[:1]
	if got := a.get(t, support, "/support/provider").doc(t).Find("#provider-explained").Text(); got != "The one refund the payment provider holds is one of our runs'." {
		t.Errorf("all explained: %q", got)
	}
	ledger.err = errors.New("connection refused")
	if got := a.get(t, support, "/support/provider").doc(t).Find("#provider-unreadable").Text(); got == "" {
		t.Error("an unreadable ledger is not said so")
	}

	customer := a.client(t)
	a.login(t, customer, "customer@example.com")
	if res := a.get(t, customer, "/support/provider"); res.status != http.StatusForbidden {
		t.Errorf("a customer gets %d, want 403", res.status)
	}
}
