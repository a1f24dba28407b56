package views_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"
	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

func render(t *testing.T, c templ.Component) *goquery.Document {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestHomePage_Customer(t *testing.T) {
	t.Parallel()
	u := &store.User{ID: 7, Email: "casey@example.com", Name: "Casey <script>", Role: store.RoleCustomer}
	orders := []store.Order{{ID: 42, Description: "Shoes", Amount: 12999, Refundable: 2999, Currency: "EUR"}}
	doc := render(t, views.HomePage(u, views.Home{Orders: orders}))

	if got := doc.Find("h1").Text(); got != "Hello, Casey <script>" {
		t.Errorf("h1 = %q, want the escaped name as text", got)
	}
	if doc.Find("main script:not([src])").Length() != 0 {
		t.Error("a user's name was rendered as markup")
	}
	row := doc.Find("#" + views.OrderRowID(42))
	if row.Length() != 1 {
		t.Fatalf("no row #%s", views.OrderRowID(42))
	}
	cells := row.Find("td").Map(func(_ int, s *goquery.Selection) string { return s.Text() })
	if got, want := strings.Join(cells, "|"), "#42|Shoes|€129.99|€29.99"; got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
	if got := doc.Find("#who .role").Text(); got != store.RoleCustomer {
		t.Errorf("header role = %q, want %q", got, store.RoleCustomer)
	}
}

func TestHomePage_CustomerWithoutOrders(t *testing.T) {
	t.Parallel()
	doc := render(t, views.HomePage(&store.User{Name: "N", Role: store.RoleCustomer}, views.Home{}))
	if !strings.Contains(doc.Find("#orders").Text(), "no orders yet") {
		t.Errorf("#orders = %q, want it to say there are no orders", doc.Find("#orders").Text())
	}
}

func TestLayout_LoadsAssets(t *testing.T) {
	t.Parallel()
	doc := render(t, views.LoginPage(views.LoginForm{}))
	var scripts []string
	doc.Find("script[src]").Each(func(_ int, s *goquery.Selection) { scripts = append(scripts, s.AttrOr("src", "")) })
	joined := strings.Join(scripts, " ")
	for _, want := range []string{"/static/vendor/htmx.min.js", "/static/vendor/sse.js"} {
		if !strings.Contains(joined, want) {
			t.Errorf("scripts = %v, want %s", scripts, want)
		}
	}
	if href := doc.Find(`link[rel="stylesheet"]`).AttrOr("href", ""); !strings.HasPrefix(href, "/static/app.css?v=") {
		t.Errorf("stylesheet = %q, want a versioned /static/app.css", href)
	}
	if doc.Find("#who").Length() != 0 {
		t.Error("a visitor's page shows a signed-in header")
	}
}

func TestLoginPage_KeepsTypedEmail(t *testing.T) {
	t.Parallel()
	doc := render(t, views.LoginPage(views.LoginForm{Email: `x"@example.com`, Error: "You entered a wrong email or password."}))
	if got := doc.Find(`input[name="email"]`).AttrOr("value", ""); got != `x"@example.com` {
		t.Errorf("email value = %q", got)
	}
	if got := doc.Find("#login-error").Text(); !strings.Contains(got, "wrong email or password") {
		t.Errorf("#login-error = %q", got)
	}
}

func TestLayout_NavMarksTheCurrentPage(t *testing.T) {
	t.Parallel()
	support := &store.User{Name: "Sam", Role: store.RoleSupport}
	for _, tc := range []struct{ path, current string }{
		{"/", "/"},
		{"/support/runs", "/support/runs"},
		{"/support/runs/0190", "/support/runs"},
		{"/support/audit", "/support/audit"},
		{"/runs/0190", ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			var buf bytes.Buffer
			if err := views.HomePage(support, views.Home{}).Render(views.WithPath(context.Background(), tc.path), &buf); err != nil {
				t.Fatal(err)
			}
			doc, err := goquery.NewDocumentFromReader(&buf)
			if err != nil {
				t.Fatal(err)
			}
			links := doc.Find(`nav.site-nav a`).Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("href", "") })
			if got, want := strings.Join(links, " "), "/ /support/runs /support/audit"; got != want {
				t.Errorf("nav = %q, want %q", got, want)
			}
			current := doc.Find(`nav.site-nav a[aria-current="page"]`)
			if got := current.AttrOr("href", ""); got != tc.current || current.Length() > 1 {
				t.Errorf("current = %q (%d links), want %q", got, current.Length(), tc.current)
			}
			if doc.Find(`body > a.skip-link[href="#main"]`).Length() != 1 || doc.Find("main#main").Length() != 1 {
				t.Error("no skip link to main")
			}
		})
	}
}

func TestHomePage_CustomerRunsSayWhatAndWhere(t *testing.T) {
	t.Parallel()
	u := &store.User{Name: "Casey", Role: store.RoleCustomer}
	run := func(state string, amount int64, item string) store.RunListing {
		return store.RunListing{Run: store.Run{ID: uuid.New(), State: state, Amount: amount, Currency: "EUR", OrderID: 3}, Item: item}
	}
	waiting, done := run(store.StateAwaitingApproval, 1200, "Blue mug"), run(store.StateCompleted, 500, "Tea")
	doc := render(t, views.HomePage(u, views.Home{Runs: &store.OwnRuns{Runs: []store.RunListing{waiting, done}, Version: 7}}))
	link := doc.Find("#run-row-" + waiting.ID.String() + " a")
	if got := strings.Join(strings.Fields(link.Text()), " "); got != "Refund of €12.00 for Blue mug — Waiting for an approver" {
		t.Errorf("link text = %q", got)
	}
	if got := link.AttrOr("href", ""); got != "/runs/"+waiting.ID.String() {
		t.Errorf("href = %q", got)
	}
	list := doc.Find("#runs")
	if got := list.AttrOr("sse-connect", ""); got != "/runs/events?after=7" {
		t.Errorf("sse-connect = %q, want the list's stream after its version", got)
	}
	if got := list.AttrOr("data-applied", ""); got != "7" {
		t.Errorf("data-applied = %q, want the list's version", got)
	}
	if doc.Find(`#runs ul[aria-live="polite"]`).Length() != 1 {
		t.Error("the list is no polite live region")
	}
	empty := render(t, views.HomePage(u, views.Home{Runs: &store.OwnRuns{Version: 0}}))
	if got := empty.Find("#runs").AttrOr("sse-connect", ""); got != "/runs/events?after=0" {
		t.Errorf("an empty list's sse-connect = %q: a run started elsewhere must still join it", got)
	}
}
