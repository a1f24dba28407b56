package handlers_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/devdb"
)

// TestLogin_ReturnsToTheAskedPage: a visitor sent to the login page from a
// page lands on that page after logging in, through the form's next field.
func TestLogin_ReturnsToTheAskedPage(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)

	r := a.get(t, c, "/support/runs?state=completed")
	wantRedirect(t, r, "/login?next=%2Fsupport%2Fruns%3Fstate%3Dcompleted")
	page := a.get(t, c, r.header.Get("Location"))
	wantStatus(t, page, http.StatusOK)
	next := page.doc(t).Find(`form[action="/login"] input[name="next"]`).AttrOr("value", "")
	if next != "/support/runs?state=completed" {
		t.Fatalf("next field = %q, want the asked page", next)
	}
	wrong := a.post(t, c, "/login", url.Values{"email": {"support@example.com"}, "password": {"wrong"}, "next": {next}})
	wantStatus(t, wrong, http.StatusUnauthorized)
	if got := wrong.doc(t).Find(`input[name="next"]`).AttrOr("value", ""); got != next {
		t.Errorf("after a wrong password next = %q, want it kept", got)
	}
	ok := a.post(t, c, "/login", url.Values{"email": {"support@example.com"}, "password": {devdb.DemoPassword}, "next": {next}})
	wantRedirect(t, ok, "/support/runs?state=completed")

	t.Run("signed in already", func(t *testing.T) {
		wantRedirect(t, a.get(t, c, "/login?next=%2Fsupport%2Faudit"), "/support/audit")
	})
	t.Run("a POST is not returned to", func(t *testing.T) {
		wantRedirect(t, a.post(t, a.client(t), "/runs", url.Values{}), "/login")
	})
}

// TestLogin_RefusesForeignNext: a next that a browser would read as another
// site (or that is no path) lands on "/" instead, and is not put in the form.
func TestLogin_RefusesForeignNext(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	for _, next := range []string{
		"//evil.example/",
		"/\\evil.example/",
		"/\t/evil.example/",
		"/\\/evil.example/",
		"https://evil.example/",
		"javascript:alert(1)",
		"evil.example",
		"",
		"/login",
	} {
		t.Run(next, func(t *testing.T) {
			t.Parallel()
			c := a.client(t)
			page := a.get(t, c, "/login?next="+url.QueryEscape(next))
			wantStatus(t, page, http.StatusOK)
			if n := page.doc(t).Find(`input[name="next"]`).Length(); n != 0 {
				t.Errorf("the form carries next %q", page.doc(t).Find(`input[name="next"]`).AttrOr("value", ""))
			}
			r := a.post(t, c, "/login", url.Values{"email": {"customer@example.com"}, "password": {devdb.DemoPassword}, "next": {next}})
			wantRedirect(t, r, "/")
		})
	}
}
