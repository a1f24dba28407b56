// Package handlers is refundd's HTTP surface: the HTML pages, the JSON API
// and the event streams, with sessions and the mapping of application errors
// to statuses. Handlers stay thin: parse, authorize, one store call, render.
package handlers

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/internal/hostname"
	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/store"
)

// Config is what the handlers need from the program's configuration.
type Config struct {
	// SessionKey is the secret the session cookie's keys are derived from.
	// Every serve process behind one address must share it.
	SessionKey string
	// CookieSecure marks the session cookie Secure; set it behind TLS.
	CookieSecure bool
	// DemoLogins lists the demo accounts on the login page (dev only).
	DemoLogins bool
	// Listener is the process's one LISTEN connection; live streams wait
	// on it. Without one they poll the store every Stream.Poll.
	Listener *store.Listener
	// Stream tunes the live streams; zero values take the defaults.
	Stream stream.Config
	// RevokedSeeNothing: a customer who lost refund_access sees nothing of
	// their runs (404, streams closed) instead of their state and outcome.
	RevokedSeeNothing bool
	// AllowedHosts are the host names (no port) requests may be addressed
	// to; "*" allows any. Empty means LoopbackHosts.
	AllowedHosts []string
	// RequestTimeout bounds every request but the streams; past it the
	// client gets 503. Zero means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// StartRatePerUser caps the new runs one user may start in a minute;
	// zero means no limit.
	StartRatePerUser int
	// MaxFamilySize bounds the orders one request may refund (the
	// children of one family). Zero means DefaultMaxFamilySize.
	MaxFamilySize int
	// MaxBodyBytes bounds a request's body (MAX_BODY_BYTES); MaxJSONDepth
	// how deep a JSON body may nest (MAX_JSON_DEPTH). Zero means
	// DefaultMaxBodyBytes, DefaultMaxJSONDepth.
	MaxBodyBytes int64
	MaxJSONDepth int
	// APIPageLimit bounds the limit of the API's list answers (GET
	// /api/runs). Zero means DefaultAPIPageLimit.
	APIPageLimit int
	// ApprovalThreshold is the amount (minor units) from which a refund
	// needs an approver (APPROVAL_THRESHOLD): an approver sent to decide on
	// such a run before it asks learns its state (409); of a smaller run,
	// which will never ask, nothing (404).
	ApprovalThreshold int64
	// ProviderLedger reads the payment provider's ledger for support's
	// comparison with ours (GET /support/provider); nil: this server does
	// not read it, and the page says so.
	ProviderLedger ProviderLedger
	// WebhookPolicy checks the URLs admins register for webhooks: serve's
	// refuses http:// and loopback, private, link-local and metadata
	// addresses unless WEBHOOK_ALLOW_HOSTS names them; dev's allows http://
	// and loopback. The zero Policy is serve's without allowed hosts.
	WebhookPolicy outbound.Policy
	// MaxWebhooks bounds the endpoints admins may register (MAX_WEBHOOKS).
	// Zero means DefaultMaxWebhooks.
	MaxWebhooks int
}

// DefaultAPIPageLimit is Config.APIPageLimit's default.
const DefaultAPIPageLimit = 100

// DefaultRequestTimeout is Config.RequestTimeout's default.
const DefaultRequestTimeout = 10 * time.Second

// LoopbackHosts are the names a local instance is reached by, the default
// of Config.AllowedHosts.
func LoopbackHosts() []string { return []string{"localhost", "127.0.0.1", "::1"} }

// Handler holds what every handler shares. Handlers are its methods, one
// file per area, and all routes are in routes().
type Handler struct {
	cfg      Config
	store    *store.Store
	log      *slog.Logger
	sessions *sessions.CookieStore
	cookie   string          // the session cookie's name
	verified verifiedCookies // session cookies already verified (streams)
	engine   *stream.Engine  // every event stream
	ready    readiness       // /readyz's last check, shared by every probe
}

// New builds the web server's handler with every route registered.
func New(cfg Config, st *store.Store, logger *slog.Logger) (*echo.Echo, error) {
	if len(cfg.SessionKey) < 32 {
		return nil, errors.New("handlers: a SESSION_KEY of at least 32 characters is required")
	}
	sess, err := newSessionStore(cfg.SessionKey, cfg.CookieSecure)
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, store: st, log: logger, sessions: sess, cookie: sessionCookieName(cfg.CookieSecure)}

	e := echo.New()
	if len(h.cfg.AllowedHosts) == 0 {
		h.cfg.AllowedHosts = LoopbackHosts()
	}
	if h.cfg.RequestTimeout <= 0 {
		h.cfg.RequestTimeout = DefaultRequestTimeout
	}
	if h.cfg.MaxWebhooks <= 0 {
		h.cfg.MaxWebhooks = DefaultMaxWebhooks
	}
	if h.cfg.APIPageLimit <= 0 {
		h.cfg.APIPageLimit = DefaultAPIPageLimit
	}
	routes := h.routes()
	gate := &bodyGate{maxBytes: cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes), maxDepth: cmp.Or(cfg.MaxJSONDepth, DefaultMaxJSONDepth),
		timeout: h.cfg.RequestTimeout, kinds: bodyKinds(routes)}
	h.engine = stream.New(cfg.Stream, st, cfg.Listener, logger, h.recheckStreams)
	h.cfg.Stream = *h.engine.Config()
	// Shutdown ends open streams at once; their clients reconnect elsewhere.
	e.Server.RegisterOnShutdown(h.engine.Close)
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = h.handleError
	// Behind a proxy, set a trusted extractor here; never trust
	// X-Forwarded-For from anyone by default.
	e.IPExtractor = echo.ExtractIPDirect()

	// What every answer passes through first: the log, Recover, and the
	// security headers (so that refusals carry them too).
	outer := []echo.MiddlewareFunc{h.logRequests, middleware.Recover(), securityHeaders}
	opener, err := h.newStreamOpener(outer, routes)
	if err != nil {
		return nil, err
	}
	e.Pre(opener.pre)
	e.Use(append(outer,
		allowHosts(h.cfg.AllowedHosts),
		h.recordActor,
		crossOriginProtection(),
		gate.readBody,
	)...)
	for _, r := range routes {
		e.Add(r.method, r.path, r.handler, r.middleware...)
	}
	return e, nil
}

type route struct {
	method     string
	path       string
	handler    echo.HandlerFunc
	middleware []echo.MiddlewareFunc
	body       bodyKind // what it reads of a body (the gate, body.go)
}

// routes is the one table of every route. Rows say who may call them:
// public rows skip the session; session rows know the user if there is one;
// signedIn rows require one. The last column is what a row reads of a
// request's body: none, a form, JSON, or either. Every row that touches the database is bounded
// by the request deadline, except the streams, which are bounded until they
// open, then live as long as their client watches and end themselves.
func (h *Handler) routes() []route {
	public := []echo.MiddlewareFunc(nil)
	session := []echo.MiddlewareFunc{h.deadline, h.loadUser}
	signedIn := []echo.MiddlewareFunc{h.deadline, h.loadUser, h.requireUser}
	api := []echo.MiddlewareFunc{h.deadline, h.loadAPIUser, h.requireUser} // a bearer token as well as the session
	admin := []echo.MiddlewareFunc{h.deadline, h.loadUser, h.requireUser, h.requireRole(store.RoleAdmin)}
	apiAdmin := []echo.MiddlewareFunc{h.deadline, h.loadAPIUser, h.requireUser, h.requireRole(store.RoleAdmin)}
	support := []echo.MiddlewareFunc{h.deadline, h.loadUser, h.requireUser, h.requireRole(store.RoleSupport, store.RoleAdmin)}
	// Streams are bounded until they open (streamDeadline); a stream of one
	// run reads its user and run in one statement.
	streamSession := []echo.MiddlewareFunc{h.streamDeadline, h.loadUser}
	runStream := []echo.MiddlewareFunc{h.streamDeadline, h.loadStreamUser(false)}
	runStreamAPI := []echo.MiddlewareFunc{h.streamDeadline, h.loadStreamUser(true), h.requireUser}

	return []route{
		{http.MethodGet, "/healthz", h.healthz, public, bodyNone},
		{http.MethodGet, "/readyz", h.readyz, public, bodyNone},
		{http.MethodGet, "/metrics", h.metrics, public, bodyNone},
		{http.MethodGet, "/debug/pprof/*", h.profile, public, bodyNone},
		{http.MethodGet, "/static/*", h.static, public, bodyNone},
		{http.MethodHead, "/static/*", h.static, public, bodyNone},

		{http.MethodGet, "/login", h.showLoginPage, session, bodyNone},
		{http.MethodPost, "/login", h.login, session, bodyForm},
		{http.MethodPost, "/logout", h.logout, session, bodyForm},
		{http.MethodPost, "/language", h.chooseLanguage, session, bodyForm},

		{http.MethodGet, "/", h.showHomePage, signedIn, bodyNone},
		{http.MethodPost, "/runs", h.startRun, signedIn, bodyForm},
		{http.MethodPost, "/runs/:id/approve", h.approveRun, signedIn, bodyForm},
		{http.MethodPost, "/runs/:id/cancel", h.cancelRun, signedIn, bodyForm},
		{http.MethodGet, "/support/runs", h.showSupportRuns, signedIn, bodyNone},
		{http.MethodGet, "/runs/:id", h.showRunPage, signedIn, bodyNone},
		{http.MethodGet, "/runs/:id/again", h.showAskAgainPage, signedIn, bodyNone},
		// The page's stream answers a missing session itself (a named close
		// event), since a redirect would make the SSE extension retry forever.
		{http.MethodGet, "/runs/:id/events", h.streamRunPage, runStream, bodyNone},
		// The approval queue, live; like the page's stream it answers a
		// missing session or role with a close event.
		{http.MethodGet, "/queue/events", h.streamQueue, streamSession, bodyNone},
		// Several runs' page streams over one connection (static/tabs.js).
		{http.MethodGet, "/streams", h.streamRuns, streamSession, bodyNone},
		// A customer's run list, live.
		{http.MethodGet, "/runs/events", h.streamOwnRuns, streamSession, bodyNone},

		{http.MethodGet, "/support/audit", h.showAuditLog, support, bodyNone},
		{http.MethodGet, "/support/provider", h.showProviderRefunds, signedIn, bodyNone},
		{http.MethodGet, "/support/runs/:id", h.showSupportRun, support, bodyNone},
		{http.MethodGet, "/support/runs/:id/export", h.exportRun, support, bodyNone},

		{http.MethodGet, "/admin/users", h.showAdminUsers, admin, bodyNone},
		{http.MethodPost, "/admin/users/:id/role", h.setUserRole, admin, bodyForm},
		{http.MethodPost, "/admin/users/:id/grants", h.setUserGrant, admin, bodyForm},
		{http.MethodPost, "/admin/users/:id/disable", h.disableUser, admin, bodyForm},
		{http.MethodPost, "/admin/users/:id/enable", h.enableUser, admin, bodyForm},
		{http.MethodPost, "/admin/users/:id/tokens", h.createToken, admin, bodyForm},
		{http.MethodGet, "/admin/tokens/new", h.showNewToken, admin, bodyNone},
		{http.MethodPost, "/admin/tokens/:id/revoke", h.revokeToken, admin, bodyForm},
		{http.MethodGet, "/admin/webhooks", h.showAdminWebhooks, admin, bodyNone},
		{http.MethodPost, "/admin/webhooks", h.saveWebhook, admin, bodyForm},
		{http.MethodPost, "/admin/webhooks/:id/:action", h.changeWebhook, admin, bodyForm}, // rotate, delete, disable, enable
		{http.MethodPost, "/admin/webhooks/:id/deliveries/:run/:seq/resend", h.resendDelivery, admin, bodyForm},

		{http.MethodGet, "/api/openapi.json", h.apiOpenAPI, public, bodyNone},
		{http.MethodGet, "/api/orders", h.apiListOrders, api, bodyNone},
		{http.MethodGet, "/api/runs", h.apiListRuns, api, bodyNone},
		{http.MethodPost, "/api/runs", h.apiStartRun, api, bodyJSON},
		{http.MethodGet, "/api/runs/:id", h.apiShowRun, api, bodyNone},
		{http.MethodGet, "/api/runs/:id/events", h.apiListEvents, api, bodyNone},
		{http.MethodGet, "/api/runs/:id/stream", h.apiStreamEvents, runStreamAPI, bodyNone},
		{http.MethodPost, "/api/runs/:id/approve", h.apiApproveRun, api, bodyFormOrJSON},
		{http.MethodPost, "/api/runs/:id/cancel", h.apiCancelRun, api, bodyFormOrJSON},
		{http.MethodGet, "/api/webhooks", h.apiListWebhooks, apiAdmin, bodyNone},
		{http.MethodPost, "/api/webhooks", h.apiCreateWebhook, apiAdmin, bodyJSON},
		{http.MethodDelete, "/api/webhooks/:id", h.apiDeleteWebhook, apiAdmin, bodyNone},
		{http.MethodPost, "/api/webhooks/:id/rotate", h.apiRotateWebhook, apiAdmin, bodyNone},
		{http.MethodPost, "/api/webhooks/:id/enable", h.apiEnableWebhook, apiAdmin, bodyJSON},
		{http.MethodPost, "/api/webhooks/:id/disable", h.apiDisableWebhook, apiAdmin, bodyNone},
	}
}

// contentSecurityPolicy allows only our own files: no inline script or
// style, no eval, no framing. The pages need nothing else: scripts and CSS
// are files under /static/, htmx is told not to inject its indicator style
// (views.Layout), and fetches and event streams go to this origin.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'"

// securityHeaders are sent with every response. Every answer is no-store
// unless its handler says otherwise (static files may be cached, streams
// say no-cache): pages and API answers show one person's data, which must
// not stay in a shared or back-button cache after they log out.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		hdr := c.Response().Header()
		for _, kv := range securityHeaderValues {
			hdr[kv.name] = kv.value
		}
		return next(c)
	}
}

// securityHeaderValues are shared by every response's header: each value
// is a slice of capacity 1, so a handler's Add copies it and Set replaces
// it, and none is ever written in place.
var securityHeaderValues = []struct {
	name  string
	value []string
}{
	{"Content-Security-Policy", []string{contentSecurityPolicy}},
	{"Cache-Control", []string{"no-store"}},
	{"X-Content-Type-Options", []string{"nosniff"}},
	{"X-Frame-Options", []string{"DENY"}},
	{"Referrer-Policy", []string{"same-origin"}},
}

// allowHosts refuses, before any handler, requests addressed to a host that
// is not ours. A DNS-rebinding page points its own name at our address:
// the browser then treats us as that page's origin, and only the Host
// header still tells. Health checks stay open to any Host, since load
// balancers and orchestrators probe by IP address, and they show nothing.
func allowHosts(hosts []string) echo.MiddlewareFunc {
	allowed := newHostSet(hosts)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if allowed.allows(req.Host) || req.URL.Path == "/healthz" || req.URL.Path == "/readyz" {
				return next(c)
			}
			return echo.NewHTTPError(http.StatusMisdirectedRequest).SetInternal(fmt.Errorf("host %q is not in ALLOWED_HOSTS", req.Host))
		}
	}
}

// hostSet is ALLOWED_HOSTS: names without their port, or "*" for any.
type hostSet map[string]bool

func newHostSet(hosts []string) hostSet {
	allowed := make(hostSet, len(hosts))
	for _, h := range hosts {
		allowed[hostname.Of(h)] = true
	}
	return allowed
}

// allows says whether a request's Host header names one of the set.
func (s hostSet) allows(host string) bool { return s["*"] || s[hostname.Of(host)] }

// crossOriginProtection refuses state-changing requests that a browser sent
// from another origin (Sec-Fetch-Site / Origin), on top of the SameSite=Lax
// cookie. Requests without those headers (curl, API clients) pass.
func crossOriginProtection() echo.MiddlewareFunc {
	cop := http.NewCrossOriginProtection()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := cop.Check(c.Request()); err != nil {
				return echo.NewHTTPError(http.StatusForbidden).SetInternal(fmt.Errorf("cross-origin request refused: %w", err))
			}
			return next(c)
		}
	}
}
