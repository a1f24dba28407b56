package devdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/refundd/refundd/store"
)

// DemoPassword is the password of every demo login. Dev only.
const DemoPassword = "demo"

// DemoUser is one of the demo logins that `refundd dev` seeds.
type DemoUser struct {
	Email, Name, Role string
	Grants            []string
}

// DemoUsers are the demo logins of DESIGN.md, one per role (two customers).
var DemoUsers = []DemoUser{
	{"customer@example.com", "Casey Customer", store.RoleCustomer, []string{store.GrantRefundAccess}},
	{"customer2@example.com", "Cam Customer", store.RoleCustomer, []string{store.GrantRefundAccess}},
	{"approver@example.com", "Avery Approver", store.RoleApprover, nil},
	{"support@example.com", "Sam Support", store.RoleSupport, nil},
	{"admin@example.com", "Ada Admin", store.RoleAdmin, nil},
}

type demoOrder struct {
	description string
	amount      int64
	currency    string
}

var demoOrders = map[string][]demoOrder{
	"customer@example.com": {
		{"Trail running shoes", 12999, "EUR"},
		{"Rain jacket", 8950, "EUR"},
		{"Water bottle", 1599, "EUR"},
	},
	"customer2@example.com": {
		{"Espresso machine", 34900, "USD"},
		{"Coffee beans, 1 kg", 2450, "USD"},
	},
}

// SeedDemo creates the demo users and their orders. Running it again changes
// nothing: users are matched by email, orders are only added to a customer
// who has none.
func SeedDemo(ctx context.Context, s *store.Store) error {
	for _, d := range DemoUsers {
		u, err := s.UserByEmail(ctx, d.Email)
		if errors.Is(err, store.ErrNotFound) {
			u, err = s.CreateUser(ctx, d.Email, d.Name, d.Role, DemoPassword, d.Grants...)
		}
		if err != nil {
			return fmt.Errorf("devdb: seed %s: %w", d.Email, err)
		}
		orders, err := s.OrdersByCustomer(ctx, u.ID)
		if err != nil {
			return err
		}
		if len(orders) > 0 {
			continue
		}
		for _, o := range demoOrders[d.Email] {
			if _, err := s.CreateOrder(ctx, u.ID, o.description, o.amount, o.currency); err != nil {
				return fmt.Errorf("devdb: seed order: %w", err)
			}
		}
	}
	return nil
}
