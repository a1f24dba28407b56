package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// Asking again (DESIGN.md rule 19): a request that ended without a refund
// may be asked again as a new request, under a key of its own, that names
// the old run (Run.RetryOf). The old run, its log and its operations are
// only read, never written: what the provider was sent stays as it was,
// and the new request's refunds are checked against what is still
// refundable like any other start's.

// AskAgain is a run its owner may ask again for, and what asking again
// copies of it: the orders and amounts that ended without a refund (the
// run's own; of a request, those of its refunds that were not refunded,
// in family order) and, on Run, its reason.
type AskAgain struct {
	Run     *Run
	Refunds []RefundItem
}

// AskAgainOf reads the owner's run runID for asking again. A run that is
// not the owner's is a CodeNotFound *Error; one that refunded (a request
// all of whose refunds were made) or is still going is a CodeConflict
// *Error with the run's state.
func (s *Store) AskAgainOf(ctx context.Context, ownerID int64, runID uuid.UUID) (*AskAgain, error) {
	return askAgainOf(ctx, s.db, ownerID, runID)
}

// checkAskAgain refuses a start that asks again for a run it may not ask
// again for (AskAgainOf); a start that asks again for none passes. A run
// that ended stays as it ended, so what this reads cannot change before
// the start commits.
func checkAskAgain(ctx context.Context, tx *txn, ownerID int64, retryOf uuid.NullUUID) error {
	if !retryOf.Valid {
		return nil
	}
	_, err := askAgainOf(ctx, tx, ownerID, retryOf.UUID)
	return err
}

func askAgainOf(ctx context.Context, q sqlx.QueryerContext, ownerID int64, runID uuid.UUID) (*AskAgain, error) {
	// The run, then a request's refunds: a child has position 1 or more
	// and no children of its own, so the run itself always reads first.
	var rows []Run
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT `+runColumns+` FROM runs
        WHERE id = $1 OR parent_run_id = $1 ORDER BY parent_run_id NULLS FIRST, position`, runID); err != nil {
		return nil, fmt.Errorf("store: ask again: %w", err)
	}
	if len(rows) == 0 || rows[0].ID != runID || rows[0].OwnerID != ownerID {
		// Someone else's run is answered like a missing one.
		return nil, Refuse(CodeNotFound, "refuse.again_no_run", map[string]any{"Run": runID})
	}
	r := &rows[0]
	if !Terminal(r.State) {
		return nil, refuseIn(r.State, "refuse.again_still_going", nil)
	}
	a := &AskAgain{Run: r}
	if !r.IsParent() {
		if r.State == StateCompleted {
			return nil, refuseIn(r.State, "refuse.again_refunded", nil)
		}
		a.Refunds = []RefundItem{{OrderID: r.OrderID, Amount: r.Amount}}
		return a, nil
	}
	for _, k := range rows[1:] {
		if k.State != StateCompleted {
			a.Refunds = append(a.Refunds, RefundItem{OrderID: k.OrderID, Amount: k.Amount})
		}
	}
	if len(a.Refunds) == 0 {
		return nil, refuseIn(r.State, "refuse.again_all_refunded", nil)
	}
	return a, nil
}

// Retries are the links of one run's chain of asking again: the run it
// asks again for, the runs that ask again for it, and the whole chain,
// oldest first (the run itself among them), as lists show runs.
type Retries struct {
	Of    *RunListing
	Again []RunListing
	Chain []RunListing
}

// maxChain bounds the chain read for a page: a person asks again a few
// times, not thousands.
const maxChain = 100

// retryChainSQL reads a run's whole chain: up through retry_of to the
// first request, then down through every request that asks again for one
// of the chain. retry_of names an earlier run, so the chain has no cycle.
var retryChainSQL = `WITH RECURSIVE up (id, retry_of, depth) AS (
    SELECT id, retry_of, 0 FROM runs WHERE id = $1
    UNION ALL
    SELECT r.id, r.retry_of, up.depth + 1 FROM runs r JOIN up ON r.id = up.retry_of WHERE up.depth < $2
), down (id, depth) AS (
    SELECT id, 0 FROM (SELECT id FROM up ORDER BY depth DESC LIMIT 1) first
    UNION ALL
    SELECT r.id, down.depth + 1 FROM runs r JOIN down ON r.retry_of = down.id WHERE down.depth < $2
)
` + listingSelect + `WHERE r.id IN (SELECT id FROM down)
ORDER BY r.created_at, r.id LIMIT $2`

// RetriesOf reads run's chain of asking again. A run that goes on and
// asks again for none has none (it cannot have been asked again before
// it ended): nothing is read for it.
func (s *Store) RetriesOf(ctx context.Context, run *Run) (*Retries, error) {
	out := &Retries{}
	if !run.RetryOf.Valid && !Terminal(run.State) {
		return out, nil
	}
	if err := s.db.SelectContext(ctx, &out.Chain, retryChainSQL, run.ID, maxChain); err != nil {
		return nil, fmt.Errorf("store: retry chain: %w", err)
	}
	for i := range out.Chain {
		switch r := &out.Chain[i]; {
		case run.RetryOf.Valid && r.ID == run.RetryOf.UUID:
			out.Of = r
		case r.RetryOf.Valid && r.RetryOf.UUID == run.ID:
			out.Again = append(out.Again, *r)
		}
	}
	if len(out.Chain) < 2 {
		out.Chain = nil // a run on its own is no chain
	}
	return out, nil
}
