package main

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Mode family: what one request of -children refunds (a parent and a child
// per order) costs beside as many single runs, over HTTP against `refundd
// serve` (no worker, so nothing moves the runs while they are measured).
// Each round starts a family and -children single runs of the same orders,
// then measures each pair of the table below: the wall time of the family's
// side and of the singles' side, and the SQL statements PostgreSQL ran for
// each (pg_stat_statements: calls in refundd's database). A new way to watch
// a family is one more row of familyMeasures.

// familyMeasure is one comparison: the family's way and the singles' way of
// doing the same thing. skip, when set, says why the round cannot measure
// it (and the row is left out, with the reason in the notes).
type familyMeasure struct {
	key, what string
	family    func(*familyRound, context.Context) error
	singles   func(*familyRound, context.Context) error
	skip      func(*familyRound, context.Context) string
}

// familyMeasures are measured in this order each round, each pair's sides
// in turn first; "start" makes the runs the others use.
var familyMeasures = []familyMeasure{
	{key: "start", what: "start: one POST /api/runs with refunds vs a POST per order",
		family: (*familyRound).startFamily, singles: (*familyRound).startSingles},
	{key: "snapshot", what: "snapshot: GET /api/runs/{parent} vs GET /api/runs/{id} per run",
		family: (*familyRound).snapshotFamily, singles: (*familyRound).snapshotSingles},
	{key: "watch", what: "watch, HTML: one GET /streams?run=… for the children vs GET /runs/{id}/events per run, until each run's log arrived",
		family: (*familyRound).watchChildrenOnOne, singles: (*familyRound).watchSinglesEach, skip: (*familyRound).needsSession},
	{key: "page", what: "page: GET /runs/{parent} vs GET /runs/{id} per run",
		family: (*familyRound).pageFamily, singles: (*familyRound).pageSingles, skip: (*familyRound).familyPageMissing},
	{key: "family-page-stream", what: "watch, HTML: GET /runs/{parent}/events vs GET /runs/{id}/events per run, until each run's log arrived",
		family: (*familyRound).watchFamilyPageStream, singles: (*familyRound).watchSinglesEach, skip: (*familyRound).familyPageStreamMissing},
	{key: "family-stream", what: "watch, API: GET /api/runs/{parent}/stream vs GET /api/runs/{id}/stream per run, until each run's log arrived",
		family: (*familyRound).watchFamilyStream, singles: (*familyRound).watchSinglesAPI, skip: (*familyRound).familyStreamMissing},
}

// familyRound is one round's client, orders and runs.
type familyRound struct {
	e       *env
	c       *apiClient
	db      *sql.DB // nil: statements are not counted
	n       int
	orders  []int64
	key     string
	parent  string
	kids    []string
	singles []string
}

// familyFigure is one row of the summary: medians and ranges over rounds,
// and the singles-to-family ratios taken per round.
type familyFigure struct {
	Key           string `json:"key"`
	What          string `json:"what"`
	FamilyMS      spread `json:"family_ms"`
	SinglesMS     spread `json:"singles_ms"`
	RatioMS       spread `json:"singles_over_family_ms"`
	FamilyStmts   spread `json:"family_statements"`
	SinglesStmts  spread `json:"singles_statements"`
	RatioStmts    spread `json:"singles_over_family_statements"`
	family, singl []sample
}

type sample struct{ ms, stmts float64 }

// familySummary is what family mode prints.
type familySummary struct {
	meta
	Children   int            `json:"children"`
	Rounds     int            `json:"rounds"`
	Statements bool           `json:"statements_counted"`
	Figures    []familyFigure `json:"figures"`
	Notes      []string       `json:"notes,omitempty"`
}

func (s *familySummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\na family of %d children beside %d single runs, %d rounds, load %s → %s, %.0f s\n", s.Children, s.Children, s.Rounds, s.LoadAvg[0], s.LoadAvg[1], s.Seconds)
	b.WriteString("| what | family ms | singles ms | ratio | family statements | singles statements | ratio |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range s.Figures {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", f.What, f.FamilyMS, f.SinglesMS, f.RatioMS, f.FamilyStmts, f.SinglesStmts, f.RatioStmts)
	}
	for _, n := range s.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}

// runFamily starts refundd serve (or uses -url), picks the orders, and
// measures every pair -rounds times, the family's side first in the first
// round, the singles' in the next, and so on.
func runFamily(ctx context.Context, e *env) (*familySummary, error) {
	o := e.o
	sum := &familySummary{meta: newMeta(o), Children: o.children, Rounds: o.rounds}
	base, err := e.startFamilyServe(ctx)
	if err != nil {
		return nil, err
	}
	c, err := e.client(ctx, base, 0)
	if err != nil {
		return nil, err
	}
	orders, err := familyOrders(ctx, c, o.children, int64(2*o.rounds))
	if err != nil {
		return nil, err
	}
	db, note := statementCounter(ctx, e.dbURL)
	if db != nil {
		defer db.Close()
		sum.Statements = true
	} else {
		sum.Notes = append(sum.Notes, note)
	}
	figures := make([]familyFigure, len(familyMeasures))
	skipped := map[string]string{}
	for round := range o.rounds {
		r := &familyRound{e: e, c: c, db: db, n: o.children, orders: orders, key: fmt.Sprintf("lt-family-%d-%d", time.Now().UnixNano(), round)}
		for i, m := range familyMeasures {
			if _, ok := skipped[m.key]; ok {
				continue
			}
			if m.skip != nil {
				if why := m.skip(r, ctx); why != "" {
					skipped[m.key] = why
					continue
				}
			}
			fam, singl, err := r.pair(ctx, m, round%2 == 1)
			if err != nil {
				return sum, fmt.Errorf("round %d, %s: %w", round+1, m.key, err)
			}
			figures[i].family, figures[i].singl = append(figures[i].family, fam), append(figures[i].singl, singl)
		}
		fmt.Fprintf(e.progress, "loadtest: family round %d of %d done\n", round+1, o.rounds)
	}
	for i, m := range familyMeasures {
		if why, ok := skipped[m.key]; ok {
			sum.Notes = append(sum.Notes, fmt.Sprintf("%s not measured: %s", m.key, why))
			continue
		}
		sum.Figures = append(sum.Figures, figures[i].fill(m))
	}
	sum.finish()
	return sum, nil
}

// fill computes a row's spreads from its samples.
func (f familyFigure) fill(m familyMeasure) familyFigure {
	f.Key, f.What = m.key, m.what
	var fm, sm, rm, fs, ss, rs []float64
	for i := range f.family {
		fm, sm = append(fm, f.family[i].ms), append(sm, f.singl[i].ms)
		fs, ss = append(fs, f.family[i].stmts), append(ss, f.singl[i].stmts)
		if f.family[i].ms > 0 {
			rm = append(rm, f.singl[i].ms/f.family[i].ms)
		}
		if f.family[i].stmts > 0 {
			rs = append(rs, f.singl[i].stmts/f.family[i].stmts)
		}
	}
	f.FamilyMS, f.SinglesMS, f.RatioMS = spreadOf(fm), spreadOf(sm), spreadOf(rm)
	f.FamilyStmts, f.SinglesStmts, f.RatioStmts = spreadOf(fs), spreadOf(ss), spreadOf(rs)
	return f
}

// pair measures both sides of m, the singles' first when singlesFirst.
func (r *familyRound) pair(ctx context.Context, m familyMeasure, singlesFirst bool) (fam, singl sample, err error) {
	if !singlesFirst {
		if fam, err = r.timed(ctx, m.family); err == nil {
			singl, err = r.timed(ctx, m.singles)
		}
		return fam, singl, err
	}
	if singl, err = r.timed(ctx, m.singles); err == nil {
		fam, err = r.timed(ctx, m.family)
	}
	return fam, singl, err
}

// timed runs f and returns its wall time and the statements PostgreSQL
// ran meanwhile in refundd's database (0 when not counted).
func (r *familyRound) timed(ctx context.Context, f func(*familyRound, context.Context) error) (sample, error) {
	before, err := r.statements(ctx)
	if err != nil {
		return sample{}, err
	}
	t0 := time.Now()
	if err := f(r, ctx); err != nil {
		return sample{}, err
	}
	d := ms(time.Since(t0))
	after, err := r.statements(ctx)
	return sample{ms: d, stmts: after - before}, err
}

// statements is the number of statements PostgreSQL has run in refundd's
// database, the load test's own reads of the count aside.
func (r *familyRound) statements(ctx context.Context) (float64, error) {
	if r.db == nil {
		return 0, nil
	}
	var n float64
	err := r.db.QueryRowContext(ctx, `SELECT COALESCE(sum(calls), 0) FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_statements%'`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count statements: %w", err)
	}
	return n, nil
}

// statementCounter opens refundd's database for pg_stat_statements, or
// says why statements cannot be counted there.
func statementCounter(ctx context.Context, dbURL string) (*sql.DB, string) {
	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		return nil, "statements not counted: " + err.Error()
	}
	db.SetMaxOpenConns(1)
	_, err = db.ExecContext(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	if err == nil {
		_, err = db.ExecContext(ctx, `SELECT count(*) FROM pg_stat_statements`)
	}
	if err != nil {
		db.Close()
		return nil, "statements not counted: pg_stat_statements is not available in refundd's database (it must be in shared_preload_libraries): " + err.Error()
	}
	return db, ""
}

// familyOrders picks n of the customer's orders, in one currency, each with
// at least need minor units still refundable.
func familyOrders(ctx context.Context, c *apiClient, n int, need int64) ([]int64, error) {
	orders, err := c.orders(ctx)
	if err != nil {
		return nil, err
	}
	byCurrency := map[string][]int64{}
	for _, o := range orders {
		if o.Refundable >= need {
			byCurrency[o.Currency] = append(byCurrency[o.Currency], o.ID)
		}
	}
	var best []int64
	for _, ids := range byCurrency {
		if len(ids) > len(best) {
			best = ids
		}
	}
	if len(best) < n {
		return nil, fmt.Errorf("-children %d needs %d orders of one currency with %d cents refundable each; the customer has %d (add some with -orders)", n, n, need, len(best))
	}
	slices.Sort(best)
	return best[:n], nil
}

// startFamilyServe starts refundd serve alone, with families of -children
// allowed, or uses the one at -url.
func (e *env) startFamilyServe(ctx context.Context) (string, error) {
	if e.o.url != "" {
		return e.o.url, nil
	}
	serve, err := e.startRefundd(ctx, "serve", map[string]string{"MAX_FAMILY_SIZE": fmt.Sprint(e.o.children), "DB_POOL_SIZE": fmt.Sprint(e.o.pool)})
	if err != nil {
		return "", err
	}
	e.cleanup = append(e.cleanup, serve.stop)
	return serve.url, nil
}

// startFamily is one POST of the round's family: a cent of each order.
func (r *familyRound) startFamily(ctx context.Context) error {
	refunds := make([]map[string]int64, r.n)
	for i, id := range r.orders {
		refunds[i] = map[string]int64{"order_id": id, "amount": 1}
	}
	var out struct {
		ID       string `json:"id"`
		Children []struct {
			ID string `json:"id"`
		} `json:"children"`
	}
	body := map[string]any{"refunds": refunds, "reason": "load test"}
	status, err := r.c.do(ctx, http.MethodPost, "/api/runs", body, &out, http.Header{"Idempotency-Key": {r.key}})
	if err == nil && (status != http.StatusCreated || len(out.Children) != r.n) {
		err = fmt.Errorf("family start: %d with %d children, want 201 with %d", status, len(out.Children), r.n)
	}
	r.parent = out.ID
	for _, k := range out.Children {
		r.kids = append(r.kids, k.ID)
	}
	return err
}

// startSingles starts a single run of a cent per order, one after another.
func (r *familyRound) startSingles(ctx context.Context) error {
	for i, id := range r.orders {
		run, err := r.c.startRun(ctx, fmt.Sprintf("%s-single-%d", r.key, i), id, 1)
		if err != nil {
			return err
		}
		r.singles = append(r.singles, run.ID)
	}
	return nil
}

func (r *familyRound) snapshotFamily(ctx context.Context) error {
	var snap struct {
		Children []json.RawMessage `json:"children"`
	}
	if _, err := r.c.do(ctx, http.MethodGet, "/api/runs/"+r.parent, nil, &snap, nil); err != nil {
		return err
	}
	if len(snap.Children) != r.n {
		return fmt.Errorf("the parent's snapshot lists %d children, want %d", len(snap.Children), r.n)
	}
	return nil
}

func (r *familyRound) snapshotSingles(ctx context.Context) error {
	for _, id := range r.singles {
		if _, err := r.c.do(ctx, http.MethodGet, "/api/runs/"+id, nil, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// needsSession: the HTML streams take a session, not a token.
func (r *familyRound) needsSession(context.Context) string {
	if r.e.o.token != "" {
		return "the HTML streams need a session (-emails), not -token"
	}
	return ""
}

// watchChildrenOnOne opens one /streams connection for every child, from
// the start of their logs, and reads until each child's first event came.
func (r *familyRound) watchChildrenOnOne(ctx context.Context) error {
	specs := make([]string, len(r.kids))
	for i, id := range r.kids {
		specs[i] = "run=" + id + ":0"
	}
	return r.readUntilEach(ctx, []string{"/streams?" + strings.Join(specs, "&")}, r.kids, func(m sseMessage) []string {
		// Each message's id is RUN:SEQ.
		run, seq, _ := strings.Cut(m.id, ":")
		if seq == "" || seq == "0" || len(m.data) == 0 {
			return nil
		}
		return []string{run}
	})
}

// watchSinglesEach opens a run page stream per single run, at once, and
// reads each until its first event came.
func (r *familyRound) watchSinglesEach(ctx context.Context) error {
	paths := make([]string, len(r.singles))
	for i, id := range r.singles {
		paths[i] = "/runs/" + id + "/events?after=0"
	}
	return r.readUntilEach(ctx, paths, r.singles, nil)
}

// watchSinglesAPI is watchSinglesEach over the JSON API's streams.
func (r *familyRound) watchSinglesAPI(ctx context.Context) error {
	paths := make([]string, len(r.singles))
	for i, id := range r.singles {
		paths[i] = "/api/runs/" + id + "/stream?after=0"
	}
	return r.readUntilEach(ctx, paths, r.singles, nil)
}

// watchFamilyStream opens the parent's API stream from the start and reads
// until every child's events arrived on it.
func (r *familyRound) watchFamilyStream(ctx context.Context) error {
	return r.readUntilEach(ctx, []string{"/api/runs/" + r.parent + "/stream?after=0"}, r.kids, runOfData)
}

// familyStreamMissing says why the parent's API stream cannot be measured:
// it carries no child's events within 3 s.
func (r *familyRound) familyStreamMissing(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := r.readUntilEach(ctx, []string{"/api/runs/" + r.parent + "/stream?after=0"}, r.kids[:1], runOfData); err != nil {
		return "GET /api/runs/{parent}/stream carries no child's events here (" + err.Error() + ")"
	}
	return ""
}

// runOfData is the run a JSON event names.
func runOfData(m sseMessage) []string {
	var ev struct {
		RunID string `json:"run_id"`
	}
	if json.Unmarshal(m.data, &ev) != nil || ev.RunID == "" {
		return nil
	}
	return []string{ev.RunID}
}

// childrenOfCursor reads a family stream's message id, the family cursor
// (the parent's seq, then each child's, joined by dots): the children it
// says have had an event.
func (r *familyRound) childrenOfCursor(m sseMessage) []string {
	parts := strings.Split(m.id, ".")
	if len(parts) != len(r.kids)+1 {
		return nil
	}
	var out []string
	for i, p := range parts[1:] {
		if p != "" && p != "0" {
			out = append(out, r.kids[i])
		}
	}
	return out
}

// readUntilEach opens every path at once and reads them until each of runs
// has had an event: which run a message is of, runOf says; nil means each
// path is one run's stream, and any message with an id is its event.
func (r *familyRound) readUntilEach(ctx context.Context, paths, runs []string, runOf func(sseMessage) []string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var (
		mu      sync.Mutex
		pending = map[string]bool{}
		done    = make(chan struct{})
	)
	for _, id := range runs {
		pending[id] = true
	}
	heard := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		if pending[id] {
			delete(pending, id)
			if len(pending) == 0 {
				close(done)
			}
		}
	}
	errs := make([]error, len(paths))
	var wg sync.WaitGroup
	for i, path := range paths {
		wg.Go(func() {
			body, err := r.c.openStream(ctx, path)
			if err != nil {
				errs[i] = err
				return
			}
			defer body.Close()
			readSSE(body, func(m sseMessage) bool {
				switch {
				case runOf != nil:
					for _, id := range runOf(m) {
						heard(id)
					}
				case m.id != "" && m.id != "0" && len(m.data) > 0:
					heard(runs[i])
					return false
				}
				return ctx.Err() == nil
			})
		})
	}
	select {
	case <-done:
		cancel()
		wg.Wait()
		return nil
	case <-ctx.Done():
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return cmp.Or(errors.Join(errs...), fmt.Errorf("%d of %d runs had no event within the time", len(pending), len(runs)))
}

// pageFamily is the parent's page, which must name every child.
func (r *familyRound) pageFamily(ctx context.Context) error {
	body, err := r.c.page(ctx, "/runs/"+r.parent)
	if err == nil && !mentionsAll(body, r.kids) {
		err = fmt.Errorf("the parent's page no longer names every child")
	}
	return err
}

func (r *familyRound) pageSingles(ctx context.Context) error {
	for _, id := range r.singles {
		if _, err := r.c.page(ctx, "/runs/"+id); err != nil {
			return err
		}
	}
	return nil
}

// familyPageMissing: a parent's page that does not show its children is
// not a family page to measure (and a token cannot open pages).
func (r *familyRound) familyPageMissing(ctx context.Context) string {
	if why := r.needsSession(ctx); why != "" {
		return why
	}
	body, err := r.c.page(ctx, "/runs/"+r.parent)
	switch {
	case err != nil:
		return err.Error()
	case !mentionsAll(body, r.kids):
		return "GET /runs/{parent} does not show the children here"
	}
	return ""
}

func mentionsAll(body string, ids []string) bool {
	for _, id := range ids {
		if !strings.Contains(body, id) {
			return false
		}
	}
	return true
}

// watchFamilyPageStream opens the parent's page stream from the start and
// reads until the family cursor says each child's log arrived.
func (r *familyRound) watchFamilyPageStream(ctx context.Context) error {
	return r.readUntilEach(ctx, []string{"/runs/" + r.parent + "/events?after=0"}, r.kids, r.childrenOfCursor)
}

// familyPageStreamMissing says why the parent's page stream cannot be
// measured: its ids are no family cursor within 3 s.
func (r *familyRound) familyPageStreamMissing(ctx context.Context) string {
	if why := r.needsSession(ctx); why != "" {
		return why
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := r.readUntilEach(ctx, []string{"/runs/" + r.parent + "/events?after=0"}, r.kids[:1], r.childrenOfCursor); err != nil {
		return "GET /runs/{parent}/events carries no child here (" + err.Error() + ")"
	}
	return ""
}
