package outbound_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// runMaker makes runs with business events the way the executor does,
// through the store: a single request (created, planning, failed) or a
// family of three orders whose children end one by one.
type runMaker struct {
	st      *store.Store
	parties storetest.Parties
	n       atomic.Int64
}

func newRunMaker(t testing.TB, st *store.Store) *runMaker {
	t.Helper()
	return &runMaker{st: st, parties: storetest.MustSeedParties(t, st, 100_000_000)}
}

func (m *runMaker) key() string { return fmt.Sprintf("key-%d", m.n.Add(1)) }

// single makes one run and ends it: run.created, run.planning,
// message.final, run.failed.
func (m *runMaker) single(t testing.TB) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	run, _, err := m.st.StartRun(ctx, store.StartRequest{OwnerID: m.parties.Customer.ID, ClientRequestID: m.key(),
		OrderID: m.parties.Order.ID, Amount: 100, Reason: "it broke"})
	if err != nil {
		t.Fatal(err)
	}
	m.end(t, run.ID)
	return run.ID
}

func (m *runMaker) end(t testing.TB, id uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	if _, err := m.st.Transition(ctx, id, store.StateCreated, store.StatePlanning, store.EventOf(store.RunPlanning{})); err != nil {
		t.Fatal(err)
	}
	if _, err := m.st.Append(ctx, id, store.EventOf(store.NarrationDelta{Text: "looking"})); err != nil {
		t.Fatal(err)
	}
	if _, err := m.st.FinishRun(ctx, id, store.StateFailed, store.Say("No refund.")); err != nil {
		t.Fatal(err)
	}
}

// family makes a request of three orders and ends each child, which ends
// the parent: four runs, the parent's log with child.started and
// child.finished.
func (m *runMaker) family(t testing.TB) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	req := store.FamilyRequest{OwnerID: m.parties.Customer.ID, ClientRequestID: m.key(), Reason: "all late", MaxChildren: 10}
	for range 3 {
		o, err := m.st.CreateOrder(ctx, m.parties.Customer.ID, "Hat", 1000, "EUR")
		if err != nil {
			t.Fatal(err)
		}
		req.Refunds = append(req.Refunds, store.RefundItem{OrderID: o.ID, Amount: 500})
	}
	fam, _, err := m.st.StartFamily(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	ids := []uuid.UUID{fam.Parent.ID}
	for _, c := range fam.Children {
		m.end(t, c.ID)
		ids = append(ids, c.ID)
	}
	return ids
}

// many makes n runs, a family among them when n ≥ 4.
func (m *runMaker) many(t testing.TB, n int) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	if n >= 4 {
		ids = m.family(t)
	}
	for len(ids) < n {
		ids = append(ids, m.single(t))
	}
	return ids
}

// businessEvents are the seqs of each run's business events, in order.
func businessEvents(t testing.TB, st *store.Store, runs []uuid.UUID) map[uuid.UUID][]int64 {
	t.Helper()
	var rows []struct {
		RunID uuid.UUID `db:"run_id"`
		Seq   int64     `db:"seq"`
	}
	if err := storetest.DB(t, st).Select(&rows, `SELECT run_id, seq FROM run_events
        WHERE class = 'business' AND run_id = ANY ($1) ORDER BY run_id, seq`, uuidArray(runs)); err != nil {
		t.Fatal(err)
	}
	out := map[uuid.UUID][]int64{}
	for _, r := range rows {
		out[r.RunID] = append(out[r.RunID], r.Seq)
	}
	return out
}

func uuidArray(ids []uuid.UUID) any {
	s := "{"
	for i, id := range ids {
		if i > 0 {
			s += ","
		}
		s += id.String()
	}
	return s + "}"
}

// deliveryStates counts an endpoint's deliveries by state.
func deliveryStates(t testing.TB, st *store.Store, endpoint uuid.UUID) map[string]int {
	t.Helper()
	var rows []struct {
		State string `db:"state"`
		N     int    `db:"n"`
	}
	if err := storetest.DB(t, st).Select(&rows, `SELECT state, count(*) AS n FROM webhook_deliveries
        WHERE endpoint_id = $1 GROUP BY state`, endpoint); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.State] = r.N
	}
	return out
}

// allDelivered waits until the endpoint's want deliveries are all
// recorded delivered in PostgreSQL.
func allDelivered(t testing.TB, st *store.Store, endpoint uuid.UUID, want int, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("%d deliveries recorded delivered", want), func() bool {
		s := deliveryStates(t, st, endpoint)
		return s["delivered"] == want && s["pending"] == 0
	})
}

func total(m map[uuid.UUID][]int64) int {
	n := 0
	for _, s := range m {
		n += len(s)
	}
	return n
}

// wantVerified fails unless refundd verify finds the database consistent.
func wantVerified(t testing.TB, st *store.Store) {
	t.Helper()
	problems, err := st.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("verify: %s", p)
	}
}
