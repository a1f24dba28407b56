package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Order is something a customer paid for. Amount is in minor units.
type Order struct {
	ID          int64     `db:"id" json:"id"`
	CustomerID  int64     `db:"customer_id" json:"-"`
	Description string    `db:"description" json:"description"`
	Amount      int64     `db:"amount" json:"amount"`
	Currency    string    `db:"currency" json:"currency"`
	CreatedAt   time.Time `db:"created_at" json:"created_at"`
	// Refundable is what is left after refunds already reserved by runs that
	// have not failed or been canceled.
	Refundable int64 `db:"refundable" json:"refundable"`
}

// reservedSQL is the amount of an order already claimed by live or
// completed runs; a run that failed or was canceled gives its claim back.
const reservedSQL = `COALESCE((SELECT sum(r.amount) FROM runs r
    WHERE r.order_id = o.id AND r.state NOT IN ('failed', 'canceled')), 0)`

const orderColumns = `o.id, o.customer_id, o.description, o.amount, o.currency, o.created_at,
    o.amount - ` + reservedSQL + ` AS refundable`

// OrdersByCustomer lists a customer's orders, newest first.
func (s *Store) OrdersByCustomer(ctx context.Context, customerID int64) ([]Order, error) {
	orders := []Order{}
	err := s.db.SelectContext(ctx, &orders,
		`SELECT `+orderColumns+` FROM orders o WHERE o.customer_id = $1 ORDER BY o.id DESC`, customerID)
	if err != nil {
		return nil, fmt.Errorf("store: list orders: %w", err)
	}
	return orders, nil
}

// OrderByID loads one order.
func (s *Store) OrderByID(ctx context.Context, id int64) (*Order, error) {
	var o Order
	err := s.db.GetContext(ctx, &o, `SELECT `+orderColumns+` FROM orders o WHERE o.id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: load order: %w", err)
	}
	return &o, nil
}

// CreateOrder records a paid order for a customer.
func (s *Store) CreateOrder(ctx context.Context, customerID int64, description string, amount int64, currency string) (*Order, error) {
	var id int64
	err := s.db.GetContext(ctx, &id,
		`INSERT INTO orders (customer_id, description, amount, currency) VALUES ($1, $2, $3, $4) RETURNING id`,
		customerID, description, amount, currency)
	if err != nil {
		return nil, fmt.Errorf("store: create order: %w", err)
	}
	return s.OrderByID(ctx, id)
}
