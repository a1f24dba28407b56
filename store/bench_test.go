package store_test

// Store benchmarks: the append path (one hot run, and spread over 1,000
// runs), both alone (Store.Append, one autocommit statement) and inside a
// state change's transaction (Store.Mutate), replay of a 10,000-event log,
// and a snapshot of a finished run.
//
// By default they run on storetest's throwaway cluster, which is on tmpfs
// with fsync off: good for spotting CPU regressions, meaningless as a
// throughput figure. For figures comparable with production (and with the
// pgbench ceiling in docs/PERFORMANCE.md), point REFUNDD_BENCH_URL at a
// database on a durable cluster (fsync on); it is migrated and gets fresh
// rows under a new user on every run:
//
//	REFUNDD_BENCH_URL='postgres://postgres@/refundd?host=/tmp/benchpg/run&port=5499&sslmode=disable' \
//	    go test -run '^$' -bench . -benchtime 8s ./store/

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
	"github.com/refundd/refundd/views"
)

// benchClients are the concurrent appenders measured, the same client counts
// as the pgbench ceiling.
var benchClients = []int{1, 4, 8}

// benchNarration is the payload of every appended event: one narration delta
// of realistic size (the pgbench script inserts the same JSON).
var benchNarration = store.NarrationDelta{Text: "I checked the order: it was paid in full and delivered on time. "}

var benchSeq atomic.Int64

// benchEnv is a store with a fresh customer and a large paid order.
type benchEnv struct {
	s        *store.Store
	customer *store.User
	approver *store.User
	order    *store.Order
	tag      string
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	ctx := context.Background()
	var s *store.Store
	if u := os.Getenv("REFUNDD_BENCH_URL"); u != "" {
		var err error
		if s, err = store.Open(ctx, u, store.WithAnswers(views.Answers{})); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		if err := s.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
	} else {
		s = storetest.MustOpen(b)
	}
	// Runs left by earlier invocations stay in a REFUNDD_BENCH_URL database:
	// a unique tag keeps this invocation's users apart.
	tag := fmt.Sprintf("%s-%d", uuid.NewString()[:8], benchSeq.Add(1))
	c, err := s.CreateUser(ctx, "bench-c-"+tag+"@example.com", "Bench customer", store.RoleCustomer, "pw", store.GrantRefundAccess)
	if err != nil {
		b.Fatal(err)
	}
	a, err := s.CreateUser(ctx, "bench-a-"+tag+"@example.com", "Bench approver", store.RoleApprover, "pw")
	if err != nil {
		b.Fatal(err)
	}
	o, err := s.CreateOrder(ctx, c.ID, "Bench order", 1_000_000_000, "EUR")
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{s: s, customer: c, approver: a, order: o, tag: tag}
}

// startRuns starts n runs of 1 cent each on the env's order.
func (e *benchEnv) startRuns(b *testing.B, n int) []uuid.UUID {
	b.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		r, _, err := e.s.StartRun(context.Background(), store.StartRequest{
			OwnerID: e.customer.ID, ClientRequestID: fmt.Sprintf("bench-%s-%d", e.tag, i),
			OrderID: e.order.ID, Amount: 1, Reason: "benchmark",
		})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = r.ID
	}
	return ids
}

// runClients runs b.N calls of op spread over exactly clients goroutines.
// With as many goroutines as a multiple of GOMAXPROCS it is b.RunParallel;
// otherwise (one client, say) a plain pool sharing an atomic counter.
// Each goroutine gets its own random source.
func runClients(b *testing.B, clients int, op func(rng *rand.Rand) error) {
	b.Helper()
	var seed atomic.Uint64
	newRng := func() *rand.Rand { s := seed.Add(1); return rand.New(rand.NewPCG(s, s*0x9e3779b97f4a7c15)) }
	procs := runtime.GOMAXPROCS(0)
	cpu0 := processCPU()
	b.ResetTimer()
	if clients%procs == 0 {
		b.SetParallelism(clients / procs)
		b.RunParallel(func(pb *testing.PB) {
			rng := newRng()
			for pb.Next() {
				if err := op(rng); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := newRng()
				for next.Add(1) <= int64(b.N) {
					if err := op(rng); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	// The client's own CPU per append (user+sys of this process): on a
	// 2-core machine it is taken from the server.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "client-cpu-us/op")
}

// processCPU is the user+sys CPU time this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAppend_HotRun appends one narration event at a time to a single
// run from 1, 4 and 8 goroutines: every append waits for the run's row lock.
func BenchmarkAppend_HotRun(b *testing.B) {
	e := newBenchEnv(b)
	run := e.startRuns(b, 1)[0]
	ev := store.EventOf(benchNarration)
	for _, c := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) {
			runClients(b, c, func(*rand.Rand) error {
				_, err := e.s.Append(context.Background(), run, ev)
				return err
			})
		})
	}
}

// BenchmarkAppend_Spread1000Runs appends to runs picked at random among
// 1,000, as pgbench's random(1, 1000) does: appends rarely share a row lock.
func BenchmarkAppend_Spread1000Runs(b *testing.B) {
	e := newBenchEnv(b)
	runs := e.startRuns(b, 1000)
	ev := store.EventOf(benchNarration)
	for _, c := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) {
			runClients(b, c, func(rng *rand.Rand) error {
				_, err := e.s.Append(context.Background(), runs[rng.IntN(len(runs))], ev)
				return err
			})
		})
	}
}

// benchMutate appends ev through Store.Mutate, the path of every state
// change: BEGIN, the run locked with SELECT ... FOR UPDATE, the append
// statement inside the transaction, COMMIT. The mutation keeps the run's
// state, so it can repeat.
func benchMutate(e *benchEnv, run uuid.UUID, ev store.NewEvent) error {
	_, _, err := e.s.Mutate(context.Background(), run, func(_ *sqlx.Tx, _ *store.Run) (string, []store.NewEvent, error) {
		return "", []store.NewEvent{ev}, nil
	})
	return err
}

// BenchmarkMutate_HotRun appends one event at a time to a single run through
// Store.Mutate from 1, 4 and 8 goroutines.
func BenchmarkMutate_HotRun(b *testing.B) {
	e := newBenchEnv(b)
	run := e.startRuns(b, 1)[0]
	ev := store.EventOf(benchNarration)
	for _, c := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) {
			runClients(b, c, func(*rand.Rand) error { return benchMutate(e, run, ev) })
		})
	}
}

// BenchmarkMutate_Spread1000Runs appends through Store.Mutate to runs picked
// at random among 1,000.
func BenchmarkMutate_Spread1000Runs(b *testing.B) {
	e := newBenchEnv(b)
	runs := e.startRuns(b, 1000)
	ev := store.EventOf(benchNarration)
	for _, c := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) {
			runClients(b, c, func(rng *rand.Rand) error { return benchMutate(e, runs[rng.IntN(len(runs))], ev) })
		})
	}
}

// BenchmarkReplay10k reads a 10,000-event log from the start in pages of
// 500, as a reconnecting stream does.
func BenchmarkReplay10k(b *testing.B) {
	const total, page, batch = 10_000, 500, 500
	ctx := context.Background()
	e := newBenchEnv(b)
	run := e.startRuns(b, 1)[0]
	evs := make([]store.NewEvent, batch)
	for i := range evs {
		evs[i] = store.EventOf(benchNarration)
	}
	for n := 1; n < total; n += batch { // run.created is seq 1
		k := min(batch, total-n)
		if _, err := e.s.Append(ctx, run, evs[:k]...); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		var cursor int64
		read := 0
		for {
			got, err := e.s.EventsAfter(ctx, run, cursor, page)
			if err != nil {
				b.Fatal(err)
			}
			if len(got) == 0 {
				break
			}
			read += len(got)
			cursor = got[len(got)-1].Seq
		}
		if read != total {
			b.Fatalf("replayed %d events, want %d", read, total)
		}
	}
	b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkSnapshot reads a finished run with a realistic log of about 50
// events: creation, planning, narration, approval, one refund operation,
// the final message and completion.
func BenchmarkSnapshot(b *testing.B) {
	ctx := context.Background()
	e := newBenchEnv(b)
	run := e.startRuns(b, 1)[0]
	must := func(err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
	}
	_, _, err := e.s.Mutate(ctx, run, func(_ *sqlx.Tx, _ *store.Run) (string, []store.NewEvent, error) {
		return store.StatePlanning, []store.NewEvent{store.EventOf(store.RunPlanning{})}, nil
	})
	must(err)
	for range 40 {
		_, err := e.s.Append(ctx, run, store.EventOf(benchNarration))
		must(err)
	}
	_, err = e.s.RequestApproval(ctx, run, store.ActionProposed{Action: "refund", Amount: 1, Currency: "EUR"})
	must(err)
	_, err = e.s.Approve(ctx, run, e.approver.ID, "")
	must(err)
	op, err := e.s.SubmitOperation(ctx, run)
	must(err)
	_, err = e.s.RecordOutcome(ctx, op.ID, store.Outcome{State: store.OpSucceeded, ProviderRef: "bench-ref"})
	must(err)
	_, err = e.s.FinishRun(ctx, run, store.StateCompleted, store.Say("Your refund of €0.01 is on its way."))
	must(err)

	b.ResetTimer()
	var n int
	for b.Loop() {
		snap, err := e.s.Snapshot(ctx, run)
		if err != nil {
			b.Fatal(err)
		}
		n = len(snap.Events)
	}
	if n < 45 {
		b.Fatalf("snapshot has %d events, want about 50", n)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "snapshots/s")
	b.ReportMetric(float64(n), "events/snapshot")
}

// BenchmarkNarration compares the two ways narration can be written, in
// the same run and interleaved by client count: durable (Store.Append,
// one fully durable autocommit statement per piece, what narration used
// to do) and batched (Store.AppendNarration: pieces of every run gathered
// into one transaction committed with synchronous_commit=off). Clients are
// runs narrating at once, spread over 1,000 runs. Issue 12 asks batched ≥ 3×
// durable; the figure is only meaningful on a durable cluster
// (REFUNDD_BENCH_URL): on tmpfs with fsync off both are CPU-bound.
func BenchmarkNarration(b *testing.B) {
	e := newBenchEnv(b)
	runs := e.startRuns(b, 1000)
	ev := store.EventOf(benchNarration)
	text := benchNarration.Text
	for _, c := range []int{8, 64, 256} {
		b.Run(fmt.Sprintf("durable/clients=%d", c), func(b *testing.B) {
			runClients(b, c, func(rng *rand.Rand) error {
				_, err := e.s.Append(context.Background(), runs[rng.IntN(len(runs))], ev)
				return err
			})
		})
		b.Run(fmt.Sprintf("batched/clients=%d", c), func(b *testing.B) {
			runClients(b, c, func(rng *rand.Rand) error {
				return e.s.AppendNarration(context.Background(), runs[rng.IntN(len(runs))], text)
			})
		})
	}
}

// BenchmarkStreamOpen: what opening a stream reads, as one statement
// (StreamOpen) and as the two lookups it replaces (UserBySession, then
// RunForAccess), alternated in each iteration so both share the moment.
func BenchmarkStreamOpen(b *testing.B) {
	ctx := context.Background()
	e := newBenchEnv(b)
	run := e.startRuns(b, 1)[0]
	sid, err := e.s.CreateSession(ctx, e.customer.ID, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	var one, two time.Duration
	for b.Loop() {
		began := time.Now()
		if _, _, _, err := e.s.StreamOpen(ctx, &store.StreamCredential{SessionID: sid, RunID: run}); err != nil {
			b.Fatal(err)
		}
		one += time.Since(began)
		began = time.Now()
		if _, err := e.s.UserBySession(ctx, sid); err != nil {
			b.Fatal(err)
		}
		if _, _, err := e.s.RunForAccess(ctx, run); err != nil {
			b.Fatal(err)
		}
		two += time.Since(began)
	}
	b.ReportMetric(float64(one.Microseconds())/float64(b.N), "µs/StreamOpen")
	b.ReportMetric(float64(two.Microseconds())/float64(b.N), "µs/two-lookups")
	b.ReportMetric(float64(one)/float64(two), "ratio")
}
