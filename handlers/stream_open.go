package handlers

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// Opening a run's stream (GET /runs/{id}/events, GET /api/runs/{id}/stream)
// is the busy path of a restart's reconnect wave: thousands of opens at once.
// echo builds every request's chain of middleware anew, a closure per
// middleware, and runs checks a stream needs in another form. streamOpener
// passes such a request's checks in one pass that reads nothing, writes
// nothing and allocates nothing: the route, its host, no body, and the
// text of its cursor and query. A request that passes goes straight to its
// route's own chain, built once (the request log, Recover, the security
// headers, the opening deadline, the user and run read in one statement,
// the handler). Any other request, a refusal to come included, takes echo's
// whole way, which answers it in words.
type streamOpener struct {
	hosts hostSet
	page  echo.HandlerFunc // GET /runs/{id}/events
	api   echo.HandlerFunc // GET /api/runs/{id}/stream
}

func (h *Handler) newStreamOpener() *streamOpener {
	recover := middleware.Recover()
	chain := func(last echo.HandlerFunc, mw ...echo.MiddlewareFunc) echo.HandlerFunc {
		for i := len(mw) - 1; i >= 0; i-- {
			last = mw[i](last)
		}
		return last
	}
	return &streamOpener{
		hosts: newHostSet(h.cfg.AllowedHosts),
		page: chain(h.streamRunPage, h.logRequests, recover, securityHeaders,
			h.streamDeadline, h.loadStreamUser(false)),
		api: chain(h.apiStreamEvents, h.logRequests, recover, securityHeaders,
			h.streamDeadline, h.loadStreamUser(true), h.requireUser),
	}
}

// pre is echo's pre-routing middleware: a stream's open that passes the
// checks is served by its route's chain, everything else by next.
func (o *streamOpener) pre(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		open, path, id := o.match(c.Request())
		if open == nil {
			return next(c)
		}
		c.SetPath(path)
		c.SetParamNames(paramID...)
		c.SetParamValues(id)
		return open(c)
	}
}

var paramID = []string{"id"}

// match is the one pass: the stream's chain, route and run ID, or nil for
// a request echo's whole way must answer. What it checks, that way checks
// too (allowHosts, bodyGate.readBody); cross-origin protection passes
// every GET.
func (o *streamOpener) match(req *http.Request) (open echo.HandlerFunc, path, id string) {
	if req.Method != http.MethodGet || req.ContentLength != 0 || req.URL.RawPath != "" || !plainQuery(req.URL.RawQuery) {
		return nil, "", ""
	}
	var ok bool
	if rest, api := strings.CutPrefix(req.URL.Path, "/api/runs/"); api {
		id, ok = strings.CutSuffix(rest, "/stream")
		open, path = o.api, "/api/runs/:id/stream"
	} else if rest, page := strings.CutPrefix(req.URL.Path, "/runs/"); page {
		id, ok = strings.CutSuffix(rest, "/events")
		open, path = o.page, "/runs/:id/events"
	}
	if !ok || id == "" || strings.IndexByte(id, '/') >= 0 || !o.hosts.allows(req.Host) {
		return nil, "", ""
	}
	for _, name := range textHeaders {
		for _, v := range req.Header.Values(name) {
			if !plainHeader(v) {
				return nil, "", ""
			}
		}
	}
	return open, path, id
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

// plainHeader: a header's value is printable ASCII, which checkText passes.
func plainHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < ' ' || v[i] > '~' {
			return false
		}
	}
	return true
}
