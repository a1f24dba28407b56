package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// TestStreamAccess_OneQueryForMany: the batched re-check answers each
// credential in order: a live session and a live token find their user
// with current grants; an ended session, a revoked token, a disabled user
// and a missing run find nothing.
func TestStreamAccess_OneQueryForMany(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCredentials(t)
	s, customer, support, run := c.s, c.customer, c.support, c.run
	live, ended, token, revoked := c.live, c.ended, c.token, c.revoked
	creds := []store.StreamCredential{
		{SessionID: live, RunID: run.ID},
		{Token: token, RunID: run.ID},
		{SessionID: ended, RunID: run.ID},
		{Token: revoked, RunID: run.ID},
		{SessionID: live, RunID: uuid.New()},
	}
	facts, err := s.StreamAccess(ctx, creds)
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != len(creds) {
		t.Fatalf("%d answers for %d credentials", len(facts), len(creds))
	}
	if u := facts[0].User; u == nil || u.ID != customer.ID || !u.Has(store.GrantRefundAccess) || facts[0].Run == nil || facts[0].Run.OwnerID != customer.ID {
		t.Errorf("live session: %+v, want the customer with refund_access and their run", facts[0])
	}
	if u := facts[1].User; u == nil || u.ID != support.ID || u.Role != store.RoleSupport {
		t.Errorf("live token: %+v, want support", facts[1])
	}
	for i, what := range map[int]string{2: "ended session", 3: "revoked token"} {
		if facts[i].User != nil {
			t.Errorf("%s: user %+v, want none", what, facts[i].User)
		}
	}
	if facts[4].Run != nil || facts[4].User == nil {
		t.Errorf("missing run: %+v, want the user and no run", facts[4])
	}
	if err := s.SetDisabled(ctx, customer.ID, true); err != nil {
		t.Fatal(err)
	}
	if facts, err = s.StreamAccess(ctx, creds[:1]); err != nil || facts[0].User != nil {
		t.Errorf("disabled user: %+v, %v, want no user", facts, err)
	}
}

// TestStreamOpen_UserAndRunInOneRead: a live session or token finds its
// user (with grants) and the run in one statement, and a token's use is
// noted; an ended session, a revoked token, a missing run and a disabled
// user find nothing (ErrNotFound), leaving the plain lookups to say which.
func TestStreamOpen_UserAndRunInOneRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCredentials(t)
	s, customer, support, run := c.s, c.customer, c.support, c.run
	live, ended, token, revoked := c.live, c.ended, c.token, c.revoked

	u, r, asked, err := s.StreamOpen(ctx, &store.StreamCredential{SessionID: live, RunID: run.ID})
	if err != nil || u.ID != customer.ID || !u.Has(store.GrantRefundAccess) || r.ID != run.ID || r.OwnerID != customer.ID || r.LastSeq != run.LastSeq || asked {
		t.Errorf("live session: %+v, %+v, %v, %v; want the customer with refund_access and their run, no approval", u, r, asked, err)
	}
	u, r, _, err = s.StreamOpen(ctx, &store.StreamCredential{Token: token, RunID: run.ID})
	if err != nil || u.ID != support.ID || u.Role != store.RoleSupport || r.ID != run.ID {
		t.Errorf("live token: %+v, %+v, %v; want support and the run", u, r, err)
	}
	if t2, err := s.TokenByID(ctx, c.tokenID); err != nil || !t2.LastUsedAt.Valid {
		t.Errorf("token after a stream: %+v, %v; want its last use noted", t2, err)
	}
	for what, c := range map[string]store.StreamCredential{
		"ended session": {SessionID: ended, RunID: run.ID},
		"revoked token": {Token: revoked, RunID: run.ID},
		"missing run":   {SessionID: live, RunID: uuid.New()},
		"no credential": {RunID: run.ID},
	} {
		if u, r, _, err := s.StreamOpen(ctx, &c); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %+v, %+v, %v; want ErrNotFound", what, u, r, err)
		}
	}
	if err := s.SetDisabled(ctx, customer.ID, true); err != nil {
		t.Fatal(err)
	}
	if u, _, _, err := s.StreamOpen(ctx, &store.StreamCredential{SessionID: live, RunID: run.ID}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("disabled user: %+v, %v; want ErrNotFound", u, err)
	}
}

// TestStreamOpen_ManyAtOnce: streams opening together are read many to a
// statement, sessions and tokens each their own, and each gets its own
// answer: its user and run, or ErrNotFound for an ended session, a
// revoked token or a missing run, whatever else shares its statement; a
// token's use is noted as a lone lookup notes it.
func TestStreamOpen_ManyAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCredentials(t)
	s := c.s
	// want[i] is who creds[i] finds with the run; nil: nothing.
	creds := []store.StreamCredential{
		{SessionID: c.live, RunID: c.run.ID},
		{Token: c.token, RunID: c.run.ID},
		{SessionID: c.ended, RunID: c.run.ID},
		{SessionID: c.live, RunID: uuid.New()},
		{SessionID: "no such session", RunID: c.run.ID},
		{Token: c.revoked, RunID: c.run.ID},
		{Token: c.token, RunID: uuid.New()},
	}
	want := []*store.User{c.customer, c.support, nil, nil, nil, nil, nil}
	if len(c.customer.Grants) == 0 || len(c.support.Grants) != 0 {
		// A batch reads each user's grants once (streamOpenBatch): both
		// a user with grants and one without must be in it.
		t.Fatalf("customer's grants %v, support's %v: want some, and none", c.customer.Grants, c.support.Grants)
	}
	check := func(what string, i int, u *store.User, r *store.Run, err error) {
		t.Helper()
		if w := want[i%len(creds)]; w != nil {
			if err != nil || u.ID != w.ID || u.Role != w.Role || !slices.Equal(u.Grants, w.Grants) || r.ID != c.run.ID || r.LastSeq != c.run.LastSeq {
				t.Errorf("%s %d: %+v, %+v, %v; want %s with their grants %v and the run", what, i, u, r, err, w.Email, w.Grants)
			}
			return
		}
		if !errors.Is(err, store.ErrNotFound) || u != nil || r != nil {
			t.Errorf("%s %d: %+v, %+v, %v; want ErrNotFound", what, i, u, r, err)
		}
	}

	// One batch, answers in their places.
	var batch []store.StreamCredential
	for range 5 {
		batch = append(batch, creds...)
	}
	before := s.StreamOpenReads()
	users, runs, errs := s.StreamOpenBatch(batch)
	for i := range batch {
		check("batch", i, users[i], runs[i], errs[i])
	}
	if reads := s.StreamOpenReads() - before; reads != 2 {
		t.Errorf("a batch of sessions and tokens took %d statements; want 2, one per kind", reads)
	}
	if tok, err := s.TokenByID(ctx, c.tokenID); err != nil || !tok.LastUsedAt.Valid {
		t.Errorf("token after a batch: %+v, %v; want its last use noted", tok, err)
	}

	// Many callers at once share statements.
	const callers = 300
	before = s.StreamOpenReads()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			u, r, _, err := s.StreamOpen(ctx, &creds[i%len(creds)])
			check("caller", i, u, r, err)
		})
	}
	close(start)
	wg.Wait()
	if reads := s.StreamOpenReads() - before; reads >= callers {
		t.Errorf("%d callers at once took %d statements; want fewer (batched)", callers, reads)
	} else {
		t.Logf("%d callers at once: %d statements", callers, reads)
	}
}

// credentials is what both stream-access tests look things up with: the
// customer's run, a live and an ended session of theirs, and a live and a
// revoked token of support's.
type credentials struct {
	s                 *store.Store
	customer, support *store.User
	run               *store.Run
	live, ended       string // session IDs
	tokenID           int64  // the live token's
	token, revoked    string
}

func newCredentials(t *testing.T) credentials {
	t.Helper()
	ctx := context.Background()
	c := credentials{s: seeded(t)}
	s := c.s
	var err error
	if c.customer, err = s.UserByEmail(ctx, "customer@example.com"); err != nil {
		t.Fatal(err)
	}
	if c.support, err = s.UserByEmail(ctx, "support@example.com"); err != nil {
		t.Fatal(err)
	}
	orders, err := s.OrdersByCustomer(ctx, c.customer.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.run, _, err = s.StartRun(ctx, store.StartRequest{OwnerID: c.customer.ID, ClientRequestID: uuid.NewString(),
		OrderID: orders[0].ID, Amount: 1, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if c.live, err = s.CreateSession(ctx, c.customer.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if c.ended, err = s.CreateSession(ctx, c.customer.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.EndSession(ctx, c.ended); err != nil {
		t.Fatal(err)
	}
	tok, token, err := s.CreateToken(ctx, c.support.ID, "stream")
	if err != nil {
		t.Fatal(err)
	}
	c.tokenID, c.token = tok.ID, token
	gone, revoked, err := s.CreateToken(ctx, c.support.ID, "revoked")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	c.revoked = revoked
	return c
}

// TestStreamOpen_ReadsRunAndUserWhole: a stream's open, alone or batched,
// reads the run and its user field for field as RunByID and UserByID do
// (the opens scan their rows by hand, in their statement's column order).
func TestStreamOpen_ReadsRunAndUserWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCredentials(t)
	s := c.s
	if _, err := s.RequestCancel(ctx, c.run.ID, c.customer.ID); err != nil {
		t.Fatal(err)
	}
	wantRun, err := s.RunByID(ctx, c.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantUser, err := s.UserByID(ctx, c.customer.ID)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, u *store.User, r *store.Run, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		// Printed: times read twice need not share a *time.Location.
		if got, want := fmt.Sprintf("%+v", *r), fmt.Sprintf("%+v", *wantRun); got != want {
			t.Errorf("%s: run\n%s\nwant\n%s", what, got, want)
		}
		if got, want := fmt.Sprintf("%+v", *u), fmt.Sprintf("%+v", *wantUser); got != want {
			t.Errorf("%s: user\n%s\nwant\n%s", what, got, want)
		}
	}
	cred := store.StreamCredential{SessionID: c.live, RunID: c.run.ID}
	u, r, _, err := s.StreamOpen(ctx, &cred)
	check("alone", u, r, err)
	users, runs, errs := s.StreamOpenBatch([]store.StreamCredential{cred, cred})
	check("batched", users[1], runs[1], errs[1])
}
