package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// TestSupportSearch_FindsFamily: searching the correlation ID, the
// parent's ID or any child's lists the whole family, parent first, and no
// other run.
func TestSupportSearch_FindsFamily(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	fam := a.queuedFamily(t, "customer@example.com", 100, 200)
	other := a.startRun(t, "customer2@example.com", 100)
	c := a.signedIn(t, "support@example.com")
	want := []string{"/support/runs/" + fam.Parent.ID.String(), "/support/runs/" + fam.Children[0].ID.String(), "/support/runs/" + fam.Children[1].ID.String()}
	for _, tc := range []struct{ name, q string }{
		{"correlation ID", fam.Children[1].CorrelationID.String()},
		{"parent's ID", fam.Parent.ID.String()},
		{"a child's ID", fam.Children[0].ID.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.get(t, c, "/support/runs?"+url.Values{"q": {tc.q}}.Encode())
			wantStatus(t, r, http.StatusOK)
			got := r.doc(t).Find("#support-runs tbody td[data-label=Run] a").Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("href", "") })
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("listed %v, want the family %v", got, want)
			}
		})
	}
	r := a.get(t, c, "/support/runs?"+url.Values{"q": {other.ID.String()}}.Encode())
	if got := r.doc(t).Find("#support-runs tbody tr").Length(); got != 1 {
		t.Errorf("a run of its own lists %d runs, want 1", got)
	}
}

// TestSupportRun_FamilyTree: support's page of a request shows it with its
// correlation ID and each child with its state and link; a child's page
// shows the same tree, with its parent and siblings, itself marked.
func TestSupportRun_FamilyTree(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	fam := a.queuedFamily(t, "customer@example.com", 100, 200)
	if _, err := a.store.RequestCancel(context.Background(), fam.Children[1].ID, fam.Parent.OwnerID); err != nil {
		t.Fatal(err)
	}
	c := a.signedIn(t, "support@example.com")
	for _, shown := range []store.Run{*fam.Parent, fam.Children[0]} {
		t.Run(shown.ID.String(), func(t *testing.T) {
			r := a.get(t, c, "/support/runs/"+shown.ID.String())
			wantStatus(t, r, http.StatusOK)
			doc := r.doc(t)
			if got := doc.Find("#correlation-id").Text(); got != fam.Parent.ID.String() {
				t.Errorf("correlation ID = %q, want %s", got, fam.Parent.ID)
			}
			tree := doc.Find("#family")
			parent := tree.Find("#" + views.FamilyRunID(fam.Parent.ID))
			if !strings.Contains(parent.Text(), "Request for 2 orders, €3.00 in all") {
				t.Errorf("the tree's root says %q", parent.Text())
			}
			kids := parent.Find("ol.family-children > li")
			if kids.Length() != 2 {
				t.Fatalf("children in the tree = %d, want 2", kids.Length())
			}
			for i, ch := range fam.Children {
				li := kids.Eq(i)
				if id, _ := li.Attr("id"); id != views.FamilyRunID(ch.ID) {
					t.Errorf("child %d is %q, want %s", i+1, id, views.FamilyRunID(ch.ID))
				}
				link := li.Find(`a[href="/support/runs/` + ch.ID.String() + `"]`).Length()
				if ch.ID == shown.ID {
					if link != 0 || li.Find(`[aria-current="page"]`).Length() != 1 {
						t.Errorf("child %d is the page shown: want it marked, not linked", i+1)
					}
				} else if link != 1 {
					t.Errorf("child %d has no link to its page", i+1)
				}
				if st, _ := li.Find(".state").Attr("data-state"); st != store.StateAwaitingApproval {
					t.Errorf("child %d state = %q, want %s", i+1, st, store.StateAwaitingApproval)
				}
			}
			if shown.ID != fam.Parent.ID && parent.Find(`a[href="/support/runs/`+fam.Parent.ID.String()+`"]`).Length() != 1 {
				t.Error("a child's page does not link its parent")
			}
		})
	}
	// A run of its own has no tree.
	single := a.startRun(t, "customer2@example.com", 100)
	if doc := a.get(t, c, "/support/runs/"+single.ID.String()).doc(t); doc.Find("#family").Length() != 0 || doc.Find("#correlation-id").Length() != 0 {
		t.Error("a run of its own shows a family")
	}
}
