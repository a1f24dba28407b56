package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

func from(ip string) context.Context {
	return store.WithActor(context.Background(), store.Actor{IP: ip})
}

func seeded(t *testing.T) *store.Store {
	t.Helper()
	s := storetest.MustOpen(t)
	if err := devdb.SeedDemo(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAuthenticate_ThrottledPerAccount(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	for i := range store.LoginAttemptsPerAccount {
		// Spread over addresses: the account's limit holds whatever the
		// address, for every address the account has not signed in from.
		_, err := s.Authenticate(from(fmt.Sprintf("192.0.2.%d", i)), "customer@example.com", "guess")
		if !errors.Is(err, store.ErrBadCredentials) {
			t.Fatalf("attempt %d: err = %v, want ErrBadCredentials", i+1, err)
		}
	}
	if _, err := s.Authenticate(from("198.51.100.1"), "Customer@Example.com", devdb.DemoPassword); !errors.Is(err, store.ErrTooManyAttempts) {
		t.Errorf("right password over the account's limit: err = %v, want ErrTooManyAttempts", err)
	}
	if _, err := s.Authenticate(from("192.0.2.0"), "customer2@example.com", devdb.DemoPassword); err != nil {
		t.Errorf("another account from a used address: %v, want a login", err)
	}
	if got := count(t, s, `SELECT count(*) FROM login_attempts WHERE at > now() - interval '1 minute' AND key = sha256('account:customer@example.com')`); got != store.LoginAttemptsPerAccount {
		t.Errorf("recorded attempts = %d, want %d: refused attempts must not extend the lock", got, store.LoginAttemptsPerAccount)
	}
}

func TestAuthenticate_ThrottledPerAddress(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	const ip = "203.0.113.7"
	for i := range store.LoginAttemptsPerAddress {
		_, err := s.Authenticate(from(ip), fmt.Sprintf("user%d@example.com", i), "guess")
		if !errors.Is(err, store.ErrBadCredentials) {
			t.Fatalf("attempt %d: err = %v, want ErrBadCredentials", i+1, err)
		}
	}
	if _, err := s.Authenticate(from(ip), "customer@example.com", devdb.DemoPassword); !errors.Is(err, store.ErrTooManyAttempts) {
		t.Errorf("right password over the address's limit: err = %v, want ErrTooManyAttempts", err)
	}
	if _, err := s.Authenticate(from("203.0.113.8"), "customer@example.com", devdb.DemoPassword); err != nil {
		t.Errorf("same account from another address: %v, want a login", err)
	}
	var stored int
	if err := storetest.DB(t, s).Get(&stored, `SELECT count(*) FROM login_attempts WHERE encode(key, 'escape') LIKE '%example.com%'`); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Errorf("%d throttle keys hold a typed email in clear", stored)
	}
}

func TestAuthenticate_ParallelGuessesStopAtTheLimit(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	var wg sync.WaitGroup
	var wrong, refused atomic.Int64
	for i := range 3 * store.LoginAttemptsPerAccount {
		wg.Go(func() {
			_, err := s.Authenticate(from(fmt.Sprintf("192.0.2.%d", i)), "approver@example.com", "guess")
			switch {
			case errors.Is(err, store.ErrBadCredentials):
				wrong.Add(1)
			case errors.Is(err, store.ErrTooManyAttempts):
				refused.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, want := wrong.Load(), int64(store.LoginAttemptsPerAccount); got != want {
		t.Errorf("passwords checked = %d, want %d (refused %d)", got, want, refused.Load())
	}
}

func TestAuthenticate_SuccessForgivesEarlierFailures(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	ctx := from("192.0.2.1")
	for round := range 2 {
		for range store.LoginAttemptsPerAccountAddress - 1 {
			if _, err := s.Authenticate(ctx, "support@example.com", "typo"); !errors.Is(err, store.ErrBadCredentials) {
				t.Fatalf("round %d: err = %v, want ErrBadCredentials", round, err)
			}
		}
		if _, err := s.Authenticate(ctx, "support@example.com", devdb.DemoPassword); err != nil {
			t.Fatalf("round %d: login: %v", round, err)
		}
	}
}

// auditRow is what a person checks in the audit log.
type auditRow struct {
	ActorID *int64 `db:"actor_id"`
	ActorIP string `db:"actor_ip"`
	Action  string `db:"action"`
	Subject string `db:"subject"`
	Details string `db:"details"`
}

func auditRows(t *testing.T, s *store.Store) []auditRow {
	t.Helper()
	var rows []auditRow
	if err := storetest.DB(t, s).Select(&rows, `SELECT actor_id, actor_ip, action, subject, details::text AS details FROM audit_log ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestAudit_RecordsWhoWhatAndWhere(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.s
	if _, err := s.Authenticate(from("192.0.2.10"), "c@example.com", "wrong"); !errors.Is(err, store.ErrBadCredentials) {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(from("192.0.2.10"), "c@example.com", "pw"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(from("192.0.2.11"), "ghost@example.com", "secret-typed"); !errors.Is(err, store.ErrBadCredentials) {
		t.Fatal(err)
	}
	admin, err := s.CreateUser(context.Background(), "admin@example.com", "Ad", store.RoleAdmin, "pw")
	if err != nil {
		t.Fatal(err)
	}
	asAdmin := store.WithActor(context.Background(), store.Actor{UserID: admin.ID, IP: "192.0.2.20"})
	if err := s.SetGrant(asAdmin, f.customer.ID, store.GrantRefundAccess, false); err != nil {
		t.Fatal(err)
	}
	if err := s.SetGrant(asAdmin, f.customer.ID, store.GrantRefundAccess, false); err != nil {
		t.Fatal(err) // no change: no second row
	}
	if err := s.SetGrant(asAdmin, f.customer.ID, store.GrantRefundAccess, true); err != nil {
		t.Fatal(err)
	}
	approved, canceled := f.start(t, "a", 100), f.start(t, "b", 100)
	for _, r := range []*store.Run{approved, canceled} {
		if _, err := s.RequestApproval(context.Background(), r.ID, store.ActionProposed{}); err != nil {
			t.Fatal(err)
		}
	}
	asApprover := store.WithActor(context.Background(), store.Actor{UserID: f.approver.ID, IP: "192.0.2.30"})
	if _, err := s.Approve(asApprover, approved.ID, f.approver.ID, ""); err != nil {
		t.Fatal(err)
	}
	asCustomer := store.WithActor(context.Background(), store.Actor{UserID: f.customer.ID, IP: "192.0.2.40"})
	if _, err := s.RequestCancel(asCustomer, canceled.ID, f.customer.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDisabled(asAdmin, f.customer.ID, true); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRole(asAdmin, f.approver.ID, store.RoleSupport); err != nil {
		t.Fatal(err)
	}

	c, a, ad := f.customer.ID, f.approver.ID, admin.ID
	want := []auditRow{
		{nil, "192.0.2.10", store.AuditLoginFailed, store.UserSubject(c), `{"reason": "wrong_password"}`},
		{&c, "192.0.2.10", store.AuditLogin, store.UserSubject(c), `{}`},
		{nil, "192.0.2.11", store.AuditLoginFailed, "", `{"email": "ghost@example.com", "reason": "unknown_email"}`},
		{&ad, "192.0.2.20", store.AuditGrantRemoved, store.UserSubject(c), `{"grant": "refund_access"}`},
		{&ad, "192.0.2.20", store.AuditGrantAdded, store.UserSubject(c), `{"grant": "refund_access"}`},
		{&a, "192.0.2.30", store.AuditRunApproved, store.RunSubject(approved.ID), fmt.Sprintf(`{"approver_id": %d}`, a)},
		{&c, "192.0.2.40", store.AuditRunCancelRequested, store.RunSubject(canceled.ID), fmt.Sprintf(`{"by": %d}`, c)},
		{&ad, "192.0.2.20", store.AuditUserDisabled, store.UserSubject(c), `{}`},
		{&ad, "192.0.2.20", store.AuditRoleChanged, store.UserSubject(a), `{"to": "support", "from": "approver"}`},
	}
	got := auditRows(t, s)
	if len(got) != len(want) {
		t.Fatalf("audit rows = %d, want %d:\n%s", len(got), len(want), show(got))
	}
	for i := range want {
		if show(got[i:i+1]) != show(want[i:i+1]) {
			t.Errorf("row %d = %s, want %s", i, show(got[i:i+1]), show(want[i:i+1]))
		}
	}
	for _, r := range got {
		if strings.Contains(r.Details, "secret-typed") || strings.Contains(r.Details, `"pw"`) {
			t.Errorf("a password reached the audit log: %+v", r)
		}
	}
	wantAuditLogReads(t, s)
}

// wantAuditLogReads checks how TestAudit_RecordsWhoWhatAndWhere's rows read
// back: by action, and newest first.
func wantAuditLogReads(t *testing.T, s *store.Store) {
	t.Helper()
	entries, err := s.AuditLogBefore(context.Background(), store.AuditLogin, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].ActorEmail.String != "c@example.com" {
		t.Errorf("AuditLogBefore(login) = %+v, want the one login by c@example.com", entries)
	}
	all, err := s.AuditLogBefore(context.Background(), "", 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].Action != store.AuditRoleChanged {
		t.Errorf("AuditLog newest first = %+v, want 3 starting with the role change", all)
	}
}

func show(rows []auditRow) string {
	var b strings.Builder
	for _, r := range rows {
		actor := "-"
		if r.ActorID != nil {
			actor = fmt.Sprint(*r.ActorID)
		}
		fmt.Fprintf(&b, "[%s %s %s %s %s]\n", actor, r.ActorIP, r.Action, r.Subject, r.Details)
	}
	return b.String()
}

func TestAudit_RefusedChangeLeavesNoRow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := f.start(t, "x", 100)
	// Not waiting for approval: Approve is refused, and so must its audit row.
	if d, err := f.s.Approve(context.Background(), run.ID, f.approver.ID, ""); err != nil || !errors.Is(d.Why, store.ErrConflict) {
		t.Fatalf("approve = %+v, %v; want refused with a conflict", d, err)
	}
	if got := count(t, f.s, `SELECT count(*) FROM audit_log WHERE action = $1`, store.AuditRunApproved); got != 0 {
		t.Errorf("audit rows for a refused approval = %d, want 0", got)
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	s := f.s
	tok, secret, err := s.CreateToken(ctx, f.customer.ID, "  ci  ")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Name != "ci" || !strings.HasPrefix(secret, store.TokenPrefix) || len(secret) < 40 {
		t.Errorf("token = %+v, %q; want name ci and a long prefixed secret", tok, secret)
	}
	if got := count(t, s, `SELECT count(*) FROM api_tokens WHERE token_hash = sha256(convert_to($1, 'UTF8'))`, secret); got != 1 {
		t.Errorf("rows keyed by the token's SHA-256 = %d, want 1", got)
	}
	if got := count(t, s, `SELECT count(*) FROM api_tokens t WHERE position(convert_to($1, 'UTF8') IN t.token_hash) > 0
        OR t.name LIKE '%'||$1||'%' OR row_to_json(t)::text LIKE '%'||$2||'%'`, secret, secret[len(store.TokenPrefix):]); got != 0 {
		t.Errorf("the token is stored in clear in %d rows", got)
	}

	u, err := s.UserByToken(ctx, secret)
	if err != nil || u.ID != f.customer.ID || !u.Has(store.GrantRefundAccess) {
		t.Fatalf("UserByToken = %+v, %v; want the customer with their grant", u, err)
	}
	t.Run("grants are current", func(t *testing.T) {
		if err := s.SetGrant(ctx, f.customer.ID, store.GrantRefundAccess, false); err != nil {
			t.Fatal(err)
		}
		u, err := s.UserByToken(ctx, secret)
		if err != nil || u.Has(store.GrantRefundAccess) {
			t.Errorf("UserByToken after revoking the grant = %+v, %v; want no grant", u, err)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		for _, bad := range []string{"", "rfd_", secret + "x", strings.TrimPrefix(secret, store.TokenPrefix)} {
			if _, err := s.UserByToken(ctx, bad); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("UserByToken(%q) err = %v, want ErrNotFound", bad, err)
			}
		}
	})
	t.Run("disabled user", func(t *testing.T) {
		if err := s.SetDisabled(ctx, f.customer.ID, true); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UserByToken(ctx, secret); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
		if err := s.SetDisabled(ctx, f.customer.ID, false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UserByToken(ctx, secret); err != nil {
			t.Errorf("enabled again: %v", err)
		}
	})
	t.Run("revoked", func(t *testing.T) {
		if err := s.RevokeToken(ctx, tok.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeToken(ctx, tok.ID); err != nil {
			t.Errorf("revoking twice: %v", err)
		}
		if _, err := s.UserByToken(ctx, secret); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
		if err := s.RevokeToken(ctx, tok.ID+1000); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("revoking an unknown token: err = %v, want ErrNotFound", err)
		}
	})
	if _, _, err := s.CreateToken(ctx, f.customer.ID, " "); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("nameless token: err = %v, want ErrInvalid", err)
	}
	if _, _, err := s.CreateToken(ctx, 999999, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("token for nobody: err = %v, want ErrNotFound", err)
	}
}

// TestUserChanges_NotifyLiveStreams: a disabled user, a changed role, a
// revoked grant or token wakes whatever watches that user.
func TestUserChanges_NotifyLiveStreams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	l := store.NewListener(f.s.URL(), testLogger(t))
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	wake, cancel := l.Subscribe(store.UserTopic(fmt.Sprint(f.customer.ID)))
	defer cancel()
	tok, _, err := f.s.CreateToken(ctx, f.customer.ID, "x")
	if err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func() error{
		"disable":      func() error { return f.s.SetDisabled(ctx, f.customer.ID, true) },
		"role":         func() error { return f.s.SetRole(ctx, f.customer.ID, store.RoleApprover) },
		"grant":        func() error { return f.s.SetGrant(ctx, f.customer.ID, store.GrantRefundAccess, false) },
		"revoke token": func() error { return f.s.RevokeToken(ctx, tok.ID) },
	} {
		// Drain a wake-up left by an earlier change.
		select {
		case <-wake:
		default:
		}
		if err := change(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Errorf("%s: no wake-up within 10s", name)
		}
	}
}

func TestSetRole_Invalid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := f.s.SetRole(context.Background(), f.customer.ID, "root"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("err = %v, want ErrInvalid", err)
	}
	if err := f.s.SetRole(context.Background(), 999999, store.RoleAdmin); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown user: err = %v, want ErrNotFound", err)
	}
	if err := f.s.SetDisabled(context.Background(), 999999, true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("disable unknown user: err = %v, want ErrNotFound", err)
	}
}

func TestSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	s := f.s
	sid, err := s.CreateSession(ctx, f.customer.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := s.UserBySession(ctx, sid); err != nil || u.ID != f.customer.ID || !u.Has(store.GrantRefundAccess) {
		t.Fatalf("UserBySession = %+v, %v; want the customer with their grant", u, err)
	}
	if got := count(t, s, `SELECT count(*) FROM sessions WHERE id_hash = sha256(convert_to($1, 'UTF8'))`, sid); got != 1 {
		t.Errorf("sessions keyed by the ID's SHA-256 = %d, want 1 (and never the ID itself)", got)
	}
	t.Run("expired", func(t *testing.T) {
		old, err := s.CreateSession(ctx, f.customer.ID, -time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.UserBySession(ctx, old); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
	})
	t.Run("ended", func(t *testing.T) {
		other, err := s.CreateSession(ctx, f.customer.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.EndSession(ctx, other); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UserBySession(ctx, other); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
		if _, err := s.UserBySession(ctx, sid); err != nil {
			t.Errorf("ending one session ended another: %v", err)
		}
	})
	t.Run("disabling ends every session", func(t *testing.T) {
		if err := s.SetDisabled(ctx, f.customer.ID, true); err != nil {
			t.Fatal(err)
		}
		if err := s.SetDisabled(ctx, f.customer.ID, false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UserBySession(ctx, sid); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
	})
}
