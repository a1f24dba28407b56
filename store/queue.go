package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// The approval queue is the set of runs that wait for an approver: in
// awaiting_approval, with no cancel asked for. A trigger (migration 00008)
// keeps it in queue_entries in the transaction that changes the run, and
// counts every change in queue_head.version, which commits in order and
// NOTIFYs channelQueue. A reader that showed version N and reads version H
// has missed nothing in between: the version is the queue stream's cursor.

// QueueItem is one run in the approval queue, with the facts an approver
// decides on: who asks, for what, why, what the agent proposes, and what
// the order was paid and has already been claimed. They are read from the
// rows as they are now: an approver sees what holds at the moment of
// deciding. (views words the checks an approver reads from them.)
type QueueItem struct {
	Run
	Version       int64     `db:"queue_version"` // the queue version that added it: its place in the queue
	RequestedAt   time.Time `db:"requested_at"`
	CustomerName  string    `db:"customer_name"`
	CustomerEmail string    `db:"customer_email"`
	Item          string    `db:"item"`
	OrderAmount   int64     `db:"order_amount"`
	OrderCurrency string    `db:"order_currency"`
	// OtherRefunds is what the order's other runs that have not failed or
	// been canceled claim, over OtherRuns runs.
	OtherRefunds int64 `db:"other_refunds"`
	OtherRuns    int   `db:"other_runs"`
	// A child's request: its parent's amount (the request's total) and
	// how many orders it names; zero for a run of its own.
	RequestAmount   int64           `db:"request_amount"`
	RequestChildren int             `db:"request_children"`
	ProposalJSON    []byte          `db:"proposal"`
	Proposal        *ActionProposed `db:"-"`
	// Deadline is until when an approver may decide; unset: no deadline.
	Deadline sql.NullTime `db:"deadline"`
}

// Place is where the item stands in the queue's order.
func (it *QueueItem) Place() QueuePlace {
	return QueuePlace{Deadline: it.Deadline.Time, Version: it.Version}
}

// QueuePlace is a place in the approval queue's order: the soonest deadline
// first (runs that asked with none after every run that has one), then the
// queue version that added the run, so runs due together stand in the order
// they asked. A page starts after a place; the zero place is before all.
type QueuePlace struct {
	Deadline time.Time // zero: no deadline
	Version  int64
}

// Before reports whether p comes before q in the queue.
func (p QueuePlace) Before(q QueuePlace) bool {
	switch {
	case p.Version == 0 || q.Version == 0:
		return p.Version == 0 && q.Version != 0 // the start is before every run
	case p.Deadline.IsZero() != q.Deadline.IsZero():
		return q.Deadline.IsZero()
	case !p.Deadline.Equal(q.Deadline):
		return p.Deadline.Before(q.Deadline)
	}
	return p.Version < q.Version
}

// String is the place as a page's link carries it: the queue version, then
// for a run with a deadline a dot and the deadline in microseconds since
// 1970 (the precision PostgreSQL keeps). The zero place is "0".
func (p QueuePlace) String() string {
	s := strconv.FormatInt(p.Version, 10)
	if p.Version != 0 && !p.Deadline.IsZero() {
		s += "." + strconv.FormatInt(p.Deadline.UnixMicro(), 10)
	}
	return s
}

// ParseQueuePlace reads a place written by String; "" is the zero place. A
// number too large is an error that wraps strconv.ErrRange.
func ParseQueuePlace(raw string) (QueuePlace, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return QueuePlace{}, nil
	}
	version, due, dated := strings.Cut(s, ".")
	var p QueuePlace
	var err error
	if p.Version, err = strconv.ParseInt(version, 10, 64); err != nil {
		return QueuePlace{}, err
	}
	if dated {
		us, err := strconv.ParseInt(due, 10, 64)
		if err != nil {
			return QueuePlace{}, err
		}
		p.Deadline = time.UnixMicro(us).UTC()
	}
	if p.Version < 0 || p.String() != s {
		// Only String's own spelling: "+7", "007" or "0.5" were never sent.
		return QueuePlace{}, Refuse(CodeInvalid, "refuse.queue_place", map[string]any{"Place": QuoteCursor(raw)})
	}
	return p, nil
}

// sqlArgs are the place's deadline and version as the queue's statements
// compare them: no deadline is 'infinity', the start '-infinity'.
func (p QueuePlace) sqlArgs() (deadline string, version int64) {
	switch {
	case p.Version == 0:
		return "-infinity", 0
	case p.Deadline.IsZero():
		return "infinity", p.Version
	}
	return p.Deadline.UTC().Format(time.RFC3339Nano), p.Version
}

// QueuePage is one page of the queue as of Version: up to a page size of
// items after a place in the queue, the soonest due first, with where the
// page sits in the whole (Before items come before it, Total in all).
type QueuePage struct {
	Version int64
	After   QueuePlace // the page starts after this place; zero is the start
	Items   []QueueItem
	Before  int
	Total   int
	More    bool // items follow this page
}

var queueItemsSQL = `
SELECT ` + runColumnsOf("r") + `, q.version AS queue_version, q.entered_at AS requested_at,
    u.name AS customer_name, u.email AS customer_email,
    o.description AS item, o.amount AS order_amount, o.currency AS order_currency,
    COALESCE(other.amount, 0) AS other_refunds, COALESCE(other.runs, 0) AS other_runs,
    COALESCE(p.amount, 0) AS request_amount,
    (SELECT count(*) FROM runs k WHERE k.parent_run_id = r.parent_run_id) AS request_children,
    (SELECT e.payload FROM run_events e WHERE e.run_id = r.id AND e.type = '` + EventActionProposed + `'
     ORDER BY e.seq DESC LIMIT 1) AS proposal,
    a.deadline
FROM queue_entries q
LEFT JOIN approvals a ON a.run_id = q.run_id
JOIN runs r ON r.id = q.run_id
JOIN users u ON u.id = r.owner_id
JOIN orders o ON o.id = r.order_id
LEFT JOIN runs p ON p.id = r.parent_run_id
LEFT JOIN LATERAL (
    SELECT sum(x.amount) AS amount, count(*) AS runs FROM runs x
    WHERE x.order_id = r.order_id AND x.id <> r.id AND x.state NOT IN ('failed', 'canceled')
) other ON true
WHERE ` + queueOrder + ` > ($1::timestamptz, $2::bigint)
ORDER BY ` + queueOrder + `
LIMIT $3`

// queueOrder is an entry's place in the queue (QueuePlace), as a row to
// compare and sort by; q is its queue entry, a its approval request.
const queueOrder = `(COALESCE(a.deadline, 'infinity'), q.version)`

// runColumnsOf is runColumns qualified by a table alias, for joins.
func runColumnsOf(alias string) string {
	cols := strings.Split(runColumns, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// ApprovalQueue reads one page of the queue: up to limit items after the
// place after, and the counts, in one consistent read.
func (s *Store) ApprovalQueue(ctx context.Context, after QueuePlace, limit int) (*QueuePage, error) {
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: approval queue: %w", err)
	}
	defer tx.Rollback()
	p, err := readQueue(ctx, tx, after, limit)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: approval queue: %w", err)
	}
	return p, nil
}

func readQueue(ctx context.Context, tx *sqlx.Tx, after QueuePlace, limit int) (*QueuePage, error) {
	p := &QueuePage{After: after, Items: []QueueItem{}}
	deadline, version := after.sqlArgs()
	err := tx.QueryRowxContext(ctx, `SELECT (SELECT version FROM queue_head), (SELECT count(*) FROM queue_entries),
        (SELECT count(*) FROM queue_entries q LEFT JOIN approvals a ON a.run_id = q.run_id
         WHERE `+queueOrder+` <= ($1::timestamptz, $2::bigint))`, deadline, version).
		Scan(&p.Version, &p.Total, &p.Before)
	if err != nil {
		return nil, fmt.Errorf("store: approval queue: %w", err)
	}
	if err := tx.SelectContext(ctx, &p.Items, queueItemsSQL, deadline, version, limit+1); err != nil {
		return nil, fmt.Errorf("store: approval queue: %w", err)
	}
	if len(p.Items) > limit {
		p.Items, p.More = p.Items[:limit], true
	}
	for i := range p.Items {
		it := &p.Items[i]
		if len(it.ProposalJSON) == 0 {
			continue
		}
		var prop ActionProposed
		if err := json.Unmarshal(it.ProposalJSON, &prop); err == nil {
			it.Proposal = &prop
		}
	}
	return p, nil
}
