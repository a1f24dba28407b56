package agent

import (
	"context"
	"fmt"

	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// Ledger reads the provider's whole ledger (the simulated provider has it;
// a real one would offer a report).
type Ledger interface {
	Ledger(ctx context.Context) ([]payments.Receipt, error)
}

// VerifyLedger compares our operation ledger with the provider's: every
// refund the provider committed must be an operation of ours with the same
// amount, and every operation we call succeeded must be one the provider
// committed, under the same reference. It returns one line per mismatch.
func VerifyLedger(ctx context.Context, st *store.Store, provider Ledger) ([]string, error) {
	receipts, err := provider.Ledger(ctx)
	if err != nil {
		return nil, fmt.Errorf("agent: read the provider's ledger: %w", err)
	}
	ops, err := st.AllOperations(ctx)
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]payments.Receipt, len(receipts))
	for _, rc := range receipts {
		byKey[rc.Key] = rc
	}
	var problems []string
	ours := make(map[string]bool, len(ops))
	for _, op := range ops {
		key := op.ID.String()
		ours[key] = true
		rc, found := byKey[key]
		switch {
		case op.State == store.OpSucceeded && !found:
			problems = append(problems, fmt.Sprintf("operation %s succeeded here but the provider has no refund under its key", key))
		case op.State == store.OpSucceeded && (rc.Status != payments.StatusSucceeded || rc.Ref != op.ProviderRef.String):
			problems = append(problems, fmt.Sprintf("operation %s succeeded with reference %q but the provider says %s, %q", key, op.ProviderRef.String, rc.Status, rc.Ref))
		case op.State == store.OpFailed && found && rc.Status == payments.StatusSucceeded:
			problems = append(problems, fmt.Sprintf("operation %s is failed here but the provider refunded it (%s)", key, rc.Ref))
		case found && rc.Amount != op.Amount:
			problems = append(problems, fmt.Sprintf("operation %s is for %d but the provider refunded %d", key, op.Amount, rc.Amount))
		}
	}
	for _, rc := range receipts {
		if !ours[rc.Key] {
			problems = append(problems, fmt.Sprintf("the provider has refund %s (%s) that matches no operation", rc.Key, rc.Ref))
		}
	}
	return problems, nil
}
