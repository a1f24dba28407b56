package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"
)

// A family is one request that takes several agents: a parent run (kind
// request, the coordinating agent) and one child run per order, each a
// refund run as a single request makes it, with its own log and seq. The
// parent's log says what the coordinator knew, in its own order:
// child.started for each child when the family is made, child.finished in
// the very transaction that ends each child, and the parent's own end in
// the transaction that ends its last child. Nothing is shared across
// families: a child's end locks its own row, then its parent's.

// RefundItem is one order's refund in a family request.
type RefundItem struct {
	OrderID int64 `json:"order_id"`
	Amount  int64 `json:"amount"` // minor units
}

// FamilyRequest is a customer's request for several refunds at once.
type FamilyRequest struct {
	OwnerID         int64
	ClientRequestID string
	Refunds         []RefundItem
	Reason          string
	// RetryOf is StartRequest's: the run this request asks again for.
	RetryOf uuid.NullUUID
	// Language is StartRequest's, every refund's too.
	Language string
	// MaxChildren bounds len(Refunds) (MAX_FAMILY_SIZE); RatePerMinute is
	// StartRequest's, counting each child as a start.
	MaxChildren   int
	RatePerMinute int
}

// Validate checks what can be checked without the database.
func (r *FamilyRequest) Validate() error {
	switch {
	case len(r.Refunds) == 0:
		return Refuse(CodeInvalid, "refuse.family_no_orders", nil)
	case r.MaxChildren > 0 && len(r.Refunds) > r.MaxChildren:
		return Refuse(CodeInvalid, "refuse.family_too_many", map[string]any{"Max": r.MaxChildren, "Count": len(r.Refunds)})
	}
	seen := map[int64]bool{}
	for i, it := range r.Refunds {
		one := StartRequest{OwnerID: r.OwnerID, ClientRequestID: r.ClientRequestID, OrderID: it.OrderID, Amount: it.Amount, Reason: r.Reason}
		if err := one.Validate(); err != nil {
			var e *Error
			if errors.As(err, &e) && (it.OrderID <= 0 || it.Amount <= 0) {
				return Refuse(e.Code, "refuse.refund_n", map[string]any{"N": i + 1, "Why": e})
			}
			return err
		}
		r.Reason, r.ClientRequestID = one.Reason, one.ClientRequestID
		if seen[it.OrderID] {
			return Refuse(CodeInvalid, "refuse.family_order_twice", map[string]any{"Order": it.OrderID})
		}
		seen[it.OrderID] = true
	}
	return nil
}

// Family is a parent run and its children, in their family order.
type Family struct {
	Parent   *Run
	Children []Run
}

// StartFamily creates, in one transaction and under one client request ID,
// a parent run and one child run per refund, or returns the family this
// owner already created with that ID (created=false). The same ID with
// another body (other orders, amounts or reason, or a single-order run) is
// ErrIdempotencyConflict. The orders are locked in ID order, so families
// and single starts on the same orders never reserve more than was paid.
func (s *Store) StartFamily(ctx context.Context, req FamilyRequest) (fam *Family, created bool, err error) {
	if err := req.Validate(); err != nil {
		return nil, false, err
	}
	err = s.inTx(ctx, func(tx *txn) error {
		if fam, err = existingFamily(ctx, tx, req); !errors.Is(err, ErrNotFound) {
			return err
		}
		if err := checkAskAgain(ctx, tx, req.OwnerID, req.RetryOf); err != nil {
			return err
		}
		orders, err := lockOrders(ctx, tx, req)
		if err != nil {
			return err
		}
		if fam, err = existingFamily(ctx, tx, req); !errors.Is(err, ErrNotFound) {
			return err
		}
		if err := checkStartRate(ctx, tx, req.OwnerID, req.RatePerMinute, len(req.Refunds)); err != nil {
			return err
		}
		if fam, created, err = s.insertFamily(ctx, tx, req, orders); err != nil || !created {
			return err
		}
		return notifyWork(ctx, tx)
	})
	if err != nil {
		return nil, false, err
	}
	return fam, created, nil
}

// lockOrders locks the request's orders in ID order and checks that each is
// the owner's, still refundable by the amount asked, and that all are in
// one currency. The map is by order ID.
func lockOrders(ctx context.Context, tx *txn, req FamilyRequest) (map[int64]Order, error) {
	ids := make([]int64, len(req.Refunds))
	for i, it := range req.Refunds {
		ids[i] = it.OrderID
	}
	// Lock first, then sum in a statement of its own: a statement reads
	// the snapshot it began with, so a sum read with the lock would miss a
	// start that committed while this one waited for it (as StartRun).
	var rows []Order
	if err := tx.SelectContext(ctx, &rows, `SELECT id, customer_id, amount, currency
        FROM orders WHERE id = ANY($1) AND customer_id = $2 ORDER BY id FOR UPDATE`, pq.Array(ids), req.OwnerID); err != nil {
		return nil, fmt.Errorf("store: lock orders: %w", err)
	}
	var sums []struct {
		OrderID  int64 `db:"order_id"`
		Reserved int64 `db:"reserved"`
	}
	if err := tx.SelectContext(ctx, &sums, `SELECT order_id, sum(amount) AS reserved FROM runs
        WHERE order_id = ANY($1) AND state NOT IN ('failed', 'canceled') GROUP BY order_id`, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("store: reserved amounts: %w", err)
	}
	reserved := map[int64]int64{}
	for _, r := range sums {
		reserved[r.OrderID] = r.Reserved
	}
	orders := map[int64]Order{}
	currencies := map[string]bool{}
	for _, o := range rows {
		orders[o.ID] = o
		currencies[o.Currency] = true
	}
	for _, it := range req.Refunds {
		o, ok := orders[it.OrderID]
		if !ok {
			// Someone else's order is answered like a missing one.
			return nil, Refuse(CodeInvalid, "refuse.no_such_order", map[string]any{"Order": it.OrderID})
		}
		if left := o.Amount - reserved[o.ID]; it.Amount > left {
			return nil, Refuse(CodeInvalid, "refuse.family_more_than_left", map[string]any{"Order": o.ID, "Left": Amount{left, o.Currency}})
		}
	}
	if len(currencies) > 1 {
		names := make([]string, 0, len(currencies))
		for c := range currencies {
			names = append(names, c)
		}
		slices.Sort(names)
		return nil, Refuse(CodeInvalid, "refuse.family_currencies", map[string]any{"Currencies": strings.Join(names, ", ")})
	}
	return orders, nil
}

// insertFamily writes the parent, its children and their first events;
// created is false when a racing start with the same key (on other orders,
// so no lock was shared) committed first: fam is then that family, or the
// error is the conflict of another body.
func (s *Store) insertFamily(ctx context.Context, tx *txn, req FamilyRequest, orders map[int64]Order) (*Family, bool, error) {
	parentID, err := uuid.NewV7()
	if err != nil {
		return nil, false, fmt.Errorf("store: run id: %w", err)
	}
	var total int64
	currency := orders[req.Refunds[0].OrderID].Currency
	for _, it := range req.Refunds {
		total += it.Amount
	}
	fam := &Family{Parent: &Run{}}
	// The parent is never a worker's: its children's ends move it.
	if err := tx.GetContext(ctx, fam.Parent, `
INSERT INTO runs (id, kind, correlation_id, owner_id, amount, currency, reason, client_request_id, next_attempt_at, retry_of, language)
VALUES ($1, 'request', $1, $2, $3, $4, $5, $6, 'infinity', $7, $8)
ON CONFLICT (owner_id, client_request_id) WHERE parent_run_id IS NULL DO NOTHING
RETURNING `+runColumns, parentID, req.OwnerID, total, currency, req.Reason, req.ClientRequestID, req.RetryOf, req.Language); errors.Is(err, sql.ErrNoRows) {
		fam, err := existingFamily(ctx, tx, req)
		if errors.Is(err, ErrNotFound) {
			return nil, false, errors.New("store: start request: conflicting insert vanished")
		}
		return fam, false, err
	} else if err != nil {
		return nil, false, fmt.Errorf("store: start request: %w", err)
	}
	parentEvents := []NewEvent{EventOf(RunCreated{Amount: total, Currency: currency, Reason: req.Reason, Refunds: req.Refunds})}
	for i, it := range req.Refunds {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, false, fmt.Errorf("store: run id: %w", err)
		}
		var c Run
		if err := tx.GetContext(ctx, &c, `
INSERT INTO runs (id, parent_run_id, correlation_id, position, owner_id, order_id, amount, currency, reason, client_request_id, language)
VALUES ($1, $2, $2, $3, $4, $5, $6, $7, $8, $9, $10)
RETURNING `+runColumns, id, parentID, i+1, req.OwnerID, it.OrderID, it.Amount, currency, req.Reason, req.ClientRequestID, req.Language); err != nil {
			return nil, false, fmt.Errorf("store: start child run: %w", err)
		}
		evs, err := s.appendEvents(ctx, tx, c.ID, EventOf(RunCreated{OrderID: it.OrderID, Amount: it.Amount, Currency: currency, Reason: req.Reason}))
		if err != nil {
			return nil, false, err
		}
		c.LastSeq = evs[len(evs)-1].Seq
		fam.Children = append(fam.Children, c)
		parentEvents = append(parentEvents, EventOf(ChildStarted{ChildRunID: c.ID, Position: i + 1, OrderID: it.OrderID, Amount: it.Amount, Currency: currency}))
	}
	evs, err := s.appendEvents(ctx, tx, parentID, parentEvents...)
	if err != nil {
		return nil, false, err
	}
	fam.Parent.LastSeq = evs[len(evs)-1].Seq
	return fam, true, nil
}

// existingFamily finds the owner's root run with this client request ID
// and its children: ErrNotFound when there is none, ErrIdempotencyConflict
// when it was started with another body.
func existingFamily(ctx context.Context, tx *txn, req FamilyRequest) (*Family, error) {
	p, err := rootByKey(ctx, tx, req.OwnerID, req.ClientRequestID)
	if err != nil {
		return nil, err
	}
	fam := &Family{Parent: p}
	if fam.Children, err = childrenOf(ctx, tx, p.ID); err != nil {
		return nil, err
	}
	same := p.IsParent() && p.Reason == req.Reason && p.RetryOf == req.RetryOf && len(fam.Children) == len(req.Refunds)
	for i := 0; same && i < len(req.Refunds); i++ {
		same = fam.Children[i].OrderID == req.Refunds[i].OrderID && fam.Children[i].Amount == req.Refunds[i].Amount
	}
	if !same {
		return nil, Refuse(CodeIdempotencyConflict, "refuse.family_key_reused", nil)
	}
	return fam, nil
}

// childrenOf reads a parent's children in family order.
func childrenOf(ctx context.Context, q interface {
	SelectContext(context.Context, any, string, ...any) error
}, parentID uuid.UUID) ([]Run, error) {
	var out []Run
	if err := q.SelectContext(ctx, &out, `SELECT `+runColumns+` FROM runs WHERE parent_run_id = $1 ORDER BY position`, parentID); err != nil {
		return nil, fmt.Errorf("store: children: %w", err)
	}
	return out, nil
}

// FamilyOf reads a parent and its children (not in one snapshot: for that,
// FamilySnapshot). A run that is not a parent is ErrNotFound.
func (s *Store) FamilyOf(ctx context.Context, parentID uuid.UUID) (*Family, error) {
	p, err := getRun(ctx, s.db, parentID)
	if err != nil {
		return nil, err
	}
	if !p.IsParent() {
		return nil, ErrNotFound
	}
	fam := &Family{Parent: p}
	if fam.Children, err = childrenOf(ctx, s.db, parentID); err != nil {
		return nil, err
	}
	return fam, nil
}

// ParentEnd is the state a family's parent ends in once every child has:
// canceled when every child was, completed when any child refunded, failed
// otherwise.
func ParentEnd(childStates []string) string {
	switch {
	case !slices.ContainsFunc(childStates, func(s string) bool { return s != StateCanceled }):
		return StateCanceled
	case slices.Contains(childStates, StateCompleted):
		return StateCompleted
	}
	return StateFailed
}

// ChildEnding is how one child of a request ended, as its parent's final
// answer counts it (Answers.Request).
type ChildEnding struct {
	ID       uuid.UUID `db:"id"`
	OrderID  int64     `db:"order_ref"`
	State    string    `db:"state"`
	Amount   int64     `db:"amount"`
	Refunded int64     `db:"refunded"`
	Declined bool      `db:"declined"`
	Expired  bool      `db:"expired"` // nobody decided by its deadline
}

// childEnded records, in the transaction that ends child r (its row locked
// and its new state written), child.finished in its parent's log, and when
// it was the last child, the parent's end. It locks the parent after the
// child, as every family write does.
func (s *Store) childEnded(ctx context.Context, tx *txn, r *Run) error {
	var parent Run
	if err := tx.GetContext(ctx, &parent, lockRunSQL, r.ParentRunID.UUID); err != nil {
		return fmt.Errorf("store: lock parent: %w", err)
	}
	var kids []ChildEnding
	if err := tx.SelectContext(ctx, &kids, `SELECT r.id, r.order_ref, r.state, r.amount,
        COALESCE((SELECT sum(op.amount) FROM operations op WHERE op.run_id = r.id AND op.state = 'succeeded'), 0) AS refunded,
        EXISTS (SELECT 1 FROM operations op WHERE op.run_id = r.id AND op.state = 'failed') AS declined,
        EXISTS (SELECT 1 FROM approvals a WHERE a.run_id = r.id AND a.decision = '`+DecidedExpired+`') AS expired
        FROM runs r WHERE r.parent_run_id = $1 ORDER BY r.position`, parent.ID); err != nil {
		return fmt.Errorf("store: family: %w", err)
	}
	var (
		states []string
		evs    []NewEvent
	)
	for _, k := range kids {
		if k.ID == r.ID {
			evs = append(evs, EventOf(ChildFinished{ChildRunID: k.ID, OrderID: k.OrderID, State: r.State,
				Outcome: EndedAs(r.State, k.Declined, r.CancelRequested()), Refunded: k.Refunded, Currency: r.Currency}))
		}
		states = append(states, k.State)
	}
	if slices.ContainsFunc(states, func(s string) bool { return !Terminal(s) }) || Terminal(parent.State) {
		_, err := s.appendEvents(ctx, tx, parent.ID, evs...)
		return err
	}
	end := ParentEnd(states)
	endEvent, _ := terminalEvent(end)
	if s.answers == nil {
		return ErrNoAnswers
	}
	final, err := insertFinal(ctx, tx, parent.ID, s.answers.Request(kids, parent.Currency))
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = $2, finished_at = now() WHERE id = $1`, parent.ID, end); err != nil {
		return fmt.Errorf("store: end request: %w", err)
	}
	evs = append(evs, final, EventOf(endEvent))
	_, err = s.appendEvents(ctx, tx, parent.ID, evs...)
	return err
}

// FamilySnapshot is one consistent read of a family: the parent's snapshot
// and each child's, all as of one REPEATABLE READ transaction, in a number
// of statements that does not grow with the children.
type FamilySnapshot struct {
	Parent   *Snapshot
	Children []*Snapshot
}

// SnapshotFamily reads a parent and its children in one transaction: each
// child's state, ledger, approval, final message and marks (what its
// progress folds), with its covering seq.
func (s *Store) SnapshotFamily(ctx context.Context, parentID uuid.UUID) (*FamilySnapshot, error) {
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	defer tx.Rollback()
	parent, err := readSnapshot(ctx, preparedTx{tx, s}, parentID, readEvents)
	if err != nil {
		return nil, err
	}
	if !parent.Run.IsParent() {
		return nil, ErrNotFound
	}
	kids, err := childrenOf(ctx, tx, parentID)
	if err != nil {
		return nil, err
	}
	fs := &FamilySnapshot{Parent: parent}
	byID := map[uuid.UUID]*Snapshot{}
	ids := make([]uuid.UUID, len(kids))
	for i := range kids {
		snap := &Snapshot{Run: &kids[i], CoveringSeq: kids[i].LastSeq, ReplayFloor: kids[i].ReplayFloor, Events: []Event{}}
		fs.Children = append(fs.Children, snap)
		byID[kids[i].ID] = snap
		ids[i] = kids[i].ID
	}
	if err := readChildren(ctx, tx, ids, byID); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	return fs, nil
}

// readChildren fills the children's snapshots with a statement per kind of
// row, whatever their number.
func readChildren(ctx context.Context, tx interface {
	SelectContext(context.Context, any, string, ...any) error
}, ids []uuid.UUID, byID map[uuid.UUID]*Snapshot) error {
	var ops []Operation
	if err := tx.SelectContext(ctx, &ops, `SELECT `+operationColumns+` FROM operations WHERE run_id = ANY($1) ORDER BY created_at`, pq.Array(ids)); err != nil {
		return fmt.Errorf("store: family operations: %w", err)
	}
	for _, op := range ops {
		byID[op.RunID].Operations = append(byID[op.RunID].Operations, op)
	}
	var approvals []Approval
	if err := tx.SelectContext(ctx, &approvals, `SELECT `+approvalColumns+` FROM approvals WHERE run_id = ANY($1)`, pq.Array(ids)); err != nil {
		return fmt.Errorf("store: family approvals: %w", err)
	}
	for i := range approvals {
		byID[approvals[i].RunID].Approval = &approvals[i]
	}
	var msgs []FinalMessage
	if err := tx.SelectContext(ctx, &msgs, `SELECT run_id, body, body_in, created_at FROM final_messages WHERE run_id = ANY($1)`, pq.Array(ids)); err != nil {
		return fmt.Errorf("store: family messages: %w", err)
	}
	for i := range msgs {
		byID[msgs[i].RunID].FinalMessage = &msgs[i]
	}
	var marks []Event
	if err := tx.SelectContext(ctx, &marks, `SELECT `+eventColumns+` FROM run_events
        WHERE run_id = ANY($1) AND type IN ('`+strings.Join(markTypes, "', '")+`') ORDER BY run_id, seq`, pq.Array(ids)); err != nil {
		return fmt.Errorf("store: family marks: %w", err)
	}
	for _, m := range marks {
		byID[m.RunID].Marks = append(byID[m.RunID].Marks, m)
	}
	var verifying []struct {
		RunID uuid.UUID `db:"run_id"`
		At    time.Time `db:"created_at"`
	}
	if err := tx.SelectContext(ctx, &verifying, `SELECT DISTINCT ON (run_id) run_id, created_at FROM run_events
        WHERE run_id = ANY($1) AND type = '`+EventOperationReconciling+`' ORDER BY run_id, seq DESC`, pq.Array(ids)); err != nil {
		return fmt.Errorf("store: family verifying since: %w", err)
	}
	since := make(map[uuid.UUID]time.Time, len(verifying))
	for _, v := range verifying {
		since[v.RunID] = v.At
	}
	for id, snap := range byID {
		snap.StateSince = stateSinceOf(snap, since[id])
	}
	return nil
}

// lockChildren locks a parent's children in ID order, the one order every
// family write locks them in (before the parent, as a child's end does),
// and returns them in family order.
func lockChildren(ctx context.Context, tx *txn, parentID uuid.UUID) ([]Run, error) {
	var kids []Run
	if err := tx.SelectContext(ctx, &kids, `SELECT `+runColumns+` FROM runs WHERE parent_run_id = $1 ORDER BY id FOR UPDATE`, parentID); err != nil {
		return nil, fmt.Errorf("store: lock children: %w", err)
	}
	slices.SortFunc(kids, func(a, b Run) int { return cmp.Compare(a.Position, b.Position) })
	return kids, nil
}

// FamilyDecision is what a cancel of a whole family did: the parent's
// outcome and each child's, in family order.
type FamilyDecision struct {
	Decision
	Children []Decision
}

// CancelFamily records byUserID's cancel on a parent and on every child not
// yet ended, in one transaction; each child honours it at its own safe
// boundary, as a single run's cancel. A child the refund may already have
// left for is DecisionTooLate, and so is the family's outcome then. The
// children are locked (in ID order) before the parent, as a child's end
// locks them.
func (s *Store) CancelFamily(ctx context.Context, parentID uuid.UUID, byUserID int64, reason string) (FamilyDecision, error) {
	if err := checkDecisionReason(reason); err != nil {
		return FamilyDecision{}, err
	}
	var fd FamilyDecision
	err := s.inTx(ctx, func(tx *txn) error {
		fd = FamilyDecision{}
		kids, err := lockChildren(ctx, tx, parentID)
		if err != nil {
			return err
		}
		parent := &Run{}
		if err := tx.GetContext(ctx, parent, lockRunSQL, parentID); errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		} else if err != nil {
			return fmt.Errorf("store: lock run: %w", err)
		}
		if !parent.IsParent() {
			return ErrNotFound
		}
		fd.Run = parent
		switch {
		case Terminal(parent.State):
			fd.Outcome = DecisionRunFinished
			return nil
		case parent.CancelRequested():
			fd.Outcome = DecisionAlreadyMade
		default:
			fd.Outcome = DecisionAccepted
		}
		by, err := decidedBy(ctx, tx, byUserID, reason)
		if err != nil {
			return err
		}
		for i := range kids {
			d, err := s.cancelLocked(ctx, tx, &kids[i], byUserID, by)
			if err != nil {
				return err
			}
			if d.Outcome == DecisionTooLate {
				fd.Outcome = DecisionTooLate
			}
			fd.Children = append(fd.Children, d)
		}
		// A child past its decision's deadline ended as the system's
		// (cancelLocked), and with it, when it was the last, the request.
		if err := tx.GetContext(ctx, parent, `SELECT `+runColumns+` FROM runs WHERE id = $1`, parentID); err != nil {
			return fmt.Errorf("store: read run: %w", err)
		}
		if Terminal(parent.State) {
			fd.Outcome = DecisionRunFinished
			return nil
		}
		if parent.CancelRequested() {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET cancel_requested_at = now() WHERE id = $1`, parent.ID); err != nil {
			return fmt.Errorf("store: request cancel: %w", err)
		}
		parent.CancelRequestedAt = sql.NullTime{Time: time.Now(), Valid: true}
		if err := audit(ctx, tx, AuditRunCancelRequested, RunSubject(parent.ID), auditDecision("by", byUserID, reason)); err != nil {
			return err
		}
		evs, err := s.appendEvents(ctx, tx, parent.ID, EventOf(CancelRequested{by}))
		if err != nil {
			return err
		}
		parent.LastSeq = evs[len(evs)-1].Seq
		return notifyWork(ctx, tx)
	})
	if err != nil {
		return FamilyDecision{}, err
	}
	return fd, nil
}

// cancelLocked records a cancel on r, whose row tx holds locked, as
// RequestCancelBecause does.
func (s *Store) cancelLocked(ctx context.Context, tx *txn, r *Run, byUserID int64, by DecidedBy) (Decision, error) {
	d := Decision{Run: r, Outcome: DecisionAccepted}
	// A cancel after the decision's deadline finds the run ended by the
	// system, as it would a moment later.
	if _, err := s.expireLocked(ctx, tx, r); err != nil {
		return d, err
	}
	if Terminal(r.State) {
		d.Outcome = DecisionRunFinished
		return d, nil
	}
	ops, err := operationsByRun(ctx, tx, r.ID)
	if err != nil {
		return d, err
	}
	switch {
	case CancelTooLate(ops):
		d.Outcome = DecisionTooLate
	case r.CancelRequested():
		d.Outcome = DecisionAlreadyMade
	}
	if r.CancelRequested() {
		return d, nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET cancel_requested_at = now(), next_attempt_at = now() WHERE id = $1`, r.ID); err != nil {
		return d, fmt.Errorf("store: request cancel: %w", err)
	}
	r.CancelRequestedAt = sql.NullTime{Time: time.Now(), Valid: true}
	if err := audit(ctx, tx, AuditRunCancelRequested, RunSubject(r.ID), auditDecision("by", byUserID, by.Reason)); err != nil {
		return d, err
	}
	evs, err := s.appendEvents(ctx, tx, r.ID, EventOf(CancelRequested{by}))
	if err != nil {
		return d, err
	}
	r.LastSeq = evs[len(evs)-1].Seq
	return d, nil
}
