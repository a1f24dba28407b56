package handlers

import (
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestQueryValue_ReadsAsEchoDoes: the stream's cursor read from a plain
// query without parsing it is what echo's QueryParam reads, the first
// value, for every shape of query, and a query that is not plain is
// parsed as echo parses it.
func TestQueryValue_ReadsAsEchoDoes(t *testing.T) {
	t.Parallel()
	e := echo.New()
	for _, q := range []string{
		"", "after=12", "after=", "after", "x=1&after=2&after=3", "afterx=1&after=5", "x=after&after=7",
		"after=run:12,3", "&&after=9&", "=1&after=4", "after=%31", "after=a+b", "after=1;x=2", "a%66ter=3",
	} {
		c := e.NewContext(httptest.NewRequest("GET", "/runs/x/events?"+q, nil), nil)
		want := e.NewContext(httptest.NewRequest("GET", "/runs/x/events?"+q, nil), nil).QueryParam("after")
		if got := queryValue(c, "after"); got != want {
			t.Errorf("query %q: %q, want %q as echo reads it", q, got, want)
		}
	}
}
