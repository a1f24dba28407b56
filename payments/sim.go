package payments

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	randv2 "math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // OpenSim's driver

	"github.com/refundd/refundd/internal/hostname"
)

// Error codes the simulated provider answers with, in
// {"error":{"code","message"}}.
const (
	CodeInvalidJSON     = "invalid_json"
	CodeMissingKey      = "missing_idempotency_key"
	CodeInvalidKey      = "invalid_idempotency_key"
	CodeInvalidOrderRef = "invalid_order_ref"
	CodeInvalidAmount   = "invalid_amount"
	CodeInvalidCurrency = "invalid_currency"
	CodeInvalidFaults   = "invalid_faults"
	CodeInFlight        = "in_flight"
	CodeMismatch        = "idempotency_mismatch"
	CodeNotFound        = "not_found"
	CodeUnavailable     = "unavailable"
	CodeInternal        = "internal"
	CodeWrongHost       = "wrong_host"
	CodeUnauthorized    = "unauthorized"
)

// MaxKeyLen bounds an idempotency key.
const MaxKeyLen = 200

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// Sim is the simulated payment provider: an HTTP API over its own ledger
// table (provider_refunds) with idempotency keys, lookup and fault
// injection. Its contract, which the Client relies on:
//
//   - a row exists only for a committed refund, and a committed refund
//     never changes;
//   - 503 is only ever answered before anything is committed;
//   - 404 on lookup means nothing is committed and nothing is in flight
//     for the key at that moment.
//
// A refund in flight holds a transaction-scoped advisory lock on its key,
// so in-flight detection works across connections and processes, and a
// provider that dies mid-request leaves nothing behind.
type Sim struct {
	db     *sqlx.DB
	ownsDB bool // opened by OpenSim, so CloseDB closes it

	// secret is what writes and the fault switch must present (Bearer);
	// hosts are the Host names it answers to. A page on another site,
	// whose name points at us (DNS rebinding), can send neither.
	secret string
	hosts  map[string]bool

	mu      sync.Mutex
	faults  Faults
	release chan struct{} // closed to let held answers go, then replaced

	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// NewSim returns a simulated provider over db (migrated, so that
// provider_refunds exists) with the given faults.
func NewSim(db *sqlx.DB, faults Faults) (*Sim, error) {
	if db == nil {
		return nil, errors.New("payments: NewSim: nil database")
	}
	if err := faults.Validate(); err != nil {
		return nil, fmt.Errorf("payments: NewSim: faults: %w", err)
	}
	return &Sim{
		db:      db,
		faults:  faults,
		secret:  rand.Text(),
		hosts:   map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true},
		release: make(chan struct{}),
		done:    make(chan struct{}),
	}, nil
}

// MinSecret is the shortest shared secret SetSecret takes.
const MinSecret = 16

// Secret is the shared secret writes and the fault switch require: a
// random one unless SetSecret gave another. Give it to the clients that
// write (Client.WithSecret); never show it.
func (s *Sim) Secret() string { return s.secret }

// SetSecret replaces the random secret with one shared with clients in
// other processes. Call it before serving.
func (s *Sim) SetSecret(secret string) error {
	if len(secret) < MinSecret {
		return fmt.Errorf("payments: the provider's secret must be at least %d characters", MinSecret)
	}
	s.secret = secret
	return nil
}

// AllowHost adds a Host name (no port) the provider answers to, beside
// the loopback names. Call it before serving.
func (s *Sim) AllowHost(host string) { s.hosts[hostname.Of(host)] = true }

// OpenSim returns a simulated provider with the given faults over a small
// pool of its own on the database at url (migrated, so that
// provider_refunds exists). The provider stands for a separate system: in
// dev it keeps its ledger in refundd's database, but it shares no
// connections with refundd's store. CloseDB closes the pool.
func OpenSim(ctx context.Context, url string, faults Faults) (*Sim, error) {
	db, err := sqlx.Open("postgres", url)
	if err != nil {
		return nil, fmt.Errorf("payments: open ledger: %w", err)
	}
	// A refund holds its connection for its injected latency, so a few
	// connections serve a few refunds in flight at once. All of them may
	// stay idle: database/sql keeps two by default, and a busy provider
	// then closed and opened the others (a server process each) over and
	// over.
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		db.Close()
		return nil, fmt.Errorf("payments: connect to ledger: %w", err)
	}
	s, err := NewSim(db, faults)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.ownsDB = true
	return s, nil
}

// CloseDB closes the pool OpenSim opened (a Sim from NewSim uses its
// caller's pool and leaves it open). Call it once the server serving the
// Sim has stopped: Close runs while answers are still being written.
func (s *Sim) CloseDB() error {
	if !s.ownsDB {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("payments: close ledger: %w", err)
	}
	return nil
}

// Handler returns the provider's HTTP API:
//
//	POST /refunds          Idempotency-Key header, body {"order_ref","amount","currency"}:
//	                       201 receipt (new), 200 receipt (same key and parameters),
//	                       400 bad input, 409 same key in flight, 422 same key with
//	                       other parameters, 503 nothing committed
//	GET  /refunds/{key}    200 receipt, 404 never committed, 409 in flight
//	GET  /refunds          {"refunds":[receipt…]}, the whole ledger, oldest first
//	GET  /admin/faults     the fault settings (see Faults for the JSON)
//	PUT  /admin/faults     replace them; 400 invalid_faults if they make no sense
//	POST /admin/release    let the answers held by hold_after_commit go; 204
//
// It answers only to its Host names (421 otherwise), and writes (POST,
// PUT) need Authorization: Bearer with its secret (401 otherwise).
//
// Errors are {"error":{"code","message"}} with the Code* constants.
func (s *Sim) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /refunds", s.createRefund)
	mux.HandleFunc("GET /refunds", s.listRefunds)
	mux.HandleFunc("GET /refunds/{key}", s.showRefund)
	mux.HandleFunc("GET /admin/faults", s.showFaults)
	mux.HandleFunc("PUT /admin/faults", s.saveFaults)
	mux.HandleFunc("POST /admin/release", s.releaseHeld)
	return s.guard(mux)
}

// guard refuses requests addressed to another Host (421), and writes
// (anything but GET and HEAD) without the shared secret (401).
func (s *Sim) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts[hostname.Of(r.Host)] {
			writeError(w, http.StatusMisdirectedRequest, CodeWrongHost, "this provider does not answer to that Host")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(token), []byte(s.secret)) != 1 {
				writeError(w, http.StatusUnauthorized, CodeUnauthorized, "writes need the provider's secret (Authorization: Bearer …)")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Faults returns the current fault settings.
func (s *Sim) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// SetFaults replaces the fault settings. Turning HoldAfterCommit off
// releases the answers it holds.
func (s *Sim) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults.HoldAfterCommit && !f.HoldAfterCommit {
		s.releaseLocked()
	}
	s.faults = f
	return nil
}

// Release lets every answer currently held by HoldAfterCommit go.
func (s *Sim) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked()
}

func (s *Sim) releaseLocked() {
	close(s.release)
	s.release = make(chan struct{})
}

// Close ends every wait the provider is in (latency, held and dropping
// answers) so a server can shut down promptly. It is safe to call twice.
func (s *Sim) Close() {
	s.closeOnce.Do(func() { close(s.done) })
}

// takeError5xx decides, and counts, whether an injected 503 fires for
// this refund.
func (s *Sim) takeError5xx() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.faults.FailBeforeCommit:
		return true
	case s.faults.Error5xxNext > 0:
		s.faults.Error5xxNext--
		return true
	case s.faults.Error5xxRate > 0:
		return randv2.Float64() < s.faults.Error5xxRate
	}
	return false
}

func (s *Sim) takeLookupError5xx() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults.LookupError5xxNext > 0 {
		s.faults.LookupError5xxNext--
		return true
	}
	return false
}

func (s *Sim) takeDecline() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults.DeclineNext > 0 {
		s.faults.DeclineNext--
		return true
	}
	return false
}

// wait blocks for d, or until the request ends or the provider closes. It
// reports whether the full time passed.
func (s *Sim) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.done:
	}
	return false
}

const receiptColumns = `key, ref, status, order_ref, amount, currency, failure_reason, created_at`

// lockKey is the advisory lock a refund in flight holds on its key.
const lockKey = `hashtextextended('refundd.provider:' || $1, 0)`

func (s *Sim) createRefund(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	req, code, msg := parseRefund(w, r)
	if code != "" {
		writeError(w, http.StatusBadRequest, code, msg)
		return
	}
	if s.takeError5xx() {
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "the provider is unavailable; nothing was committed")
		return
	}

	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		s.internal(w, r, "begin", err)
		return
	}
	defer tx.Rollback()
	var locked bool
	if err := tx.GetContext(ctx, &locked, `SELECT pg_try_advisory_xact_lock(`+lockKey+`)`, req.Key); err != nil {
		s.internal(w, r, "lock key", err)
		return
	}
	if !locked {
		writeError(w, http.StatusConflict, CodeInFlight, "a refund with this idempotency key is being processed")
		return
	}
	var prev Receipt
	err = tx.GetContext(ctx, &prev, `SELECT `+receiptColumns+` FROM provider_refunds WHERE key = $1`, req.Key)
	switch {
	case err == nil:
		replay(w, req, prev)
		return
	case !errors.Is(err, sql.ErrNoRows):
		s.internal(w, r, "read refund", err)
		return
	}

	if !s.wait(ctx, s.Faults().Latency) {
		// The caller gave up, or we are shutting down, before the commit.
		tx.Rollback()
		if ctx.Err() == nil {
			writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "the provider is shutting down; nothing was committed")
		}
		return
	}
	rc, f, release, ok := s.commitRefund(w, r, tx, req)
	if !ok {
		return
	}
	s.answerCommitted(w, r, rc, f, release)
}

// commitRefund inserts the refund (succeeded, or declined when the fault
// says so) and commits it. ok is false when it answered an error itself.
func (s *Sim) commitRefund(w http.ResponseWriter, r *http.Request, tx *sqlx.Tx, req RefundRequest) (rc Receipt, f Faults, release chan struct{}, ok bool) {
	status, reason := StatusSucceeded, ""
	if s.takeDecline() {
		status, reason = StatusFailed, "declined by the card issuer"
	}
	// Take the release channel before the commit becomes visible, so a
	// Release by someone who saw the commit always reaches this answer.
	s.mu.Lock()
	f, release = s.faults, s.release
	s.mu.Unlock()
	err := tx.GetContext(r.Context(), &rc, `
		INSERT INTO provider_refunds (key, ref, status, order_ref, amount, currency, failure_reason)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		RETURNING `+receiptColumns,
		req.Key, "re_"+strings.ToLower(rand.Text()), status, req.OrderRef, req.Amount, req.Currency, reason)
	if err != nil {
		s.internal(w, r, "insert refund", err)
		return rc, f, nil, false
	}
	if err := tx.Commit(); err != nil {
		// The commit may or may not have happened; a 500 tells the client
		// exactly that.
		s.internal(w, r, "commit refund", err)
		return rc, f, nil, false
	}
	rc.CreatedAt = rc.CreatedAt.UTC()
	return rc, f, release, true
}

// answerCommitted answers a committed refund, unless a fault drops or holds
// the answer.
func (s *Sim) answerCommitted(w http.ResponseWriter, r *http.Request, rc Receipt, f Faults, release chan struct{}) {
	ctx := r.Context()
	switch {
	case f.CommitThenDrop:
		if f.DropAfter > 0 {
			s.wait(ctx, f.DropAfter)
		} else {
			select {
			case <-ctx.Done():
			case <-s.done:
			}
		}
		// Close the connection without an answer: the caller cannot tell
		// the refund committed.
		panic(http.ErrAbortHandler)
	case f.HoldAfterCommit:
		select {
		case <-release:
		case <-s.done:
		case <-ctx.Done():
			return
		}
	}
	writeJSON(w, http.StatusCreated, rc)
}

// replay answers a request for a key that already committed.
func replay(w http.ResponseWriter, req RefundRequest, prev Receipt) {
	prev.CreatedAt = prev.CreatedAt.UTC()
	if prev.OrderRef != req.OrderRef || prev.Amount != req.Amount || prev.Currency != req.Currency {
		writeError(w, http.StatusUnprocessableEntity, CodeMismatch, fmt.Sprintf(
			"idempotency key already used for order %q, %d %s", prev.OrderRef, prev.Amount, prev.Currency))
		return
	}
	writeJSON(w, http.StatusOK, prev)
}

// parseRefund reads and validates a refund request; a non-empty code is a
// 400 with that code and message.
func parseRefund(w http.ResponseWriter, r *http.Request) (req RefundRequest, code, msg string) {
	key := r.Header.Get("Idempotency-Key")
	switch {
	case key == "":
		return req, CodeMissingKey, "the Idempotency-Key header is required"
	case len(key) > MaxKeyLen || strings.IndexFunc(key, func(c rune) bool { return !unicode.IsPrint(c) }) >= 0:
		return req, CodeInvalidKey, fmt.Sprintf("the Idempotency-Key must be at most %d printable characters", MaxKeyLen)
	}
	var body refundBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return req, CodeInvalidJSON, "the body must be a JSON object {order_ref, amount, currency}: " + err.Error()
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, CodeInvalidJSON, "the body must hold one JSON object"
	}
	switch {
	case strings.TrimSpace(body.OrderRef) == "":
		return req, CodeInvalidOrderRef, "order_ref is required"
	case body.Amount <= 0:
		return req, CodeInvalidAmount, "amount must be a positive integer in minor units"
	case !currencyRE.MatchString(body.Currency):
		return req, CodeInvalidCurrency, "currency must be three upper-case letters (ISO 4217)"
	}
	return RefundRequest{Key: key, OrderRef: body.OrderRef, Amount: body.Amount, Currency: body.Currency}, "", ""
}

func (s *Sim) showRefund(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	key := r.PathValue("key")
	if s.takeLookupError5xx() {
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "the provider is unavailable")
		return
	}
	rc, err := s.lookup(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, CodeNotFound, "no refund was committed with this idempotency key")
	case errors.Is(err, ErrInFlight):
		writeError(w, http.StatusConflict, CodeInFlight, "a refund with this idempotency key is being processed")
	case err != nil:
		s.internal(w, r, "lookup", err)
	default:
		writeJSON(w, http.StatusOK, rc)
	}
}

// lookup returns the committed refund for key, ErrInFlight while a
// request for it holds the key's lock, or ErrNotFound.
//
// It only looks at the lock (in pg_locks) and never takes it: a lookup that
// took it, even briefly, would make a concurrent POST answer a spurious 409,
// and reconcilers poll while submissions happen.
func (s *Sim) lookup(ctx context.Context, key string) (Receipt, error) {
	var got struct {
		Receipt
		Found    bool `db:"found"`
		InFlight bool `db:"in_flight"`
	}
	if err := s.db.GetContext(ctx, &got, lookupRow, key); err != nil {
		return Receipt{}, err
	}
	switch {
	case got.Found:
		got.CreatedAt = got.CreatedAt.UTC()
		return got.Receipt, nil
	case got.InFlight:
		return Receipt{}, ErrInFlight
	}
	// Nothing was in flight when we looked, but the statement read the row
	// with a snapshot taken before that look: a request may have committed
	// in between. A refund's commit is visible before its transaction lets
	// the key's lock go, so this read sees it.
	var rc Receipt
	err := s.db.GetContext(ctx, &rc, `SELECT `+receiptColumns+` FROM provider_refunds WHERE key = $1`, key)
	if errors.Is(err, sql.ErrNoRows) {
		return Receipt{}, ErrNotFound
	}
	if err != nil {
		return Receipt{}, err
	}
	rc.CreatedAt = rc.CreatedAt.UTC()
	return rc, nil
}

// lookupRow reads key $1's refund (found) and, in the same statement,
// whether some session holds the key's advisory lock (in_flight): one
// round trip for a refund that is there or in flight. A bigint advisory
// lock shows in pg_locks as classid = high 32 bits, objid = low 32 bits,
// objsubid = 1.
const lookupRow = `
	WITH k AS (SELECT ` + lockKey + ` AS v)
	SELECT r.key IS NOT NULL AS found,
		EXISTS (
			SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND granted
			  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			  AND classid = ((k.v >> 32) & 4294967295)::oid
			  AND objid = (k.v & 4294967295)::oid
			  AND objsubid = 1) AS in_flight,
		COALESCE(r.key, '') AS key, COALESCE(r.ref, '') AS ref, COALESCE(r.status, '') AS status,
		COALESCE(r.order_ref, '') AS order_ref, COALESCE(r.amount, 0) AS amount,
		COALESCE(r.currency, '') AS currency, COALESCE(r.failure_reason, '') AS failure_reason,
		COALESCE(r.created_at, 'epoch') AS created_at
	FROM k LEFT JOIN provider_refunds r ON r.key = $1`

func (s *Sim) listRefunds(w http.ResponseWriter, r *http.Request) {
	refunds := []Receipt{}
	err := s.db.SelectContext(r.Context(), &refunds,
		`SELECT `+receiptColumns+` FROM provider_refunds ORDER BY created_at, key`)
	if err != nil {
		s.internal(w, r, "list refunds", err)
		return
	}
	for i := range refunds {
		refunds[i].CreatedAt = refunds[i].CreatedAt.UTC()
	}
	writeJSON(w, http.StatusOK, map[string]any{"refunds": refunds})
}

func (s *Sim) showFaults(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Faults())
}

func (s *Sim) saveFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&f); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidFaults, err.Error())
		return
	}
	if err := s.SetFaults(f); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidFaults, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.Faults())
}

func (s *Sim) releaseHeld(w http.ResponseWriter, r *http.Request) {
	s.Release()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sim) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	if r.Context().Err() != nil {
		return // the caller is gone; there is nobody to answer
	}
	slog.ErrorContext(r.Context(), "payments: simulated provider", "op", what, "err", err)
	writeError(w, http.StatusInternalServerError, CodeInternal, "internal error")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var b errorBody
	b.Error.Code, b.Error.Message = code, msg
	writeJSON(w, status, b)
}
