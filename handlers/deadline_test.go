package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// raceAnswer is what one approval sent at the deadline was answered.
type raceAnswer struct {
	status int
	body   string
	err    error
}

// TestDeadline_FortyApprovalsRaceIt: forty runs wait for a decision that
// must come within 8 s, and forty approvals race the deadline through the
// API, one per run, sent from 3 s before its deadline to 2.85 s after (on
// a loaded machine, 1.5 s early was once too late for all forty).
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
		window = 8 * time.Second
		step   = 150 * time.Millisecond // offsets -3 s … +2.85 s
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
			switch a.raceOutcome(t, id, answers[i]) {
			case store.StateCompleted:
				approved++
			case store.StateCanceled:
				expired++
			}
		})
	}
	t.Logf("%d approved in time, %d expired", approved, expired)
	// Approvals sent 3 s early are in time; those sent over a second
	// late cannot be.
	if approved == 0 || expired == 0 {
		t.Errorf("%d approved, %d expired: want both outcomes from a race spread around the deadline", approved, expired)
	}
	problems, err := a.store.Verify(context.Background())
	if err != nil || len(problems) > 0 {
		t.Errorf("verify: %v %v", problems, err)
	}
}

// raceOutcome checks that the run had one outcome, and that the answer its
// approval got agrees with it; it returns the state the run ended in.
func (a *app) raceOutcome(t *testing.T, id uuid.UUID, ans raceAnswer) string {
	t.Helper()
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
		var d decisionJSON
		if err := json.Unmarshal([]byte(ans.body), &d); err != nil || d.Result != "approved" {
			t.Errorf("answer %s (%v), want result approved", ans.body, err)
		}
		if run.State != store.StateCompleted || granted != 1 || refunds != 1 {
			t.Errorf("answered approved, but the run ended %s with %d approvals and %d refunds at the provider", run.State, granted, refunds)
		}
	case http.StatusConflict:
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
	return run.State
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

// TestRunPage_SaysUntilWhenAnApproverMayDecide: while a run waits, its
// page says until when an approver may decide (a <time> the viewer's
// browser shows in their own zone), and the API's snapshot the same
// moment; once nobody did, the page says the system canceled it, why, and
// that nothing was refunded, as its timeline and support's do.
func TestRunPage_SaysUntilWhenAnApproverMayDecide(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	ctx := context.Background()
	run := a.startRun(t, "customer@example.com", 1000)
	if _, err := a.store.RequestApprovalWithin(ctx, run.ID, proposalFor(run), 48*time.Hour); err != nil {
		t.Fatal(err)
	}
	var deadline time.Time
	if err := a.db.Get(&deadline, `SELECT deadline FROM approvals WHERE run_id = $1`, run.ID); err != nil {
		t.Fatal(err)
	}
	page := "/runs/" + run.ID.String()
	for _, who := range []string{"customer@example.com", "approver@example.com"} {
		c := a.signedIn(t, who)
		doc := a.get(t, c, page).doc(t)
		said := doc.Find("#decide-by")
		at, _ := said.Find("time").Attr("datetime")
		if got, want := at, deadline.UTC().Format(time.RFC3339); got != want {
			t.Errorf("%s: #decide-by time = %q, want %q", who, got, want)
		}
		if got, want := said.Text(), views.DecideByLead+deadline.UTC().Format("2 Jan 2006, 15:04 UTC")+views.DecideByTail; got != want {
			t.Errorf("%s: #decide-by = %q, want %q", who, got, want)
		}
		snap := decode[struct {
			Approval struct {
				Deadline time.Time `json:"deadline"`
			} `json:"approval"`
		}](t, a.get(t, c, "/api"+page))
		if !snap.Approval.Deadline.Equal(deadline) {
			t.Errorf("%s: API approval.deadline = %v, want %v", who, snap.Approval.Deadline, deadline)
		}
	}

	// Nobody decided: two days pass (the request is moved two days
	// back), and the worker the deadline wakes expires it.
	if _, err := a.db.Exec(`UPDATE approvals SET requested_at = requested_at - interval '48 hours',
        deadline = deadline - interval '48 hours' WHERE run_id = $1`, run.ID); err != nil {
		t.Fatal(err)
	}
	if expired, err := a.store.ExpireApproval(ctx, run.ID); err != nil || !expired {
		t.Fatalf("ExpireApproval = %v, %v", expired, err)
	}
	for who, want := range map[string]map[string]string{
		"customer@example.com": {
			"#run-state":    "Canceled",
			"#outcome-text": "Canceled by the system.",
			// The answer says why and what it means for the money; the
			// lines beside it repeat neither.
			"#final-answer":   views.Answers{}.Expired(48 * time.Hour).Body,
			"#outcome-reason": "",
			`#timeline li[data-type="approval.requested"]`: "Asked an approver to decide within 48 hours",
			`#timeline li[data-type="approval.expired"]`:   "No approver decided within 48 hours: the system canceled the refund",
		},
		"support@example.com": {
			`#support-timeline tr[data-type="approval.expired"] td[data-label="Who"]`: "the system",
		},
	} {
		c := a.signedIn(t, who)
		path := page
		if who == "support@example.com" {
			path = "/support" + page
		}
		doc := a.get(t, c, path).doc(t)
		if n := doc.Find("#decide-by").Length(); n != 0 {
			t.Errorf("%s: the page still says until when to decide", who)
		}
		for sel, text := range want {
			// A timeline line also says when.
			if got := strings.TrimSpace(doc.Find(sel).First().Text()); got != text && !strings.HasSuffix(got, " "+text) {
				t.Errorf("%s: %s = %q, want %q", who, sel, got, text)
			}
		}
	}
}

// TestQueuePage_OrdersByDeadline: the approval queue lists the soonest
// due first, says until when each may be decided, and marks in words the
// ones due within a tenth of the time they were given; a card not yet due
// soon carries when it will be, for the page to mark it then.
func TestQueuePage_OrdersByDeadline(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	ctx := context.Background()
	ask := func(window time.Duration) *store.Run {
		t.Helper()
		run := a.startRun(t, "customer2@example.com", 100)
		if _, err := a.store.RequestApprovalWithin(ctx, run.ID, proposalFor(run), window); err != nil {
			t.Fatal(err)
		}
		return run
	}
	fresh := ask(time.Hour)
	none := ask(0)
	urgent := ask(48 * time.Hour)
	// The urgent one asked 47.5 hours ago: half an hour is left of 48.
	for _, q := range []string{
		`UPDATE approvals SET requested_at = requested_at - interval '47.5 hours', deadline = deadline - interval '47.5 hours' WHERE run_id = $1`,
		`UPDATE queue_entries SET entered_at = entered_at - interval '47.5 hours' WHERE run_id = $1`,
	} {
		if _, err := a.db.Exec(q, urgent.ID); err != nil {
			t.Fatal(err)
		}
	}
	doc := a.get(t, a.signedIn(t, "approver@example.com"), "/").doc(t)
	var order []string
	doc.Find(".queue-item").Each(func(_ int, s *goquery.Selection) { order = append(order, s.AttrOr("id", "")) })
	if want := []string{views.QueueItemID(urgent.ID), views.QueueItemID(fresh.ID), views.QueueItemID(none.ID)}; !slices.Equal(order, want) {
		t.Errorf("queue order = %v, want urgent, fresh, then the one without a deadline: %v", order, want)
	}
	if got := doc.Find("#queue-count").Text(); got != "3 refunds wait for a decision, the soonest due first." {
		t.Errorf("count = %q", got)
	}
	card := func(run *store.Run) *goquery.Selection { return doc.Find("#" + views.QueueItemID(run.ID)) }
	u := card(urgent)
	if !u.HasClass("due-soon") || u.Find(".due-soon-mark").AttrOr("hidden", "none") != "none" || u.Find(".due-soon-mark").Text() != views.DueSoonMark {
		t.Errorf("the card due in half an hour of 48 hours is not marked due soon in words: classes %q, mark %q", u.AttrOr("class", ""), u.Find(".due-soon-mark").Text())
	}
	f := card(fresh)
	soonIn, err := strconv.ParseInt(f.AttrOr("data-soon-in", ""), 10, 64)
	// Due soon 54 minutes after it asked (a tenth of an hour before).
	if f.HasClass("due-soon") || f.Find(".due-soon-mark[hidden]").Length() != 1 || err != nil || soonIn < 50*60*1000 || soonIn > 54*60*1000 {
		t.Errorf("the fresh card: due-soon %v, data-soon-in %q; want not yet, in about 54 minutes", f.HasClass("due-soon"), f.AttrOr("data-soon-in", ""))
	}
	if at, ok := f.Find(".queue-deadline time").Attr("datetime"); !ok || at == "" {
		t.Errorf("the fresh card does not say until when it may be decided")
	}
	if n := card(none).Find(".queue-deadline").Length(); n != 0 || card(none).AttrOr("data-soon-in", "") != "" {
		t.Errorf("the card without a deadline shows one")
	}
}
