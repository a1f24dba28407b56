package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/views"
)

// TestFamilyHome_OneRowPerRequest: the customer's home list shows a
// request once, with its total and its orders' count (no "order #0", no
// row per child), says how many of its refunds ended and, once all have,
// never more refunded than were; the live list redraws the row as each
// child ends, though the request's own state does not move until the last.
func TestFamilyHome_OneRowPerRequest(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{Stream: stream.Config{Recheck: 300 * time.Millisecond}}, withListener())
	fam := a.startFamily(t, familyAmounts...)
	b := &endingBuilder{t: t, a: a, ctx: context.Background()}
	c := a.signedIn(t, "customer@example.com")
	row := func() string {
		t.Helper()
		doc := a.get(t, c, "/").doc(t)
		for _, child := range fam.Children {
			if doc.Find("#"+views.RunRowID(child.ID)).Length() != 0 {
				t.Errorf("the home list has a row of its own for child %d", child.Position)
			}
		}
		return strings.Join(strings.Fields(doc.Find("#"+views.RunRowID(fam.Parent.ID)).Text()), " ")
	}
	if got := row(); !strings.Contains(got, "Refunds of €5.00 in all for three orders") || !strings.Contains(got, "0 of 3 refunds ended") ||
		!strings.Contains(got, "three orders · requested") || strings.Contains(got, "#0") {
		t.Errorf("the request's row reads %q", got)
	}

	sa := &streamApp{app: a}
	s := sa.open(t, c, a.runListURL(t, c), "")
	b.childRefunded(&fam.Children[0])
	parentRow := `id="` + views.RunRowID(fam.Parent.ID) + `"`
	for {
		ev := s.next(t)
		if strings.Contains(ev.Data, parentRow) {
			if !strings.Contains(ev.Data, "1 of 3 refunds ended") {
				t.Fatalf("the live row after a child ended: %q", ev.Data)
			}
			break
		}
	}
	b.childDeclined(&fam.Children[1])
	b.childCanceled(&fam.Children[2])
	if got := row(); !strings.Contains(got, "Partly refunded (1 of 3)") {
		t.Errorf("the ended request's row reads %q, want it partly refunded", got)
	}
	if r := a.get(t, c, "/"); r.status != http.StatusOK {
		t.Fatalf("home: %d", r.status)
	}
}
