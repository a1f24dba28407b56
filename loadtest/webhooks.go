package main

// Mode webhooks: runs mode, with -endpoints webhook receivers registered
// with refundd dev (which allows http to loopback). Each receiver
// dedupes by webhook-id, checks the per-run order, and records each
// event's lag: from the event's created_at (its transaction) to its
// receipt. With -hang one more endpoint never answers.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// receiver is one webhook endpoint of the load test.
type receiver struct {
	srv  *http.Server
	url  string
	hang bool

	mu      sync.Mutex
	seen    map[string]bool  // webhook-id
	lastSeq map[string]int64 // run → highest seq received
	lags    []lagSample
	posts   int
	dups    int
	order   int
}

type lagSample struct {
	at  time.Time // the event's created_at
	lag float64   // ms
}

func startReceiver(hang bool) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/hook", hang: hang,
		seen: map[string]bool{}, lastSeq: map[string]int64{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go r.srv.Serve(ln)
	return r, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.hang {
		<-req.Context().Done()
		return
	}
	now := time.Now()
	var body struct {
		Data struct {
			RunID     string    `json:"run_id"`
			Seq       int64     `json:"seq"`
			CreatedAt time.Time `json:"created_at"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts++
	id := req.Header.Get("webhook-id")
	if r.seen[id] {
		r.dups++
		w.WriteHeader(http.StatusNoContent)
		return
	}
	r.seen[id] = true
	if body.Data.Seq <= r.lastSeq[body.Data.RunID] {
		r.order++
	}
	r.lastSeq[body.Data.RunID] = max(r.lastSeq[body.Data.RunID], body.Data.Seq)
	r.lags = append(r.lags, lagSample{at: body.Data.CreatedAt, lag: ms(now.Sub(body.Data.CreatedAt))})
	w.WriteHeader(http.StatusNoContent)
}

// webhooksSummary is what webhooks mode prints.
type webhooksSummary struct {
	runsSummary
	RPM       int            `json:"rpm_asked"`
	Endpoints []endpointFig  `json:"endpoints"`
	Hang      bool           `json:"hanging_endpoint"`
	Pending   map[string]int `json:"pending_after_drain"`
}

// endpointFig is one receiver's figures over the events of the window.
type endpointFig struct {
	Events int     `json:"events"`
	Posts  int     `json:"posts"`
	Dups   int     `json:"duplicates"`
	Order  int     `json:"out_of_order"`
	LagP50 float64 `json:"lag_p50_ms"`
	LagP99 float64 `json:"lag_p99_ms"`
	LagMax float64 `json:"lag_max_ms"`
}

func (s *webhooksSummary) String() string {
	var b strings.Builder
	b.WriteString(s.runsSummary.String())
	fmt.Fprintf(&b, "\nwebhooks, %d endpoints (starts paced at %d a minute; a hanging endpoint too: %v):\n", len(s.Endpoints), s.RPM, s.Hang)
	for i, f := range s.Endpoints {
		fmt.Fprintf(&b, "  endpoint %d: %d events of the window, lag p50 %.0f ms, p99 %.0f ms, max %.0f ms; %d posts, %d duplicates, %d out of order\n",
			i+1, f.Events, f.LagP50, f.LagP99, f.LagMax, f.Posts, f.Dups, f.Order)
	}
	fmt.Fprintf(&b, "  deliveries still pending after the drain, by endpoint URL: %v\n", s.Pending)
	return b.String()
}

// runWebhooks starts the receivers and refundd, registers the receivers
// as the admin, runs the load, waits for the deliveries to drain (30 s at
// most) and reports each endpoint's lag over the window's events.
func runWebhooks(ctx context.Context, e *env) (*webhooksSummary, error) {
	o := e.o
	sum := &webhooksSummary{runsSummary: runsSummary{meta: newMeta(o), Inflight: o.inflight, Slots: o.slots,
		Pace: cmpOr(o.pace, "default"), Workers: o.workers, Pool: o.pool}, RPM: o.rpm, Hang: o.hang}
	var recv []*receiver
	for i := range o.endpoints + 1 {
		if i == o.endpoints && !o.hang {
			break
		}
		r, err := startReceiver(i == o.endpoints)
		if err != nil {
			return nil, err
		}
		defer r.srv.Close()
		recv = append(recv, r)
	}
	base, pids, err := e.startRunsProcesses(ctx)
	if err != nil {
		return nil, err
	}
	if err := registerReceivers(ctx, base, recv); err != nil {
		return nil, err
	}
	smp, err := e.loadWindow(ctx, base, pids, &sum.runsSummary)
	if err != nil {
		return nil, err
	}
	if sum.Pending, err = drain(ctx, e.dbURL, 30*time.Second, o.hang); err != nil {
		return nil, err
	}
	for _, r := range recv[:o.endpoints] {
		sum.Endpoints = append(sum.Endpoints, r.figures(smp.from, smp.to))
	}
	return sum, nil
}

// registerReceivers registers each receiver through POST /api/webhooks,
// signed in as dev's demo admin.
func registerReceivers(ctx context.Context, base string, recv []*receiver) error {
	admin := newAPIClient(base, newTransport())
	if err := admin.login(ctx, "admin@example.com", "demo"); err != nil {
		return fmt.Errorf("sign in as the demo admin: %w", err)
	}
	for i, r := range recv {
		var out struct {
			ID string `json:"id"`
		}
		code, err := admin.do(ctx, http.MethodPost, "/api/webhooks",
			map[string]any{"url": r.url, "description": fmt.Sprintf("load test receiver %d", i+1)}, &out, nil)
		if err != nil || code != http.StatusCreated {
			return fmt.Errorf("register receiver %d: status %d: %v", i+1, code, err)
		}
	}
	return nil
}

// drain waits until no delivery is pending (but the hanging endpoint's)
// or d passes, and returns what is still pending by endpoint URL.
func drain(ctx context.Context, dbURL string, d time.Duration, hang bool) (map[string]int, error) {
	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	pending := map[string]int{}
	for deadline := time.Now().Add(d); ; {
		clear(pending)
		rows, err := db.QueryContext(ctx, `SELECT e.url, count(*) FROM webhook_deliveries d
			JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.state = 'pending' GROUP BY e.url`)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var url string
			var n int
			if err := rows.Scan(&url, &n); err != nil {
				rows.Close()
				return nil, err
			}
			pending[url] = n
		}
		rows.Close()
		if len(pending) <= btoi(hang) || time.Now().After(deadline) || !sleep(ctx, 200*time.Millisecond) {
			return pending, nil
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// figures are the receiver's lags over the events created in [from, to).
func (r *receiver) figures(from, to time.Time) endpointFig {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lags []float64
	for _, s := range r.lags {
		if !s.at.Before(from) && s.at.Before(to) {
			lags = append(lags, s.lag)
		}
	}
	f := endpointFig{Events: len(lags), Posts: r.posts, Dups: r.dups, Order: r.order}
	if len(lags) > 0 {
		f.LagP50, f.LagP99, f.LagMax = quantile(lags, 0.5), quantile(lags, 0.99), quantile(lags, 1)
	}
	return f
}
