package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Mode approvals: how long an approver's decision takes to reach everyone
// watching the run, in `refundd dev` (web, worker and provider in one
// process, as a person runs it), from the moment the approver's POST is
// sent. Per approval, a fresh run that waits for approval gets -watchers
// API streams; the approver approves it; each watcher notes when
// approval.granted arrives. The worker then picks the run up and goes on,
// in the same process, while the fan-out is under way.

// approvalsSummary is what approvals mode prints: per approval, when the
// first, median and last watcher heard it, ms after the POST was sent.
type approvalsSummary struct {
	meta
	Watchers  int       `json:"watchers"`
	Approvals int       `json:"approvals"`
	POSTms    spread    `json:"post_ms"`           // the POST's own answer
	Median    spread    `json:"median_watcher_ms"` // over approvals
	Last      spread    `json:"last_watcher_ms"`
	LastP50   float64   `json:"last_watcher_p50_ms"`
	LastP99   float64   `json:"last_watcher_p99_ms"`
	Lasts     []float64 `json:"last_watcher_each_ms"`
	Missing   int       `json:"watchers_not_reached"` // within 10 s
}

func (s *approvalsSummary) String() string {
	return fmt.Sprintf("\n%d approvals, %d watchers each (refundd dev), load %s → %s, %.0f s\n"+
		"| what | p50 | p99 | range |\n|---|---:|---:|---:|\n"+
		"| POST answered, ms | %s | | %s |\n| median watcher heard it, ms | %s | | %s |\n"+
		"| last watcher heard it, ms | %s | %s | %s |\nwatchers not reached within 10 s: %d\n",
		s.Approvals, s.Watchers, s.LoadAvg[0], s.LoadAvg[1], s.Seconds,
		num(s.POSTms.Median), s.POSTms, num(s.Median.Median), s.Median,
		num(s.LastP50), num(s.LastP99), s.Last, s.Missing)
}

// runApprovals starts refundd dev with every refund needing an approver
// (or uses the one at -url, which must ask for approval of one minor
// unit), starts the runs, and approves them one at a time under watch.
func runApprovals(ctx context.Context, e *env) (*approvalsSummary, error) {
	o := e.o
	sum := &approvalsSummary{meta: newMeta(o), Watchers: o.watchers, Approvals: o.approvals}
	base, err := e.startApprovalsDev(ctx)
	if err != nil {
		return nil, err
	}
	customer, err := e.client(ctx, base, 0)
	if err != nil {
		return nil, err
	}
	approver := newAPIClient(base, newTransport())
	if err := approver.login(ctx, "approver@example.com", o.password); err != nil {
		return nil, fmt.Errorf("approver: %w", err)
	}
	ids, err := startRuns(ctx, customer, o.approvals)
	if err != nil {
		return nil, err
	}
	var posts, medians []float64
	for i, id := range ids {
		if err := waitState(ctx, customer, id.String(), "awaiting_approval"); err != nil {
			return nil, err
		}
		post, heard, err := approveWatched(ctx, customer, approver, id.String(), o.watchers, o.settle)
		if err != nil {
			return nil, fmt.Errorf("approval %d: %w", i+1, err)
		}
		sum.Missing += o.watchers - len(heard)
		posts = append(posts, post)
		medians = append(medians, quantile(heard, 0.5))
		sum.Lasts = append(sum.Lasts, quantile(heard, 1))
		fmt.Fprintf(e.progress, "loadtest: approval %d: POST %.1f ms, watchers heard it after %.1f ms (median), %.1f ms (last of %d)\n",
			i+1, post, medians[i], sum.Lasts[i], len(heard))
	}
	sum.POSTms, sum.Median, sum.Last = spreadOf(posts), spreadOf(medians), spreadOf(sum.Lasts)
	sum.LastP50, sum.LastP99 = quantile(sum.Lasts, 0.5), quantile(sum.Lasts, 0.99)
	sum.finish()
	return sum, nil
}

// startApprovalsDev starts refundd dev with every refund needing an
// approver, or uses the one at -url, and returns its base URL.
func (e *env) startApprovalsDev(ctx context.Context) (string, error) {
	if e.o.url != "" {
		return e.o.url, nil
	}
	set := map[string]string{"APPROVAL_THRESHOLD": "1", "DB_POOL_SIZE": fmt.Sprint(e.o.pool)}
	if e.o.pace != "" {
		set["NARRATION_PACE"] = e.o.pace
	}
	dev, err := e.startRefundd(ctx, "dev", set)
	if err != nil {
		return "", err
	}
	e.cleanup = append(e.cleanup, dev.stop)
	return dev.url, nil
}

// waitState polls the run until it is in state, at most 60 s.
func waitState(ctx context.Context, c *apiClient, id, state string) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		r, err := c.run(ctx, id)
		if err != nil {
			return err
		}
		if r.State == state {
			return nil
		}
		if terminal(r.State) {
			return fmt.Errorf("run %s ended %s before reaching %s", id, r.State, state)
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("run %s did not reach %s within a minute", id, state)
}

// approveWatched opens n API streams on the run from its current end,
// lets them settle, approves it as approver, and returns how long the
// POST took and, for each watcher that heard approval.granted within 10 s,
// how long after the POST was sent (ms).
func approveWatched(ctx context.Context, customer, approver *apiClient, id string, n int, settle time.Duration) (post float64, heard []float64, err error) {
	var snap struct {
		CoveringSeq int64 `json:"covering_seq"`
	}
	if _, err := customer.do(ctx, http.MethodGet, "/api/runs/"+id, nil, &snap, nil); err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bodies, err := openMany(ctx, customer, fmt.Sprintf("/api/runs/%s/stream?after=%d", id, snap.CoveringSeq), n)
	if err != nil {
		return 0, nil, err
	}
	// Each watcher goes on watching after the approval, as a person does
	// (the run goes on: the worker's events reach them too), until every
	// watcher heard it or 10 s passed: none hangs up in the middle of the
	// fan-out.
	at := make([]time.Time, n)
	var readers, hearing sync.WaitGroup
	hearing.Add(n)
	for i, body := range bodies {
		readers.Go(func() {
			defer body.Close()
			heard := false
			_ = readSSE(body, func(m sseMessage) bool {
				if heard {
					return true
				}
				var ev struct {
					Type string `json:"type"`
				}
				if json.Unmarshal(m.data, &ev) == nil && ev.Type == "approval.granted" {
					at[i], heard = time.Now(), true
					hearing.Done()
				}
				return true
			})
			if !heard {
				hearing.Done()
			}
		})
	}
	// People watch a run that waits for an approver for a while before
	// anyone decides: the decision is not timed against the opening of
	// its watchers' streams (-settle 0 does that).
	if !sleep(ctx, settle) {
		return 0, nil, ctx.Err()
	}
	t0 := time.Now()
	if _, err := approver.do(ctx, http.MethodPost, "/api/runs/"+id+"/approve", map[string]string{}, nil, nil); err != nil {
		return 0, nil, fmt.Errorf("approve: %w", err)
	}
	post = ms(time.Since(t0))
	stop := time.AfterFunc(10*time.Second, cancel)
	defer stop.Stop()
	hearing.Wait()
	cancel()
	readers.Wait()
	for _, t := range at {
		if !t.IsZero() {
			heard = append(heard, ms(t.Sub(t0)))
		}
	}
	return post, heard, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// openMany opens n streams at path, 100 at a time; on an error it closes
// what it opened.
func openMany(ctx context.Context, c *apiClient, path string, n int) ([]io.ReadCloser, error) {
	bodies := make([]io.ReadCloser, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 100)
	var wg sync.WaitGroup
	for i := range bodies {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			bodies[i], errs[i] = c.openStream(ctx, path)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, b := range bodies {
			if b != nil {
				b.Close()
			}
		}
		return nil, err
	}
	return bodies, nil
}
