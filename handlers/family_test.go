package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// familyAmounts are a request's refunds as issue 22 words its outcome:
// €1.50, €2.00 and €1.50, €5.00 in all.
var familyAmounts = []int64{150, 200, 150}

// startFamily starts a request of customer@example.com with a refund of
// each amount, each of a new order of its own.
func (a *app) startFamily(t testing.TB, amounts ...int64) *store.Family {
	t.Helper()
	ctx := context.Background()
	cust := a.user(t, "customer@example.com")
	req := store.FamilyRequest{OwnerID: cust.ID, ClientRequestID: uuid.NewString(), Reason: "The delivery was two weeks late."}
	for i, amount := range amounts {
		var id int64
		if err := a.db.GetContext(ctx, &id, `INSERT INTO orders (customer_id, description, amount, currency)
            VALUES ($1, $2, 5000, 'EUR') RETURNING id`, cust.ID, fmt.Sprintf("Family order %d", i+1)); err != nil {
			t.Fatal(err)
		}
		req.Refunds = append(req.Refunds, store.RefundItem{OrderID: id, Amount: amount})
	}
	fam, _, err := a.store.StartFamily(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return fam
}

// checked takes a child through the agent's check, as planned does.
func (b *endingBuilder) checked(run *store.Run) {
	b.t.Helper()
	_, err := b.a.store.Transition(b.ctx, run.ID, store.StateCreated, store.StatePlanning, store.EventOf(store.RunPlanning{}))
	b.must(err)
	b.attempt(run, "planning")
	b.say(run, "I'm looking at order #"+strconv.FormatInt(run.OrderID, 10)+". ")
}

// The endings of a family's children in the tests: refunded, declined by
// the provider, canceled by the customer.
func (b *endingBuilder) childRefunded(run *store.Run) {
	b.checked(run)
	b.refunded(run, b.sent(run), "re_F"+strconv.Itoa(run.Position))
}

func (b *endingBuilder) childDeclined(run *store.Run) {
	b.checked(run)
	op := b.sent(run)
	b.record(op, store.Outcome{State: store.OpFailed, Reason: "declined by the card issuer"})
	b.finish(run, store.StateFailed, store.Say("The payment provider did not refund it. No money moved."))
}

func (b *endingBuilder) childCanceled(run *store.Run) {
	b.checked(run)
	b.awaiting(run)
	b.cancel(run, "customer@example.com", "")
	b.finish(run, store.StateCanceled, views.Answers{}.Canceled(false))
}

// TestFamilyPage_WordsFromTheChildren: the request's page says how it
// stands from its refunds alone, with a card per refund naming who acted,
// as each refund moves and once all have ended.
func TestFamilyPage_WordsFromTheChildren(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	fam := a.startFamily(t, familyAmounts...)
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	page := func() (outcome string, cards []string) {
		t.Helper()
		r := a.get(t, c, "/runs/"+fam.Parent.ID.String())
		wantStatus(t, r, http.StatusOK)
		doc := r.doc(t)
		if got := doc.Find(".child a").Length(); got != len(fam.Children) {
			t.Errorf("%d links to the refunds' pages, want %d", got, len(fam.Children))
		}
		doc.Find(".child").Each(func(i int, s *goquery.Selection) {
			if href, _ := s.Find("a").Attr("href"); href != "/runs/"+fam.Children[i].ID.String() {
				t.Errorf("card %d links to %q, want its run's page", i+1, href)
			}
			cards = append(cards, strings.Join(strings.Fields(s.Text()), " "))
		})
		return strings.TrimSpace(doc.Find("#family-outcome").Text()), cards
	}
	t.Run("a refund's page links to its request", func(t *testing.T) {
		doc := a.get(t, c, "/runs/"+fam.Children[1].ID.String()).doc(t)
		if href, _ := doc.Find("#run-request a").Attr("href"); href != "/runs/"+fam.Parent.ID.String() {
			t.Errorf("link to the request = %q, want the parent's page", href)
		}
	})
	steps := []struct {
		name    string
		do      func()
		outcome string
		card    [][]string // what each card must say, in order
	}{
		{"started", func() {}, "Nothing refunded yet: three orders being checked.",
			[][]string{{"Waiting for the agent"}, {"Waiting for the agent"}, {"Waiting for the agent"}}},
		{"one verifying", func() {
			b.checked(&fam.Children[0])
			op := b.sent(&fam.Children[0])
			b.record(op, store.Outcome{State: store.OpReconciling, Reason: "timeout"})
		}, "Nothing refunded yet: still verifying one refund, two being checked.",
			[][]string{{"Verifying the result", "Approved by an approver."}, {"Waiting for the agent"}, {"Waiting for the agent"}}},
		{"all ended", func() {
			run := &fam.Children[0]
			ops, err := a.store.OperationsByRun(b.ctx, run.ID)
			b.must(err)
			b.refunded(run, &ops[0], "re_F1")
			b.childDeclined(&fam.Children[1])
			b.childCanceled(&fam.Children[2])
		}, "Refunded €1.50 of €5.00: one order refunded, one declined by the payment provider, one canceled by you.",
			[][]string{{"Refunded €1.50.", "Approved by an approver."}, {"Declined by the payment provider.", "declined by the card issuer"}, {"Canceled by you."}}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.do()
			outcome, cards := page()
			if outcome != st.outcome {
				t.Errorf("outcome = %q, want %q", outcome, st.outcome)
			}
			for i, words := range st.card {
				for _, w := range words {
					if i >= len(cards) || !strings.Contains(cards[i], w) {
						t.Errorf("card %d of %q, want it to say %q", i+1, cards, w)
					}
				}
			}
		})
	}
}

// familyMsg is one message of a family's JSON stream.
type familyMsg struct {
	name, id string
	ev       store.Event
}

func readFamilyMsg(t *testing.T, s *sseConn) familyMsg {
	t.Helper()
	m := s.next(t)
	var ev store.Event
	if m.Event == "" || m.Event == "reset" {
		if m.Event == "" {
			if err := json.Unmarshal([]byte(m.Data), &ev); err != nil {
				t.Fatalf("data is not the event JSON: %v\n%s", err, m.Data)
			}
		}
	}
	return familyMsg{name: m.Event, id: m.ID, ev: ev}
}

// familyCursorOf is the family cursor of the family's runs as read now.
func familyCursorOf(t testing.TB, a *app, fam *store.Family) string {
	t.Helper()
	parts := []string{}
	for _, id := range append([]uuid.UUID{fam.Parent.ID}, childIDs(fam)...) {
		r, err := a.store.RunByID(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, strconv.FormatInt(r.LastSeq, 10))
	}
	return strings.Join(parts, ".")
}

func childIDs(fam *store.Family) []uuid.UUID {
	out := make([]uuid.UUID, len(fam.Children))
	for i, c := range fam.Children {
		out[i] = c.ID
	}
	return out
}

// say appends n narration pieces to run.
func (a *app) say(t testing.TB, runID uuid.UUID, n int) {
	t.Helper()
	for range n {
		if _, err := a.store.Append(context.Background(), runID, store.EventOf(store.NarrationDelta{Text: "w "})); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFamilyStream_CutResumesEveryRun: one connection carries the parent's
// and every child's log; cut, and resumed with the last id it received
// (the family cursor), it sends each run's events strictly after that
// run's own last one: none lost, none twice.
func TestFamilyStream_CutResumesEveryRun(t *testing.T) {
	t.Parallel()
	a := &streamApp{app: newApp(t, handlers.Config{}, withListener())}
	fam := a.startFamily(t, familyAmounts...)
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	runs := append([]uuid.UUID{fam.Parent.ID}, childIDs(fam)...)
	// A program starts where the family snapshot ends.
	snap := decode[struct {
		FamilyCursor string `json:"family_cursor"`
	}](t, a.get(t, c, "/api/runs/"+fam.Parent.ID.String()))
	start := snap.FamilyCursor
	if want := familyCursorOf(t, a.app, fam); start != want {
		t.Fatalf("family_cursor = %q, want %q", start, want)
	}

	s := a.open(t, c, jsonStreamPath(fam.Parent.ID, start), "")
	a.say(t, runs[1], 2)
	a.say(t, runs[3], 1)
	got := map[uuid.UUID][]int64{}
	var last string
	take := func(s *sseConn, n int) {
		for range n {
			m := readFamilyMsg(t, s)
			if m.name != "" {
				t.Fatalf("got event %q, want a message", m.name)
			}
			got[m.ev.RunID] = append(got[m.ev.RunID], m.ev.Seq)
			last = m.id
		}
	}
	take(s, 3)
	s.cancel() // the cut

	a.say(t, runs[2], 2)
	a.say(t, runs[1], 1)
	a.say(t, runs[0], 1)
	s = a.open(t, c, jsonStreamPath(fam.Parent.ID, "0"), last) // Last-Event-ID wins over after=
	take(s, 4)
	want := map[uuid.UUID][]int64{}
	for i, id := range runs {
		first, _ := strconv.ParseInt(strings.Split(start, ".")[i], 10, 64)
		lastSeq, _ := strconv.ParseInt(strings.Split(familyCursorOf(t, a.app, fam), ".")[i], 10, 64)
		for seq := first + 1; seq <= lastSeq; seq++ {
			want[id] = append(want[id], seq)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("seqs by run = %v, want %v (each run's once, in order)", got, want)
	}
	if now := familyCursorOf(t, a.app, fam); last != now {
		t.Errorf("last id = %q, want the family cursor %q", last, now)
	}
	t.Run("nothing more", func(t *testing.T) {
		a.say(t, runs[2], 1)
		m := readFamilyMsg(t, s)
		if m.ev.RunID != runs[2] || m.ev.Seq != want[runs[2]][len(want[runs[2]])-1]+1 {
			t.Errorf("next message = run %v seq %d, want the one just appended", m.ev.RunID, m.ev.Seq)
		}
	})
}

// TestFamilyStream_ExpiredCursorResetsOnlyItsRun: a family cursor whose
// part for one child is below that child's replay floor starts that child
// over from a snapshot (event: reset) and resumes every other run.
func TestFamilyStream_ExpiredCursorResetsOnlyItsRun(t *testing.T) {
	t.Parallel()
	a := &streamApp{app: newApp(t, handlers.Config{}, withListener())}
	fam := a.startFamily(t, familyAmounts...)
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	a.say(t, fam.Children[1].ID, 3)
	if _, err := a.db.Exec(`UPDATE run_events SET created_at = now() - interval '2 hours' WHERE run_id = $1`, fam.Children[1].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.Prune(context.Background(), store.Retention{Presentation: time.Hour}); err != nil {
		t.Fatal(err)
	}
	now := strings.Split(familyCursorOf(t, a.app, fam), ".")
	cursor := append([]string(nil), now...)
	cursor[2] = "1" // child 2: run.created only; what followed is pruned

	s := a.open(t, c, jsonStreamPath(fam.Parent.ID, strings.Join(cursor, ".")), "")
	m := s.next(t)
	var snap struct {
		Run struct {
			ID uuid.UUID `json:"id"`
		} `json:"run"`
		CoveringSeq int64 `json:"covering_seq"`
	}
	if err := json.Unmarshal([]byte(m.Data), &snap); err != nil {
		t.Fatal(err)
	}
	if m.Event != "reset" || snap.Run.ID != fam.Children[1].ID || m.ID != strings.Join(now, ".") {
		t.Fatalf("first message = %q of run %v, id %q; want child 2's reset, id %q", m.Event, snap.Run.ID, m.ID, strings.Join(now, "."))
	}
	a.say(t, fam.Children[0].ID, 1)
	next := readFamilyMsg(t, s)
	if next.name != "" || next.ev.RunID != fam.Children[0].ID {
		t.Errorf("then %q of run %v, want child 1's new event: the others resume", next.name, next.ev.RunID)
	}

	t.Run("the page's stream resets that refund's card", func(t *testing.T) {
		h := a.open(t, c, htmlStreamPath(fam.Parent.ID, strings.Join(cursor, ".")), "")
		m := h.next(t)
		if m.Event != "reset" || m.ID != familyCursorOf(t, a.app, fam) || !strings.Contains(m.Data, `id="child-2"`) ||
			!strings.Contains(m.Data, "continued while you were offline") || strings.Contains(m.Data, `id="child-1"`) {
			t.Errorf("first message = %q id %q:\n%s\nwant child 2's card, reset, with the offline note", m.Event, m.ID, m.Data)
		}
	})
	for _, bad := range []string{"99", "x"} { // from the future; not a seq
		t.Run("a part "+bad+" resets only its run", func(t *testing.T) {
			parts := strings.Split(familyCursorOf(t, a.app, fam), ".")
			parts[3] = bad
			h := a.open(t, c, jsonStreamPath(fam.Parent.ID, strings.Join(parts, ".")), "")
			m := h.next(t)
			if err := json.Unmarshal([]byte(m.Data), &snap); err != nil {
				t.Fatal(err)
			}
			if want := familyCursorOf(t, a.app, fam); m.Event != "reset" || snap.Run.ID != fam.Children[2].ID || m.ID != want {
				t.Fatalf("first message = %q of run %v, id %q; want child 3's reset, id %q", m.Event, snap.Run.ID, m.ID, want)
			}
			a.say(t, fam.Parent.ID, 1)
			if next := readFamilyMsg(t, h); next.name != "" || next.ev.RunID != fam.Parent.ID {
				t.Errorf("then %q of run %v, want the parent's new event", next.name, next.ev.RunID)
			}
		})
	}
	t.Run("a cursor of another family is 400", func(t *testing.T) {
		r := a.get(t, c, jsonStreamPath(fam.Parent.ID, "3.1"))
		wantAPIError(t, r, http.StatusBadRequest, store.CodeCursorInvalid)
	})
}

// TestFamilyAccess_FollowsTheParent: whoever may see the parent sees its
// children, and nobody else sees any of them (404, as a missing run).
func TestFamilyAccess_FollowsTheParent(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	fam := a.startFamily(t, familyAmounts...)
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	paths := []string{"/runs/" + fam.Parent.ID.String(), "/runs/" + fam.Children[0].ID.String(),
		"/api/runs/" + fam.Parent.ID.String(), jsonStreamPath(fam.Parent.ID, "")}
	check := func(email string, want int) {
		t.Helper()
		c := a.client(t)
		a.login(t, c, email)
		for _, p := range paths {
			if want == http.StatusOK && strings.HasSuffix(p, "/stream") {
				continue // a stream that opens goes on
			}
			if r := a.get(t, c, p); r.status != want {
				t.Errorf("%s GET %s = %d, want %d", email, p, r.status, want)
			}
		}
	}
	check("customer2@example.com", http.StatusNotFound)
	check("approver@example.com", http.StatusNotFound)
	check("support@example.com", http.StatusOK)
	check("customer@example.com", http.StatusOK)

	// Child 2 asks for an approval: approvers see the whole family, child
	// 1 too, which did not ask.
	b.checked(&fam.Children[1])
	b.awaiting(&fam.Children[1])
	check("approver@example.com", http.StatusOK)
	check("customer2@example.com", http.StatusNotFound)
}

// TestFamilyStream_RevokedAccessCutsEveryRun: a family's stream, every
// run of it, ends within 2 s of its viewer losing the parent: an approver
// disabled or their family's approval gone without a notification (the
// batched re-check covers the family through its parent), a customer's
// grant removed where that leaves nothing to see, a token revoked.
func TestFamilyStream_RevokedAccessCutsEveryRun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		cfg    handlers.Config
		viewer func(t *testing.T, a *streamApp) *http.Client
		revoke func(t *testing.T, a *streamApp, fam *store.Family)
		reason stream.Reason
	}{
		{"approval gone unnotified", handlers.Config{}, approverClient, func(t *testing.T, a *streamApp, fam *store.Family) {
			ids := pq.StringArray{}
			for _, id := range childIDs(fam) {
				ids = append(ids, id.String())
			}
			if _, err := a.db.Exec(`DELETE FROM approvals WHERE run_id = ANY($1::uuid[])`, ids); err != nil {
				t.Fatal(err)
			}
		}, stream.Denied},
		{"approver disabled", handlers.Config{}, approverClient, func(t *testing.T, a *streamApp, _ *store.Family) {
			if err := a.store.SetDisabled(context.Background(), a.user(t, "approver@example.com").ID, true); err != nil {
				t.Fatal(err)
			}
		}, stream.SignedOut},
		{"grant removed", handlers.Config{RevokedSeeNothing: true}, func(t *testing.T, a *streamApp) *http.Client { return a.customerClient(t) },
			func(t *testing.T, a *streamApp, fam *store.Family) {
				if err := a.store.SetGrant(context.Background(), fam.Parent.OwnerID, store.GrantRefundAccess, false); err != nil {
					t.Fatal(err)
				}
			}, stream.Denied},
		{"token revoked", handlers.Config{}, func(t *testing.T, a *streamApp) *http.Client {
			_, token, err := a.store.CreateToken(context.Background(), a.user(t, "customer@example.com").ID, "watcher")
			if err != nil {
				t.Fatal(err)
			}
			return &http.Client{Transport: bearer{token}}
		}, func(t *testing.T, a *streamApp, _ *store.Family) {
			var id int64
			if err := a.db.Get(&id, `SELECT id FROM api_tokens`); err != nil {
				t.Fatal(err)
			}
			if err := a.store.RevokeToken(context.Background(), id); err != nil {
				t.Fatal(err)
			}
		}, stream.SignedOut},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			cfg.Stream = stream.Config{Recheck: 300 * time.Millisecond}
			a := &streamApp{app: newApp(t, cfg, withListener())}
			fam := a.startFamily(t, familyAmounts...)
			b := &endingBuilder{t: t, a: a.app, ctx: context.Background()}
			b.checked(&fam.Children[2])
			b.awaiting(&fam.Children[2])
			s := a.open(t, tc.viewer(t, a), jsonStreamPath(fam.Parent.ID, familyCursorOf(t, a.app, fam)), "")
			if s.res.StatusCode != http.StatusOK {
				t.Fatalf("stream = %d, want 200", s.res.StatusCode)
			}
			a.say(t, fam.Children[0].ID, 1)
			if m := readFamilyMsg(t, s); m.ev.RunID != fam.Children[0].ID {
				t.Fatalf("first message of run %v, want child 1's", m.ev.RunID)
			}
			revoked := time.Now()
			tc.revoke(t, a, fam)
			var closed testkit.SSEEvent
			s.read(t, "the close event", 2*time.Second, func(ev testkit.SSEEvent, ok bool) bool {
				if !ok {
					t.Fatal("the stream ended without its close event")
				}
				closed = ev
				return ev.Event == "close"
			})
			if !strings.Contains(closed.Data, `"reason":"`+tc.reason.String()+`"`) {
				t.Errorf("close = %s, want reason %s", closed.Data, tc.reason)
			}
			s.read(t, "the stream to end", 2*time.Second-time.Since(revoked), func(_ testkit.SSEEvent, ok bool) bool { return !ok })
		})
	}
}

func approverClient(t *testing.T, a *streamApp) *http.Client {
	c := a.client(t)
	a.login(t, c, "approver@example.com")
	return c
}

// bearer sends every request with an API token.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestFamilyStream_TwentyChildrenOneStream: a family of 20 children is one
// stream on one connection, as the caps count it: a user allowed a single
// stream follows all 21 runs' logs.
func TestFamilyStream_TwentyChildrenOneStream(t *testing.T) {
	t.Parallel()
	a := &streamApp{app: newApp(t, handlers.Config{Stream: stream.Config{MaxPerUser: 1}}, withListener())}
	amounts := make([]int64, 20)
	for i := range amounts {
		amounts[i] = 100
	}
	fam := a.startFamily(t, amounts...)
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	s := a.open(t, c, jsonStreamPath(fam.Parent.ID, familyCursorOf(t, a.app, fam)), "")
	if s.res.StatusCode != http.StatusOK {
		t.Fatalf("stream = %d, want 200: the family is one stream", s.res.StatusCode)
	}
	for _, i := range []int{19, 0, 10} {
		a.say(t, fam.Children[i].ID, 1)
		if m := readFamilyMsg(t, s); m.ev.RunID != fam.Children[i].ID {
			t.Fatalf("message of run %v, want child %d's", m.ev.RunID, i+1)
		}
	}
	if parts := strings.Split(familyCursorOf(t, a.app, fam), "."); len(parts) != 21 {
		t.Fatalf("family cursor has %d parts, want 21", len(parts))
	}
}

// TestFamilyStream_LessAccessResetsEveryRun: a customer whose refund grant
// is taken away (REVOKED_ACCESS status) keeps the family's stream with
// status only: every run starts over from a status snapshot, and
// narration is no longer sent.
func TestFamilyStream_LessAccessResetsEveryRun(t *testing.T) {
	t.Parallel()
	a := &streamApp{app: newApp(t, handlers.Config{}, withListener())}
	fam := a.startFamily(t, familyAmounts...)
	c := a.customerClient(t)
	s := a.open(t, c, jsonStreamPath(fam.Parent.ID, familyCursorOf(t, a.app, fam)), "")
	if err := a.store.SetGrant(context.Background(), fam.Parent.OwnerID, store.GrantRefundAccess, false); err != nil {
		t.Fatal(err)
	}
	for i, id := range append([]uuid.UUID{fam.Parent.ID}, childIDs(fam)...) {
		m := s.next(t)
		var got struct {
			Access string `json:"access"`
			Run    struct {
				ID uuid.UUID `json:"id"`
			} `json:"run"`
		}
		if err := json.Unmarshal([]byte(m.Data), &got); err != nil {
			t.Fatal(err)
		}
		if m.Event != "reset" || got.Access != "status" || got.Run.ID != id {
			t.Fatalf("message %d = %q %s, want run %d's status reset", i+1, m.Event, m.Data, i)
		}
	}
	a.say(t, fam.Children[0].ID, 1)
	b := &endingBuilder{t: t, a: a.app, ctx: context.Background()}
	b.checked(&fam.Children[1])
	m := s.next(t)
	if m.Event != "status" || !strings.Contains(m.Data, fam.Children[1].ID.String()) || !strings.Contains(m.Data, `"state":"planning"`) {
		t.Errorf("next = %q %s, want child 2's status (child 1's narration is not sent)", m.Event, m.Data)
	}
	// The request's JSON snapshot says as much: each child's state, so the
	// API does not leave a status-only viewer at the parent's "created".
	r := a.get(t, c, "/api/runs/"+fam.Parent.ID.String())
	wantStatus(t, r, http.StatusOK)
	var snap struct {
		Access   string `json:"access"`
		Children []struct {
			Run struct {
				ID    uuid.UUID `json:"id"`
				State string    `json:"state"`
			} `json:"run"`
		} `json:"children"`
	}
	if err := json.Unmarshal([]byte(r.body), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Access != "status" || len(snap.Children) != len(fam.Children) || snap.Children[1].Run.ID != fam.Children[1].ID ||
		snap.Children[1].Run.State != store.StatePlanning {
		t.Errorf("the status-only snapshot of the request: %s", r.body)
	}
}

// TestFamilyPage_CancelTheRest: the request's owner cancels what goes on
// from its page, without JavaScript: the answer comes back with the page,
// every unfinished refund's card says who asked, the refunded one is left
// as it is, and the cancel is no longer offered.
func TestFamilyPage_CancelTheRest(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	fam := a.startFamily(t, familyAmounts...)
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	b.childRefunded(&fam.Children[0])
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	path := "/runs/" + fam.Parent.ID.String()
	if got := a.get(t, c, path).doc(t).Find("#cancel-confirm").Length(); got != 1 {
		t.Fatalf("%d cancel buttons, want 1 while refunds go on", got)
	}
	wantRedirect(t, a.post(t, c, path+"/cancel", nil), path)
	doc := a.get(t, c, path).doc(t)
	if got := strings.TrimSpace(doc.Find("#decision-result").Text()); got != "You asked to cancel this request and each of its refunds not yet ended." {
		t.Errorf("answer = %q, want the cancel's", got)
	}
	if doc.Find("#cancel-confirm").Length() != 0 {
		t.Error("the cancel is still offered after it was asked for")
	}
	doc.Find(".child").Each(func(i int, s *goquery.Selection) {
		pending := strings.Contains(s.Find(".child-pending").Text(), "Cancel requested by you")
		if want := i > 0; pending != want {
			t.Errorf("card %d says a cancel was requested: %v, want %v (%q)", i+1, pending, want, s.Text())
		}
	})
	if again := a.get(t, c, path).doc(t).Find("#decision-result").Text(); strings.TrimSpace(again) != "" {
		t.Errorf("answer on the next render = %q, want it gone", again)
	}
}

// TestFamilyPage_ApproveAllWaiting: an approver approves, from the
// request's page and without JavaScript, every refund that waits for one;
// the customer is offered no such thing.
func TestFamilyPage_ApproveAllWaiting(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	fam := a.startFamily(t, familyAmounts...)
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	for _, i := range []int{0, 1} {
		b.checked(&fam.Children[i])
		b.awaiting(&fam.Children[i])
	}
	path := "/runs/" + fam.Parent.ID.String()
	cust := a.client(t)
	a.login(t, cust, "customer@example.com")
	if a.get(t, cust, path).doc(t).Find("#approve-confirm").Length() != 0 {
		t.Error("the customer is offered to approve their own request")
	}
	c := a.client(t)
	a.login(t, c, "approver@example.com")
	doc := a.get(t, c, path).doc(t)
	if got := doc.Find("#approve-details form p").Text(); got != "Approve two refunds, €3.50 in all? The agent then sends each to the payment provider." {
		t.Errorf("approve all asks %q", got)
	}
	wantRedirect(t, a.post(t, c, path+"/approve", nil), path)
	doc = a.get(t, c, path).doc(t)
	if got := strings.TrimSpace(doc.Find("#decision-result").Text()); !strings.HasPrefix(got, "You approved 2 refunds") {
		t.Errorf("answer = %q, want the approval's", got)
	}
	if doc.Find("#approve-confirm").Length() != 0 {
		t.Error("approve all is still offered with nothing waiting")
	}
	doc.Find(".child").Each(func(i int, s *goquery.Selection) {
		approved := strings.Contains(s.Find(".child-approved").Text(), "Approved by you")
		if want := i < 2; approved != want {
			t.Errorf("card %d says approved by you: %v, want %v (%q)", i+1, approved, want, s.Text())
		}
	})
}
