package views

import (
	"context"
	"strings"

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

// navFor lists the pages u's role works with; every page a role may open is
// one click from any of its pages.
func navFor(u *store.User) []NavLink {
	if u == nil {
		return nil
	}
	switch u.Role {
	case store.RoleCustomer:
		return []NavLink{{"/", "Your refunds"}}
	case store.RoleApprover:
		return []NavLink{{"/", "Approvals"}}
	case store.RoleSupport:
		return []NavLink{{"/", "Home"}, {"/support/runs", "Search runs"}, {"/support/audit", "Audit log"}}
	case store.RoleAdmin:
		return []NavLink{{"/", "Home"}, {"/admin/users", "Users"}, {"/admin/webhooks", "Webhooks"}, {"/support/audit", "Audit log"}}
	}
	return []NavLink{{"/", "Home"}}
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
