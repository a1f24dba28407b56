package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// cliRun is a run with a few events in a fresh database.
func cliRun(t *testing.T) (*store.Store, *store.Run) {
	t.Helper()
	ctx := context.Background()
	st := storetest.MustOpen(t)
	c, err := st.CreateUser(ctx, "c@example.com", "C", store.RoleCustomer, "pw", store.GrantRefundAccess)
	if err != nil {
		t.Fatal(err)
	}
	o, err := st.CreateOrder(ctx, c.ID, "Shoes", 5000, "EUR")
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := st.StartRun(ctx, store.StartRequest{OwnerID: c.ID, ClientRequestID: "k", OrderID: o.ID, Amount: 100, Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := st.Append(ctx, r.ID, store.EventOf(store.NarrationDelta{Text: "hi "})); err != nil {
			t.Fatal(err)
		}
	}
	return st, r
}

func runCLI(t *testing.T, st *store.Store, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	env := map[string]string{"DATABASE_URL": st.URL(), "PROVIDER_URL": "http://127.0.0.1:1"}
	code = run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
	return code, out.String(), errOut.String()
}

func seqsOf(t *testing.T, lines string) []int64 {
	t.Helper()
	var seqs []int64
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		if l == "" {
			continue
		}
		var e store.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q is not event JSON: %v", l, err)
		}
		seqs = append(seqs, e.Seq)
	}
	return seqs
}

func TestEvents_PrintsJSONLines(t *testing.T) {
	t.Parallel()
	st, r := cliRun(t)
	code, out, errOut := runCLI(t, st, "events", "--run", r.ID.String(), "--after", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := seqsOf(t, out); len(got) != 3 || got[0] != 2 || got[2] != 4 {
		t.Errorf("seqs = %v, want [2 3 4]", got)
	}
	if !strings.Contains(out, `"type":"narration.delta"`) || !strings.Contains(out, `"class":"presentation"`) {
		t.Errorf("output lacks event fields:\n%s", out)
	}
}

func TestEvents_UnknownRunAndBadCursor(t *testing.T) {
	t.Parallel()
	st, r := cliRun(t)
	ctx := context.Background()
	// Prune narration so that cursor 1 has expired.
	if _, err := storetest.DB(t, st).ExecContext(ctx, `UPDATE run_events SET created_at = now() - interval '1 day'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Prune(ctx, store.Retention{Presentation: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"unknown run", []string{"--run", "0198c3a2-0000-7000-8000-000000000000"}, 1, "no run 0198c3a2-0000-7000-8000-000000000000"},
		{"expired cursor", []string{"--run", r.ID.String(), "--after", "1"}, 1, "no longer kept"},
		{"cursor from the future", []string{"--run", r.ID.String(), "--after", "99"}, 1, "outside this run's log"},
		{"malformed cursor", []string{"--run", r.ID.String(), "--after", "x1"}, 2, "is not a sequence number"},
		{"negative cursor", []string{"--run", r.ID.String(), "--after", "-1"}, 2, "is not a sequence number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, st, append([]string{"events"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.says) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, nothing, %q", code, out, errOut, tc.code, tc.says)
			}
		})
	}
}

func TestEvents_Follow(t *testing.T) {
	t.Parallel()
	st, r := cliRun(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	env := map[string]string{"DATABASE_URL": st.URL()}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"events", "--run", r.ID.String(), "--follow"}, func(k string) string { return env[k] }, pw, io.Discard)
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
	read := func() int64 {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the command's output ended")
			}
			return seqsOf(t, line)[0]
		case <-time.After(10 * time.Second):
			t.Fatal("no line printed within 10 s")
		}
		return 0
	}
	for want := int64(1); want <= 4; want++ {
		if got := read(); got != want {
			t.Fatalf("seq = %d, want %d", got, want)
		}
	}
	// Appended after the command caught up: it must print them as they commit.
	for range 2 {
		if _, err := st.Append(context.Background(), r.ID, store.EventOf(store.NarrationDelta{})); err != nil {
			t.Fatal(err)
		}
	}
	for want := int64(5); want <= 6; want++ {
		if got := read(); got != want {
			t.Fatalf("followed seq = %d, want %d", got, want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("events --follow exit code after interrupt = %d, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("events --follow still running 10 s after the interrupt")
	}
}

func TestVerify_ListsViolationsAndExitsNonZero(t *testing.T) {
	t.Parallel()
	st, r := cliRun(t)
	code, out, _ := runCLI(t, st, "verify")
	if code != 0 || !strings.Contains(out, "ok: every invariant holds") {
		t.Fatalf("verify of a clean database: exit %d\n%s", code, out)
	}
	if _, err := storetest.DB(t, st).Exec(`DELETE FROM run_events WHERE run_id = $1 AND seq = 2`, r.ID); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, st, "verify")
	if code != 1 || !strings.Contains(out, "violation: contiguous seqs") || !strings.Contains(errOut, "1 invariant violation") {
		t.Errorf("verify of a broken log: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}
