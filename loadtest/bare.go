package main

// The bare reference: what a stream costs with nothing but net/http, one
// LISTEN connection, one store read per run per wake-up and a fan-out to
// every watcher of that run. It reads the same tables refundd writes, on
// the same PostgreSQL, and sends the same event JSON, so its figures are
// the floor refundd's are compared with. It runs as a child process of the
// load test (`loadtest bare-serve`), so its memory and CPU are its own.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/refundd/refundd/store"
)

// bareServer fans each run's new events out to that run's watchers.
type bareServer struct {
	db   *sql.DB
	read *sql.Stmt
	log  *slog.Logger

	mu   sync.Mutex
	runs map[uuid.UUID]*bareRun

	reg     *prometheus.Registry
	reads   prometheus.Counter
	wakeups prometheus.Counter
}

// bareRun is one run's tail, shared by all its watchers.
type bareRun struct {
	id      uuid.UUID
	last    int64 // the highest seq read and sent
	subs    map[chan []byte]struct{}
	reading bool // a read is in flight
	again   bool // a wake-up came during it: read once more
}

// Its metric names are refundd's, so one scrape reads either server.
func newBareServer(ctx context.Context, dbURL string, logger *slog.Logger) (*bareServer, error) {
	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	read, err := db.PrepareContext(ctx, `SELECT run_id, seq, event_id, type, class, payload, created_at
        FROM run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT 1000`)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("bare: prepare: %w", err)
	}
	s := &bareServer{db: db, read: read, log: logger, runs: map[uuid.UUID]*bareRun{}, reg: prometheus.NewRegistry()}
	s.reads = prometheus.NewCounter(prometheus.CounterOpts{Name: "refundd_stream_store_reads_total", Help: "Reads of a run's new events."})
	s.wakeups = prometheus.NewCounter(prometheus.CounterOpts{Name: "refundd_stream_wakeups_total", Help: "Notifications for a watched run."})
	s.reg.MustRegister(s.reads, s.wakeups, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return s, nil
}

func (s *bareServer) Close() { s.db.Close() }

// listen follows refundd's event channel until ctx ends.
func (s *bareServer) listen(ctx context.Context, dbURL string) error {
	l := pq.NewListener(dbURL, 100*time.Millisecond, 5*time.Second, nil)
	if err := l.Listen(store.ChannelEvents); err != nil {
		l.Close()
		return fmt.Errorf("bare: listen: %w", err)
	}
	go func() {
		defer l.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case n := <-l.Notify:
				if n == nil { // reconnected: anything may have been missed
					s.mu.Lock()
					for _, r := range s.runs {
						s.wakeLocked(r)
					}
					s.mu.Unlock()
					continue
				}
				id, _, _ := strings.Cut(n.Extra, ":")
				runID, err := uuid.Parse(id)
				if err != nil {
					continue
				}
				s.mu.Lock()
				if r := s.runs[runID]; r != nil {
					s.wakeups.Inc()
					s.wakeLocked(r)
				}
				s.mu.Unlock()
			}
		}
	}()
	return nil
}

// wakeLocked starts a read of r unless one is in flight, in which case
// that one reads again when done: a storm of notifications costs one read
// per wake-up at most.
func (s *bareServer) wakeLocked(r *bareRun) {
	if r.reading {
		r.again = true
		return
	}
	r.reading = true
	go s.drain(r)
}

func (s *bareServer) drain(r *bareRun) {
	for {
		s.mu.Lock()
		after := r.last
		r.again = false
		s.mu.Unlock()
		msgs, last, err := s.readAfter(r.id, after)
		s.mu.Lock()
		if err != nil {
			s.log.Warn("bare: read", "run", r.id, "err", err)
		}
		if last > r.last {
			r.last = last
		}
		for ch := range r.subs {
			for _, m := range msgs {
				select {
				case ch <- m:
				default: // a watcher that does not keep up is dropped
					delete(r.subs, ch)
					close(ch)
				}
				if _, ok := r.subs[ch]; !ok {
					break
				}
			}
		}
		if !r.again {
			r.reading = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// readAfter reads the run's events after seq and renders each as an SSE
// message carrying the event JSON, as refundd's API stream does.
func (s *bareServer) readAfter(runID uuid.UUID, after int64) ([][]byte, int64, error) {
	s.reads.Inc()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := s.read.QueryContext(ctx, runID, after)
	if err != nil {
		return nil, after, err
	}
	defer rows.Close()
	var msgs [][]byte
	last := after
	for rows.Next() {
		var e store.Event
		if err := rows.Scan(&e.RunID, &e.Seq, &e.EventID, &e.Type, &e.Class, &e.Payload, &e.CreatedAt); err != nil {
			return msgs, last, err
		}
		b, _ := json.Marshal(e)
		msgs = append(msgs, fmt.Appendf(nil, "id: %d\ndata: %s\n\n", e.Seq, b))
		last = e.Seq
	}
	return msgs, last, rows.Err()
}

// subscribe adds a watcher of runID; a run's first watcher reads where its
// log ends, so watchers get what commits from then on.
func (s *bareServer) subscribe(ctx context.Context, runID uuid.UUID) (chan []byte, error) {
	ch := make(chan []byte, 256)
	s.mu.Lock()
	r := s.runs[runID]
	if r != nil {
		r.subs[ch] = struct{}{}
		s.mu.Unlock()
		return ch, nil
	}
	s.mu.Unlock()
	var last int64
	if err := s.db.QueryRowContext(ctx, `SELECT last_seq FROM runs WHERE id = $1`, runID).Scan(&last); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r = s.runs[runID]; r == nil {
		r = &bareRun{id: runID, last: last, subs: map[chan []byte]struct{}{}}
		s.runs[runID] = r
	}
	r.subs[ch] = struct{}{}
	return ch, nil
}

func (s *bareServer) unsubscribe(runID uuid.UUID, ch chan []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.runs[runID]; r != nil {
		if _, ok := r.subs[ch]; ok {
			delete(r.subs, ch)
			close(ch)
		}
	}
}

// ServeHTTP serves GET /runs/{id}/stream and GET /metrics.
func (s *bareServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/metrics" {
		promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		return
	}
	id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/runs/"), "/stream")
	runID, err := uuid.Parse(id)
	if !ok || err != nil {
		http.NotFound(w, r)
		return
	}
	ch, err := s.subscribe(r.Context(), runID)
	if err != nil {
		http.Error(w, "no such run", http.StatusNotFound)
		return
	}
	defer s.unsubscribe(runID, ch)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case m, open := <-ch:
			if !open {
				return
			}
			if _, err = w.Write(m); err == nil {
				err = rc.Flush()
			}
		case <-ping.C:
			if _, err = io.WriteString(w, ": ping\n\n"); err == nil {
				err = rc.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// serveBare is `loadtest bare-serve`: it serves until ctx ends and prints
// "bare is running at URL" once it listens.
func serveBare(ctx context.Context, dbURL, addr string, stdout io.Writer, logger *slog.Logger) error {
	s, err := newBareServer(ctx, dbURL, logger)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.listen(ctx, dbURL); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "bare is running at http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
