package payments

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server serves a Sim on a TCP address: `refundd provider` and `refundd dev`
// run one.
type Server struct {
	addr string
	sim  *Sim

	mu       sync.Mutex
	srv      *http.Server
	ln       net.Listener
	stopping chan struct{}
	served   chan struct{}
	stopOnce sync.Once
}

// NewServer returns a server for sim on addr ("127.0.0.1:8081"; port 0
// picks a free one, see URL).
func NewServer(addr string, sim *Sim) *Server {
	return &Server{addr: addr, sim: sim, stopping: make(chan struct{}), served: make(chan struct{})}
}

// Start binds the address and serves in the background until ctx ends or
// Stop is called. It returns once the server accepts connections.
func (s *Server) Start(ctx context.Context) error {
	select {
	case <-s.stopping:
		return errors.New("payments: server already stopped")
	default:
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           s.sim.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// No WriteTimeout: latency and held answers are the point.
	}
	srv.RegisterOnShutdown(s.sim.Close)
	s.mu.Lock()
	s.srv, s.ln = srv, ln
	s.mu.Unlock()
	go func() {
		defer close(s.served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("payments: provider server", "err", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Stop()
		case <-s.stopping:
		}
	}()
	return nil
}

// URL is the base URL clients use, valid after Start.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Stop shuts the server down, ending held answers, and waits for it. It is
// safe to call twice, and before Start.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		close(s.stopping)
		s.mu.Lock()
		srv := s.srv
		s.mu.Unlock()
		if srv == nil {
			close(s.served)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
	})
	<-s.served
}
