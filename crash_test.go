package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// buildBinary builds the real refundd binary once per test process.
func buildBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "refundd-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "refundd")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// process is a refundd subcommand running as a real OS process.
type process struct {
	cmd  *exec.Cmd
	out  *testkit.SyncBuffer
	done chan struct{}
}

// spawn starts `refundd <args>` with env and waits until it prints ready.
func spawn(t *testing.T, env []string, ready string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "LOG_LEVEL=warn"}, env...)
	p := &process{cmd: cmd, out: &testkit.SyncBuffer{}, done: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			p.out.Write([]byte(sc.Text() + "\n"))
			if strings.Contains(sc.Text(), ready) {
				once.Do(func() { close(started) })
			}
		}
	}()
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("refundd %s output:\n%s", args[0], p.out.String())
		}
	})
	select {
	case <-started:
	case <-p.done:
		t.Fatalf("refundd %s exited early:\n%s", args[0], p.out.String())
	case <-time.After(time.Minute):
		t.Fatalf("refundd %s not ready within a minute:\n%s", args[0], p.out.String())
	}
	return p
}

// kill sends SIGKILL: no cleanup, no deferred code, like a crash.
func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestCrash_WorkerKilledBetweenProviderCommitAndOurLog kills a worker with
// SIGKILL after the provider committed a refund and before the worker could
// log the outcome. A new worker must find out from the provider, not refund
// again.
func TestCrash_WorkerKilledBetweenProviderCommitAndOurLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.MustOpen(t)
	providerAddr := freeAddr(t)
	env := []string{"DATABASE_URL=" + st.URL(), "PROVIDER_ADDR=" + providerAddr,
		"PROVIDER_URL=http://" + providerAddr, "WORKER_LEASE=2s", "PROVIDER_SECRET=" + testProviderSecret}

	spawn(t, env, "simulated payment provider running", "provider")
	provider := payments.NewClient("http://"+providerAddr, 5*time.Second).WithSecret(testProviderSecret)
	defer provider.Close()
	// The provider will commit, then hold its answer.
	if err := provider.SetFaults(ctx, payments.Faults{HoldAfterCommit: true}); err != nil {
		t.Fatal(err)
	}

	who := storetest.MustSeedParties(t, st, 12999)
	customer, approver, order := who.Customer, who.Approver, who.Order
	run, _, err := st.StartRun(ctx, store.StartRequest{OwnerID: customer.ID, ClientRequestID: "crash-1",
		OrderID: order.ID, Amount: 4000, Reason: "arrived broken"})
	if err != nil {
		t.Fatal(err)
	}

	worker := spawn(t, env, "worker running", "worker")
	testkit.WaitRunState(t, st, run.ID, store.StateAwaitingApproval, 30*time.Second)
	if _, err := st.Approve(ctx, run.ID, approver.ID, ""); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the provider to commit the refund", 30*time.Second, func() bool {
		l, err := provider.Ledger(ctx)
		return err == nil && len(l) == 1
	})
	worker.kill(t)

	// The worker died before it could log the outcome.
	ops, err := st.OperationsByRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].State != store.OpSubmitted {
		t.Fatalf("after the kill, operations = %+v, want one still submitted", ops)
	}
	// Later answers go out at once; the dead worker's held one is gone.
	if err := provider.SetFaults(ctx, payments.Faults{}); err != nil {
		t.Fatal(err)
	}

	spawn(t, env, "worker running", "worker")
	testkit.WaitRunState(t, st, run.ID, store.StateCompleted, 30*time.Second)

	wantRefundedOnceAfterReconciling(t, ctx, st, provider, run.ID)
	wantVerifyClean(t, env)
}

// wantRefundedOnceAfterReconciling checks that the provider's ledger holds
// exactly one refund, that it is the run's one operation, succeeded, and
// that the run's timeline reconciled between submission and success.
func wantRefundedOnceAfterReconciling(t *testing.T, ctx context.Context, st *store.Store, provider *payments.Client, runID uuid.UUID) {
	t.Helper()
	ledger, err := provider.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 1 {
		t.Fatalf("provider ledger has %d refunds, want exactly 1", len(ledger))
	}
	snap, err := st.Snapshot(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	op := snap.Operations[0]
	if op.State != store.OpSucceeded || op.ProviderRef.String != ledger[0].Ref || ledger[0].Key != op.ID.String() {
		t.Errorf("operation %s %s ref %q; provider has key %s ref %q", op.ID, op.State, op.ProviderRef.String, ledger[0].Key, ledger[0].Ref)
	}
	var types []string
	for _, e := range snap.Events {
		if e.Class == store.ClassBusiness {
			types = append(types, e.Type)
		}
	}
	if got := strings.Join(types, ","); !strings.Contains(got, "operation.submitted,operation.reconciling,operation.succeeded,message.final,run.completed") {
		t.Errorf("timeline = %s, want a reconciliation between submission and success", got)
	}
}

// wantVerifyClean runs `refundd verify` with env and wants it to have
// checked both ledgers, skipping nothing.
func wantVerifyClean(t *testing.T, env []string) {
	t.Helper()
	cmd := exec.Command(buildBinary(t), "verify")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("refundd verify: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ok: every invariant holds") || strings.Contains(string(out), "skipped") {
		t.Errorf("refundd verify did not check both ledgers cleanly:\n%s", out)
	}
}

// TestDev_OrphanedClusterIsStopped: `refundd dev` killed with SIGKILL
// leaves its private PostgreSQL running; the next dev takes it over, and
// when that one is stopped with SIGINT no postmaster is left. It used to
// reuse the orphan and leave it running for ever.
func TestDev_OrphanedClusterIsStopped(t *testing.T) {
	t.Parallel()
	dataDir := traversableTempDir(t)
	env := []string{"DATA_DIR=" + dataDir, "ADDR=127.0.0.1:0", "PROVIDER_ADDR=127.0.0.1:0", "LOG_LEVEL=info"}
	pidFile := filepath.Join(dataDir, "pg", "postmaster.pid")
	t.Cleanup(func() {
		// Whatever happens, no cluster outlives the test.
		c, err := devdb.NewCluster(dataDir, 0)
		if err == nil {
			c.Kill(context.Background())
		}
	})

	first := spawn(t, env, "refundd is running at", "dev")
	orphan := postmasterPID(t, pidFile)
	first.kill(t)
	if !processAlive(orphan) {
		t.Fatalf("the postmaster (pid %d) died with dev; the test needs it orphaned", orphan)
	}

	second := spawn(t, env, "refundd is running at", "dev")
	if err := second.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("dev did not exit within 2 minutes of SIGINT")
	}
	if code := second.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("dev exit code after SIGINT = %d, want 0", code)
	}
	// pg_ctl stop returns once the postmaster has removed its pid file,
	// a moment before the process itself is gone: give it that moment.
	for i := 0; i < 100 && processAlive(orphan); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if processAlive(orphan) {
		t.Errorf("the orphaned postmaster (pid %d) still runs 10 s after the second dev stopped", orphan)
	}
	if _, err := os.Stat(pidFile); err == nil {
		t.Errorf("a postmaster is still running under DATA_DIR (%s exists)", pidFile)
	}
	if !strings.Contains(second.out.String(), "taking it over") {
		t.Errorf("the second dev did not say it took the orphaned cluster over:\n%s", second.out.String())
	}
}

// postmasterPID reads the running postmaster's pid from its pid file.
func postmasterPID(t *testing.T, pidFile string) int {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("no postmaster running under DATA_DIR: %v", err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// processAlive says whether pid runs; a zombie (exited, not yet reaped by
// a PID 1 that may never reap) is gone.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}
