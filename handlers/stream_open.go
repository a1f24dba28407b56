package handlers

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// Opening a run's stream (GET /runs/{id}/events, GET /api/runs/{id}/stream)
// is the busy path of a restart's reconnect wave: thousands of opens at once.
// echo builds every request's chain of middleware anew, a closure per
// middleware, and runs checks a stream needs in another form. streamOpener
// passes such a request's checks in one pass that reads nothing, writes
// nothing and allocates nothing: the route, its host, no body, and the
// text of its cursor and query. A request that passes goes straight to its
// route's own chain, built once: the outer middleware every answer passes
// (the request log, Recover, the security headers), then the route's own
// (the opening deadline, the user and run read in one statement) and its
// handler. Any other request, a refusal to come included, takes echo's
// whole way, which answers it in words.
type streamOpener struct {
	hosts  hostSet
	routes []openRoute
}

// openRoute is one route streamOpener serves: its path is prefix, the run
// ID, suffix.
type openRoute struct {
	path, prefix, suffix string
	open                 echo.HandlerFunc
}

// streamRoutes are the routes streamOpener serves (GET, from routes()).
var streamRoutes = []string{"/runs/:id/events", "/api/runs/:id/stream"}

func (h *Handler) newStreamOpener(outer []echo.MiddlewareFunc, routes []route) (*streamOpener, error) {
	o := &streamOpener{hosts: newHostSet(h.cfg.AllowedHosts)}
	for _, r := range routes {
		if r.method != http.MethodGet || !slices.Contains(streamRoutes, r.path) {
			continue
		}
		open := r.handler
		mw := slices.Concat(outer, r.middleware)
		for i := len(mw) - 1; i >= 0; i-- {
			open = mw[i](open)
		}
		prefix, suffix, _ := strings.Cut(r.path, ":id")
		o.routes = append(o.routes, openRoute{path: r.path, prefix: prefix, suffix: suffix, open: open})
	}
	if len(o.routes) != len(streamRoutes) {
		return nil, fmt.Errorf("handlers: the stream routes %v are not all GET routes of the table", streamRoutes)
	}
	return o, nil
}

// pre is echo's pre-routing middleware: a stream's open that passes the
// checks is served by its route's chain, everything else by next.
func (o *streamOpener) pre(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r, id := o.match(c.Request())
		if r == nil {
			return next(c)
		}
		c.SetPath(r.path)
		c.SetParamNames(paramID...)
		c.SetParamValues(id)
		return r.open(c)
	}
}

var paramID = []string{"id"}

// match is the one pass: the stream's route and run ID, or nil for a
// request echo's whole way must answer. What it checks, that way checks
// too (allowHosts, bodyGate.readBody); cross-origin protection passes
// every GET.
func (o *streamOpener) match(req *http.Request) (*openRoute, string) {
	if req.Method != http.MethodGet || req.ContentLength != 0 || req.URL.RawPath != "" || !plainQuery(req.URL.RawQuery) {
		return nil, ""
	}
	var found *openRoute
	var id string
	for i := range o.routes {
		r := &o.routes[i]
		if rest, ok := strings.CutPrefix(req.URL.Path, r.prefix); ok {
			if id, ok = strings.CutSuffix(rest, r.suffix); ok {
				found = r
				break
			}
		}
	}
	if found == nil || id == "" || strings.IndexByte(id, '/') >= 0 || !o.hosts.allows(req.Host) {
		return nil, ""
	}
	for _, name := range textHeaders {
		for _, v := range req.Header.Values(name) {
			if !plainHeader(v) {
				return nil, ""
			}
		}
	}
	return found, id
}

// plainQuery: every byte of a raw query is one that decodes to itself and
// is valid text (a cursor, after=12), so checkValues has nothing to refuse.
func plainQuery(q string) bool {
	for i := 0; i < len(q); i++ {
		switch b := q[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case b == '=' || b == '&' || b == '-' || b == '_' || b == '.' || b == ':' || b == ',' || b == '~':
		default:
			return false
		}
	}
	return true
}

// queryValue is c.QueryParam(name) without parsing the whole query into
// a map when the query is plain (every stream open that streamOpener
// passed): each value then reads as it is written.
func queryValue(c echo.Context, name string) string {
	raw := c.Request().URL.RawQuery
	if !plainQuery(raw) {
		return c.QueryParam(name)
	}
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if k, v, _ := strings.Cut(pair, "="); k == name {
			return v
		}
	}
	return ""
}

// plainHeader: a header's value is printable ASCII, which checkText passes.
func plainHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < ' ' || v[i] > '~' {
			return false
		}
	}
	return true
}
