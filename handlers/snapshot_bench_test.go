package handlers_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// BenchmarkSnapshots500 times what a person opening a long run waits for
// (issue 11, item 6): the run page (GET /runs/{id}, HTML) and the JSON
// snapshot (GET /api/runs/{id}) of a run of 500 events, the page in English
// and in Chinese (page_zh: the words through the catalogue), each beside the
// bare snapshot transaction on the same database (REPEATABLE READ, the
// run's row and its 500 events scanned, commit). Every iteration does all
// three, in a rotating order, so the reference shares the machine's
// moment; the figures are p50 and p99 of each and the ratios to the bare
// transaction's. Run with -benchtime 300x or more:
//
//	go test -run '^$' -bench Snapshots500 -benchtime 400x ./handlers
func BenchmarkSnapshots500(b *testing.B) {
	ctx := context.Background()
	a, run := runOf500(b)
	c := a.signedIn(b, "customer@example.com")
	n := 0
	steps := []struct {
		name string
		do   func() error
		took []time.Duration
	}{
		{name: "bare", do: func() (err error) { n, err = bareSnapshot(ctx, a.db, run.ID); return err }},
		{name: "page", do: func() error { return getAndDiscard(c, a.srv.URL+"/runs/"+run.ID.String(), "") }},
		{name: "page_zh", do: func() error { return getAndDiscard(c, a.srv.URL+"/runs/"+run.ID.String(), "zh-CN") }},
		{name: "api", do: func() error { return getAndDiscard(c, a.srv.URL+"/api/runs/"+run.ID.String(), "") }},
	}
	i := 0
	for b.Loop() {
		for k := range steps {
			s := &steps[(i+k)%len(steps)]
			began := time.Now()
			if err := s.do(); err != nil {
				b.Fatal(err)
			}
			s.took = append(s.took, time.Since(began))
		}
		i++
	}
	if n < 500 {
		b.Fatalf("the bare transaction read %d events, want 500 or more", n)
	}
	ref50, ref99 := quantileMs(steps[0].took, 0.5), quantileMs(steps[0].took, 0.99)
	for _, s := range steps {
		p50, p99 := quantileMs(s.took, 0.5), quantileMs(s.took, 0.99)
		b.ReportMetric(p50, s.name+"_p50_ms")
		b.ReportMetric(p99, s.name+"_p99_ms")
		if s.name != "bare" {
			b.ReportMetric(p50/ref50, s.name+"/bare_p50")
			b.ReportMetric(p99/ref99, s.name+"/bare_p99")
		}
	}
}

// runOf500 is an app with a customer's run of 500 narration events and
// more (its start's own): what both run page benchmarks read.
func runOf500(b *testing.B) (*app, *store.Run) {
	b.Helper()
	a := newApp(b, handlers.Config{})
	run := a.startRun(b, "customer@example.com", 1)
	appendNarration(b, a, run.ID, 10, 50)
	return a, run
}

// appendNarration appends batches of size narration deltas to run, batches
// times.
func appendNarration(tb testing.TB, a *app, run uuid.UUID, batches, size int) {
	tb.Helper()
	for range batches {
		evs := make([]store.NewEvent, size)
		for i := range evs {
			evs[i] = store.EventOf(store.NarrationDelta{Text: "I checked the order: it was paid in full and delivered on time. "})
		}
		if _, err := a.store.Append(context.Background(), run, evs...); err != nil {
			tb.Fatal(err)
		}
	}
}

// getAndDiscard GETs url as c (in the language lang asks for, if any) and
// reads the answer whole; anything but a 200 is an error.
func getAndDiscard(c *http.Client, url, lang string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if lang != "" {
		req.Header.Set("Accept-Language", lang)
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, res.StatusCode)
	}
	return nil
}

// bareSnapshot is the reference a snapshot is timed against: REPEATABLE
// READ, the run's row and all its events scanned, commit. It returns how
// many events it read.
func bareSnapshot(ctx context.Context, db *sqlx.DB, run uuid.UUID) (int, error) {
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	r := map[string]any{}
	if err := tx.QueryRowxContext(ctx, `SELECT * FROM runs WHERE id = $1`, run).MapScan(r); err != nil {
		return 0, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT run_id, seq, event_id, type, class, payload, created_at
            FROM run_events WHERE run_id = $1 ORDER BY seq`, run)
	if err != nil {
		return 0, err
	}
	var evs []store.Event
	for rows.Next() {
		var e store.Event
		if err := rows.Scan(&e.RunID, &e.Seq, &e.EventID, &e.Type, &e.Class, &e.Payload, &e.CreatedAt); err != nil {
			rows.Close()
			return 0, err
		}
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return len(evs), tx.Commit()
}

// quantileMs is the p-quantile of d, in milliseconds.
func quantileMs(d []time.Duration, p float64) float64 {
	d = slices.Clone(d)
	slices.Sort(d)
	return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000
}

// BenchmarkRunPageRender500 is the run page's render alone: the page of a
// run of 500 events (SnapshotPage, as GET /runs/{id} reads it, read once)
// rendered into a buffer, with no request, session or query. Its ns/op and
// allocs/op are what a page costs beyond its SQL (issue 37, item 4):
//
//	go test -run '^$' -bench RunPageRender500 -benchmem ./handlers
func BenchmarkRunPageRender500(b *testing.B) {
	ctx := context.Background()
	a, run := runOf500(b)
	u := a.user(b, "customer@example.com")
	snap, err := a.store.SnapshotPage(ctx, run.ID, views.NarrationShown)
	if err != nil {
		b.Fatal(err)
	}
	for _, tag := range []string{"en", "zh-CN"} {
		b.Run(tag, func(b *testing.B) {
			lang := views.Catalogues.Choose(tag, "")
			rctx := views.WithLang(views.WithPath(ctx, "/runs/"+run.ID.String()), lang)
			viewer := views.Viewer{UserID: u.ID, MayCancel: true, MayAskAgain: true, Lang: lang}
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if err := views.RunPage(u, views.NewRunView(snap, true, viewer)).Render(rctx, &buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len()), "bytes/page")
		})
	}
}
