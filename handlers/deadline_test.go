package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// raceAnswer is what one approval sent at the deadline was answered.
type raceAnswer struct {
	status int
	body   string
	err    error
}

// TestDeadline_FortyApprovalsRaceIt: forty runs wait for a decision that
// must come within 4 s, and forty approvals race the deadline through the
// API, one per run, sent from 1.5 s before its deadline to 1.4 s after.
// Two workers (two processes, as far as the database can tell), woken by
// the deadline itself (their poll is a minute), expire what nobody decided
// in time. Each run ends one way only, approved and refunded or canceled
// by the system with nothing refunded, and the answer its approval got
// says the same: 200 approved for a refunded run, 409 with the state
// canceled for an expired one.
func TestDeadline_FortyApprovalsRaceIt(t *testing.T) {
	t.Parallel()
	const (
		runs   = 40
		window = 4 * time.Second
		step   = 75 * time.Millisecond // offsets -1.5 s … +1.425 s
	)
	a := newApp(t, handlers.Config{})
	provider := testkit.StartProvider(t, a.db, payments.Faults{}, 10*time.Second)
	for _, id := range []string{"worker-a", "worker-b"} {
		testkit.StartExecutor(t, a.store, nil, provider.Client, nil,
			agent.Config{WorkerID: id, ApprovalDeadline: window, Poll: time.Minute, ChunkEvery: time.Millisecond})
	}
	approver := a.client(t)
	a.login(t, approver, "approver@example.com")

	ids := make([]uuid.UUID, runs)
	for i := range ids {
		ids[i] = a.startRun(t, "customer@example.com", 1).ID
	}
	// Each approval is timed from its own run's deadline, read as soon as
	// the run asks.
	answers := make([]raceAnswer, runs)
	var wg sync.WaitGroup
	sent := make([]bool, runs)
	testkit.WaitUntil(t, "every run to ask for a decision", 30*time.Second, func() bool {
		for i, id := range ids {
			if sent[i] {
				continue
			}
			var deadline time.Time
			if err := a.db.Get(&deadline, `SELECT deadline FROM approvals WHERE run_id = $1`, id); err != nil {
				continue
			}
			sent[i] = true
			at := deadline.Add(time.Duration(i-runs/2) * step)
			wg.Go(func() { answers[i] = approveAt(approver, a.srv.URL+"/api/runs/"+id.String()+"/approve", at) })
		}
		return !slices.Contains(sent, false)
	})
	wg.Wait()
	for _, id := range ids {
		testkit.WaitUntil(t, "run "+id.String()+" to end", 30*time.Second, func() bool {
			r, err := a.store.RunByID(context.Background(), id)
			return err == nil && store.Terminal(r.State)
		})
	}

	var approved, expired int
	for i, id := range ids {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			ans := answers[i]
			if ans.err != nil {
				t.Fatal(ans.err)
			}
			run, err := a.store.RunByID(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			granted := a.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'approval.granted'`, id)
			ended := a.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'approval.expired'`, id)
			ends := a.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type IN ('run.completed', 'run.failed', 'run.canceled')`, id)
			refunds := a.count(t, `SELECT count(*) FROM provider_refunds WHERE key IN (SELECT id::text FROM operations WHERE run_id = $1)`, id)
			if granted+ended != 1 || ends != 1 {
				t.Fatalf("approval.granted %d, approval.expired %d, ends %d: want one decision and one end", granted, ended, ends)
			}
			switch ans.status {
			case http.StatusOK:
				approved++
				var d decisionJSON
				if err := json.Unmarshal([]byte(ans.body), &d); err != nil || d.Result != "approved" {
					t.Errorf("answer %s (%v), want result approved", ans.body, err)
				}
				if run.State != store.StateCompleted || granted != 1 || refunds != 1 {
					t.Errorf("answered approved, but the run ended %s with %d approvals and %d refunds at the provider", run.State, granted, refunds)
				}
			case http.StatusConflict:
				expired++
				var e apiErr
				if err := json.Unmarshal([]byte(ans.body), &e); err != nil || e.Error.Code != store.CodeConflict || e.Error.State != store.StateCanceled {
					t.Errorf("answer %s (%v), want a conflict with the state canceled", ans.body, err)
				}
				if run.State != store.StateCanceled || ended != 1 || refunds != 0 {
					t.Errorf("answered 409, but the run ended %s with %d expiries and %d refunds at the provider", run.State, ended, refunds)
				}
			default:
				t.Errorf("answer %d %s, want 200 or 409", ans.status, ans.body)
			}
		})
	}
	t.Logf("%d approved in time, %d expired", approved, expired)
	// Approvals sent 1.5 s early are in time; those sent over a second
	// late cannot be.
	if approved == 0 || expired == 0 {
		t.Errorf("%d approved, %d expired: want both outcomes from a race spread around the deadline", approved, expired)
	}
	problems, err := a.store.Verify(context.Background())
	if err != nil || len(problems) > 0 {
		t.Errorf("verify: %v %v", problems, err)
	}
}

// approveAt posts an approval at the moment at, and reads its answer.
func approveAt(c *http.Client, url string, at time.Time) raceAnswer {
	timer := time.NewTimer(time.Until(at))
	<-timer.C
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		return raceAnswer{err: err}
	}
	res, err := c.Do(req)
	if err != nil {
		return raceAnswer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return raceAnswer{status: res.StatusCode, body: string(b), err: err}
}
