package views_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"

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
	if doc.Find("main script").Length() != 0 {
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
