package views

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/a-h/templ"

	"github.com/refundd/refundd/store"
)

type pathKey struct{}

// WithPath returns ctx carrying the path of the page being rendered, so the
// layout marks the current page in the navigation without every page
// passing it down.
func WithPath(ctx context.Context, path string) context.Context {
	return context.WithValue(ctx, pathKey{}, path)
}

func pathFrom(ctx context.Context) string {
	p, _ := ctx.Value(pathKey{}).(string)
	return p
}

// NavLink is one entry of the navigation bar.
type NavLink struct {
	Href, Label string
}

// navFor lists the pages u's role works with, in l; every page a role may
// open is one click from any of its pages.
func navFor(u *store.User, l Lang) []NavLink {
	if u == nil {
		return nil
	}
	var links []NavLink
	switch u.Role {
	case store.RoleCustomer:
		links = []NavLink{{"/", "home.nav.your_refunds"}}
	case store.RoleApprover:
		links = []NavLink{{"/", "home.nav.approvals"}}
	case store.RoleSupport:
		links = []NavLink{{"/", "home.nav.home"}, {"/support/runs", "home.nav.search"}, {"/support/audit", "home.nav.audit"}}
	case store.RoleAdmin:
		links = []NavLink{{"/", "home.nav.home"}, {"/admin/users", "home.nav.users"}, {"/admin/webhooks", "home.nav.webhooks"}, {"/support/audit", "home.nav.audit"}}
	default:
		links = []NavLink{{"/", "home.nav.home"}}
	}
	for i := range links {
		links[i].Label = l.T(links[i].Label)
	}
	return links
}

// isCurrent says whether the page at path belongs under the link href: the
// home link only for "/", the others for their own subtree.
func isCurrent(href, path string) bool {
	if href == "/" {
		return path == "/"
	}
	return path == href || strings.HasPrefix(path, href+"/")
}

// ariaCurrent is the aria-current attribute of a navigation link.
func ariaCurrent(ctx context.Context, href string) templ.Attributes {
	if isCurrent(href, pathFrom(ctx)) {
		return templ.Attributes{"aria-current": "page"}
	}
	return nil
}

// liveWords are the words static/live.js writes on a page, in l, as a
// JSON object (the body's data-live-words): the live indicator, the note
// on decisions held while the page is not live, the announcer's status,
// and the step timer's units ("{s}", "{m}", "{h}" stand for the numbers).
func liveWords(l Lang) string {
	if s, ok := liveWordsOf.Load(l.Tag); ok {
		return s.(string) // every page carries them: made once a language
	}
	words := map[string]string{"elapsed.s": l.T("elapsed.s", map[string]any{"S": "{s}"}),
		"elapsed.m": l.T("elapsed.m", map[string]any{"M": "{m}", "S": "{s}"}),
		"elapsed.h": l.T("elapsed.h", map[string]any{"H": "{h}", "M": "{m}"})}
	for _, k := range []string{"connecting", "reconnecting", "final", "live", "not_live", "held_reconnecting", "held_closed",
		"status", "decided_elsewhere", "no_longer_waits", "reason_not_sent"} {
		words[k] = l.T("banner." + k)
	}
	b, _ := json.Marshal(words) // strings only: it cannot fail
	liveWordsOf.Store(l.Tag, string(b))
	return string(b)
}

var liveWordsOf sync.Map // language.Tag → liveWords' JSON
