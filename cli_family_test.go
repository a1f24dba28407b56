package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// cliFamily is a request with two children in a fresh database.
func cliFamily(t *testing.T) (*store.Store, *store.Family) {
	t.Helper()
	ctx := context.Background()
	st := storetest.MustOpen(t)
	c, err := st.CreateUser(ctx, "c@example.com", "C", store.RoleCustomer, "pw", store.GrantRefundAccess)
	if err != nil {
		t.Fatal(err)
	}
	req := store.FamilyRequest{OwnerID: c.ID, ClientRequestID: "k", Reason: "late"}
	for _, d := range []string{"Shoes", "Jacket"} {
		o, err := st.CreateOrder(ctx, c.ID, d, 5000, "EUR")
		if err != nil {
			t.Fatal(err)
		}
		req.Refunds = append(req.Refunds, store.RefundItem{OrderID: o.ID, Amount: 100})
	}
	fam, _, err := st.StartFamily(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return st, fam
}

// familyLine is one line of `events --children`: an event with its cursor
// (run_id, seq) and its family.
type familyLine struct {
	RunID         uuid.UUID  `json:"run_id"`
	Seq           int64      `json:"seq"`
	Type          string     `json:"type"`
	ParentRunID   *uuid.UUID `json:"parent_run_id"`
	CorrelationID uuid.UUID  `json:"correlation_id"`
}

func parseFamilyLine(t *testing.T, line string) familyLine {
	t.Helper()
	var l familyLine
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.RunID == uuid.Nil || l.Seq == 0 {
		t.Fatalf("line %q is not an event with run_id and seq: %v", line, err)
	}
	if !strings.Contains(line, `"parent_run_id":`) || !strings.Contains(line, `"correlation_id":`) {
		t.Fatalf("line %q lacks parent_run_id or correlation_id", line)
	}
	return l
}

// wantFamilyOf checks a line belongs to fam: the parent's own has no
// parent, a child's names it, and all carry the parent's ID as their
// correlation ID.
func wantFamilyOf(t *testing.T, fam *store.Family, l familyLine) {
	t.Helper()
	if l.CorrelationID != fam.Parent.ID {
		t.Errorf("%s seq %d: correlation_id %s, want %s", l.RunID, l.Seq, l.CorrelationID, fam.Parent.ID)
	}
	switch {
	case l.RunID == fam.Parent.ID && l.ParentRunID != nil:
		t.Errorf("the parent's seq %d has parent_run_id %s, want null", l.Seq, l.ParentRunID)
	case l.RunID != fam.Parent.ID && (l.ParentRunID == nil || *l.ParentRunID != fam.Parent.ID):
		t.Errorf("child %s seq %d has parent_run_id %v, want %s", l.RunID, l.Seq, l.ParentRunID, fam.Parent.ID)
	}
}

func TestEvents_Children(t *testing.T) {
	t.Parallel()
	st, fam := cliFamily(t)
	code, out, errOut := runCLI(t, st, "events", "--run", fam.Parent.ID.String(), "--children")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		l := parseFamilyLine(t, line)
		wantFamilyOf(t, fam, l)
		got = append(got, fmt.Sprintf("%s/%d %s", l.RunID, l.Seq, l.Type))
	}
	p, c1, c2 := fam.Parent.ID, fam.Children[0].ID, fam.Children[1].ID
	want := []string{
		fmt.Sprintf("%s/1 run.created", p), fmt.Sprintf("%s/2 child.started", p), fmt.Sprintf("%s/3 child.started", p),
		fmt.Sprintf("%s/1 run.created", c1), fmt.Sprintf("%s/1 run.created", c2),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant the parent's log, then each child's:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestEvents_ChildrenBadFlags(t *testing.T) {
	t.Parallel()
	st, fam := cliFamily(t)
	single, _, err := st.StartRun(context.Background(), store.StartRequest{OwnerID: fam.Parent.OwnerID, ClientRequestID: "single",
		OrderID: fam.Children[0].OrderID, Amount: 1, Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"with --after", []string{"--run", fam.Parent.ID.String(), "--children", "--after", "1"}, 2, "cannot go with --children"},
		{"a child", []string{"--run", fam.Children[1].ID.String(), "--children"}, 2, "use --run " + fam.Parent.ID.String() + " --children"},
		{"a run of its own", []string{"--run", single.ID.String(), "--children"}, 2, "has no children"},
		{"unknown run", []string{"--run", "0198c3a2-0000-7000-8000-000000000000", "--children"}, 1, "no run 0198c3a2-0000-7000-8000-000000000000"},
		{"no run", []string{"--children"}, 2, "--run must be a run ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, st, append([]string{"events"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.says) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, nothing, %q", code, out, errOut, tc.code, tc.says)
			}
		})
	}
}

// TestEvents_ChildrenFollow: --follow prints what every run of the family
// commits later, each after its own last seq.
func TestEvents_ChildrenFollow(t *testing.T) {
	t.Parallel()
	st, fam := cliFamily(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	env := map[string]string{"DATABASE_URL": st.URL()}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"events", "--run", fam.Parent.ID.String(), "--children", "--follow"}, func(k string) string { return env[k] }, pw, io.Discard)
		pw.Close()
	}()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	read := func() familyLine {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the command's output ended")
			}
			l := parseFamilyLine(t, line)
			wantFamilyOf(t, fam, l)
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no line printed within 10 s")
		}
		return familyLine{}
	}
	for range 5 { // the parent's 3, each child's 1
		read()
	}
	// Committed after the command caught up, in every run of the family.
	for _, id := range []uuid.UUID{fam.Children[1].ID, fam.Children[0].ID, fam.Children[1].ID} {
		if _, err := st.Append(context.Background(), id, store.EventOf(store.NarrationDelta{Text: "hi"})); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for range 3 {
		l := read()
		got[fmt.Sprintf("%s/%d", l.RunID, l.Seq)] = true
	}
	for _, want := range []string{fmt.Sprintf("%s/2", fam.Children[0].ID), fmt.Sprintf("%s/2", fam.Children[1].ID), fmt.Sprintf("%s/3", fam.Children[1].ID)} {
		if !got[want] {
			t.Errorf("followed %v, want %s among them", got, want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code after interrupt = %d, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("events --children --follow still running 10 s after the interrupt")
	}
}
