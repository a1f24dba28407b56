package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
)

// Config is everything refundd reads from its environment. It is built once,
// at start, by LoadConfig and passed explicitly from there on.
type Config struct {
	DatabaseURL string // DATABASE_URL; empty means the private cluster under DataDir
	DataDir     string // DATA_DIR
	Addr        string // ADDR: where the web server listens
	// HEALTH_ADDR: where /healthz, /readyz and /metrics are also served, on
	// a listener of their own outside MAX_CONNECTIONS, so probes never
	// queue behind a wave of stream opens; empty serves them on ADDR only.
	HealthAddr   string
	ProviderAddr string // PROVIDER_ADDR: where the simulated provider listens
	ProviderURL  string // PROVIDER_URL: where workers reach a provider
	// PROVIDER_SECRET: the shared secret the simulated provider requires
	// of writes and of its fault switch; `provider` needs it, workers send
	// it, and `dev` makes a fresh one (in DATA_DIR/provider.secret) unless
	// it is set. Never printed or logged.
	ProviderSecret string
	SessionKey     string        // SESSION_KEY: secret the session cookie keys derive from
	CookieSecure   bool          // COOKIE_SECURE: mark the session cookie Secure (behind TLS)
	ReplayWindow   time.Duration // REPLAY_WINDOW: how long presentation events are kept
	// ALLOWED_HOSTS: the host names the web server answers to (a defence
	// against DNS rebinding); default ADDR's host and the loopback names.
	AllowedHosts []string
	// REQUEST_TIMEOUT: how long a request (streams aside) may take before
	// it is answered 503.
	RequestTimeout time.Duration
	// WRITE_TIMEOUT: how long the web server gives a response (streams
	// aside, which have their own) to be written; a client that stops
	// reading is cut then. Above REQUEST_TIMEOUT, so that a slow answer is
	// still sent.
	WriteTimeout time.Duration
	// START_RATE_PER_USER: how many new runs one user may start in a
	// minute, so one customer's flood cannot starve the others; 0 means no
	// limit.
	StartRatePerUser int
	// MAX_FAMILY_SIZE: the most orders one request may refund (the
	// children of one family); a request naming more is refused in words.
	MaxFamilySize int
	// MAX_BODY_BYTES: the largest request body the web server reads;
	// MAX_JSON_DEPTH: how deep a JSON body may nest. Both bound what one
	// request, even before login, can cost the process.
	MaxBodyBytes int
	MaxJSONDepth int
	// API_PAGE_LIMIT: the most items one page of an API list (GET
	// /api/runs) holds, whatever limit the client asks for.
	APIPageLimit int
	// BUSINESS_RETENTION: how long finished runs' business events are kept;
	// zero (the default) keeps them forever.
	BusinessRetention time.Duration
	// APPROVAL_THRESHOLD: refunds of at least this many minor units need an
	// approver; 0 (the demo policy) means every refund does.
	ApprovalThreshold int64
	// APPROVAL_DEADLINE: how long an approver may take to decide; a run
	// still waiting then ends canceled by the system, nothing refunded.
	// 0 means no deadline.
	ApprovalDeadline time.Duration
	// REVOKED_ACCESS: what a customer who lost refund_access still sees of
	// their runs: "status" (state and outcome, the default) or "none".
	RevokedAccess string
	// MAX_REFUND: the policy refuses refunds above this many minor units
	// (support handles those); 0 means no limit.
	MaxRefund int64
	// WORKER_LEASE: how long a worker's claim on a run lasts without
	// renewal (renewed every third of it); after a crash, another worker
	// resumes the run about this much later.
	WorkerLease time.Duration
	// PROVIDER_OUTAGE_BUDGET: how long the payment provider may go on
	// refusing a refund, from its first refusal, before the run fails with
	// nothing refunded.
	ProviderOutageBudget time.Duration
	// WORKER_SLOTS: how many runs one process's executor works on at once.
	WorkerSlots int
	// NARRATION_PACE: the built-in narrator's delay per word, so a page
	// shows the words arriving; 0 narrates as fast as appends commit.
	NarrationPace time.Duration
	// DB_POOL_SIZE: the most database connections one process opens
	// for its work; DB_STREAM_POOL_SIZE: those of the stream pool (the
	// streams' log reads and their wake-ups) besides. Processes × both
	// must fit PostgreSQL's max_connections.
	DBPoolSize, DBStreamPoolSize int
	// GOGC: Go's own setting, read here for refundd's default of 400 (Go's
	// is 100): a server's garbage is mostly per request while what it
	// keeps, its open streams, grows slowly, and at 100 a reconnect wave
	// spent a quarter of its CPU collecting. -1 is "off", as in Go.
	GCPercent int
	// MAX_CONNECTIONS: the HTTP connections the web server holds at once;
	// past it new ones wait to be accepted. Default: the open-file limit
	// less a reserve for the database pool, the listener and files.
	MaxConnections int
	// MAX_STREAMS: live event streams one process holds at once; default
	// MAX_CONNECTIONS less a tenth (at least 16), kept for pages, login and
	// health checks. MAX_STREAMS_PER_USER: those one user may hold.
	MaxStreams        int
	MaxStreamsPerUser int
	// STREAM_RETRY and STREAM_RETRY_SPREAD: each stream's retry hint is
	// STREAM_RETRY plus a random share of STREAM_RETRY_SPREAD, so the
	// clients of a server that went away come back spread out.
	// STREAM_DRAIN: at shutdown, streams are told to reconnect and ended
	// at random moments, early enough that their clients are back within
	// this window.
	StreamRetry, StreamRetrySpread, StreamDrain time.Duration

	// WEBHOOK_ALLOW_HOSTS: host names or addresses webhooks may reach
	// whatever they resolve to (a receiver on a private network).
	WebhookAllowHosts []string
	// WEBHOOK_RETRY_SCHEDULE: the waits between a delivery's attempts
	// (Standard Webhooks' schedule by default); after the last, the
	// endpoint goes on failing until WEBHOOK_DISABLE_AFTER disables it.
	WebhookSchedule []time.Duration
	// WEBHOOK_TIMEOUT: how long one delivery waits for its answer.
	WebhookTimeout time.Duration
	// WEBHOOK_DISABLE_AFTER: an endpoint failing this long is disabled.
	WebhookDisableAfter time.Duration
	// WEBHOOK_WORKERS: deliveries in flight at once in one process, each
	// a lane of one run's events sent in a row (outbound.Config.Lane);
	// WEBHOOK_PER_ENDPOINT: of those, to one endpoint.
	WebhookWorkers, WebhookPerEndpoint int
	// MAX_WEBHOOKS: how many endpoints may be registered.
	MaxWebhooks int
	// SMTP_URL: where emails are sent (smtp:// or smtps://, user and
	// password in it); empty sends none (`dev` then runs its own local
	// server and points this at it). Never printed: it holds a password.
	SMTPURL string
	// MAIL_FROM: the From of every email.
	MailFrom string
	// MAIL_LEASE: how long a worker holds an email it is sending; one that
	// died holding it frees it then, and another sends it again (with the
	// same Message-ID). A send gives up after half of it.
	MailLease time.Duration
	// PUBLIC_URL: the base of the links in emails; default http:// + ADDR.
	PublicURL string

	ModelBaseURL string // MODEL_BASE_URL: OpenAI-compatible endpoint; empty means the built-in narrator
	ModelName    string // MODEL_NAME
	ModelAPIKey  string // MODEL_API_KEY

	LogLevel  slog.Level // LOG_LEVEL: debug, info, warn or error
	LogFormat string     // LOG_FORMAT: text or json
}

// LoadConfig reads and validates the environment through getenv. Every
// problem found is reported, joined into one line.
func LoadConfig(getenv func(string) string) (Config, error) {
	env := func(name string) string { return strings.TrimSpace(getenv(name)) }
	c := Config{
		DatabaseURL:  env("DATABASE_URL"),
		DataDir:      cmp.Or(env("DATA_DIR"), "./.data"),
		Addr:         cmp.Or(env("ADDR"), "127.0.0.1:8080"),
		HealthAddr:   env("HEALTH_ADDR"),
		ProviderAddr: cmp.Or(env("PROVIDER_ADDR"), "127.0.0.1:8081"),
		ProviderURL:  env("PROVIDER_URL"),
		// Not trimmed: a key is used exactly as given.
		SessionKey:     getenv("SESSION_KEY"),
		ProviderSecret: getenv("PROVIDER_SECRET"),
		ModelBaseURL:   env("MODEL_BASE_URL"),
		ModelName:      env("MODEL_NAME"),
		ModelAPIKey:    env("MODEL_API_KEY"),
		LogFormat:      strings.ToLower(cmp.Or(env("LOG_FORMAT"), "text")),
	}
	var p problems
	c.checkConnections(env, &p)
	c.readWeb(env, &p)
	c.readPolicy(env, &p)
	c.readLimits(env, &p)
	c.readOutbound(env, &p)
	c.checkModelAndLogging(env, &p)
	if len(p) > 0 {
		return c, errors.New("config: " + strings.Join(p, "; "))
	}
	return c, nil
}

// problems collects every mistake in the environment, so one start
// reports them all.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// checkConnections validates where refundd connects and listens, and the
// session cookie's settings.
func (c *Config) checkConnections(env func(string) string, p *problems) {
	if c.DatabaseURL != "" {
		if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			p.add("DATABASE_URL must be a postgres:// URL")
		}
	}
	addrs := []struct{ name, value string }{{"ADDR", c.Addr}, {"PROVIDER_ADDR", c.ProviderAddr}}
	if c.HealthAddr != "" {
		addrs = append(addrs, struct{ name, value string }{"HEALTH_ADDR", c.HealthAddr})
	}
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a.value); err != nil || !validPort(port) {
			p.add("%s must be host:port, got %q", a.name, a.value)
		}
	}
	if sameAddr(c.HealthAddr, c.Addr) {
		p.add("HEALTH_ADDR must differ from ADDR (%q), or be unset to serve health checks on ADDR alone", c.Addr)
	}
	if c.ProviderURL == "" {
		c.ProviderURL = "http://" + c.ProviderAddr
	} else if !httpURL(c.ProviderURL) {
		p.add("PROVIDER_URL must be an http:// or https:// URL, got %q", c.ProviderURL)
	}
	if c.SessionKey != "" && len(c.SessionKey) < handlers.MinSessionKey {
		// Never echo the key itself.
		p.add("SESSION_KEY must be at least %d characters, got %d", handlers.MinSessionKey, len(c.SessionKey))
	}
	if c.ProviderSecret != "" && len(c.ProviderSecret) < payments.MinSecret {
		p.add("PROVIDER_SECRET must be at least %d characters, got %d", payments.MinSecret, len(c.ProviderSecret))
	}
	if v := env("COOKIE_SECURE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			p.add("COOKIE_SECURE must be true or false, got %q", v)
		}
		c.CookieSecure = b
	}
}

// readWeb reads which hosts the web server answers to and how long a
// request may take. By default a local instance answers to its listen host
// and the loopback names only, so that a DNS-rebinding page cannot drive it.
func (c *Config) readWeb(env func(string) string, p *problems) {
	if v := env("ALLOWED_HOSTS"); v != "" {
		for _, h := range strings.Split(v, ",") {
			h = strings.TrimSpace(h)
			if h == "" || strings.ContainsAny(h, "/: ") && net.ParseIP(h) == nil {
				p.add("ALLOWED_HOSTS must be host names without port or scheme, separated by commas, got %q", v)
				break
			}
			c.AllowedHosts = append(c.AllowedHosts, h)
		}
	} else {
		c.AllowedHosts = handlers.LoopbackHosts()
		if host, _, err := net.SplitHostPort(c.Addr); err == nil && host != "" && !slices.Contains(c.AllowedHosts, host) {
			c.AllowedHosts = append(c.AllowedHosts, host)
		}
	}
	c.RequestTimeout = handlers.DefaultRequestTimeout
	if v := env("REQUEST_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			p.add("REQUEST_TIMEOUT must be a positive duration such as 10s, got %q", v)
		}
		c.RequestTimeout = d
	}
	c.WriteTimeout = atLeast(env, p, "WRITE_TIMEOUT", c.RequestTimeout+writeGrace, time.Second)
	if c.WriteTimeout <= c.RequestTimeout {
		p.add("WRITE_TIMEOUT (%s) must be above REQUEST_TIMEOUT (%s), or slow answers would be cut", c.WriteTimeout, c.RequestTimeout)
	}
	c.APIPageLimit = count(env, p, "API_PAGE_LIMIT", handlers.DefaultAPIPageLimit)
	c.MaxBodyBytes = count(env, p, "MAX_BODY_BYTES", handlers.DefaultMaxBodyBytes)
	c.MaxJSONDepth = count(env, p, "MAX_JSON_DEPTH", handlers.DefaultMaxJSONDepth)
	c.MaxFamilySize = count(env, p, "MAX_FAMILY_SIZE", handlers.DefaultMaxFamilySize)
	c.StartRatePerUser = 60
	if v := env("START_RATE_PER_USER"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			p.add("START_RATE_PER_USER must be a whole number of starts a minute such as 60 (0 for no limit), got %q", v)
		}
		c.StartRatePerUser = n
	}
}

// readPolicy reads how long things are kept and what refunds are allowed.
func (c *Config) readPolicy(env func(string) string, p *problems) {
	c.ReplayWindow = 15 * time.Minute
	if v := env("REPLAY_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			p.add("REPLAY_WINDOW must be a positive duration such as 15m, got %q", v)
		}
		c.ReplayWindow = d
	}
	if v := env("BUSINESS_RETENTION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			p.add("BUSINESS_RETENTION must be a duration such as 8760h (0 keeps forever), got %q", v)
		}
		c.BusinessRetention = d
	}
	c.WorkerLease = atLeast(env, p, "WORKER_LEASE", agent.DefaultLease, time.Second)
	c.ProviderOutageBudget = atLeast(env, p, "PROVIDER_OUTAGE_BUDGET", agent.DefaultOutageBudget, time.Second)
	c.WorkerSlots = count(env, p, "WORKER_SLOTS", 8)
	c.NarrationPace = atLeast(env, p, "NARRATION_PACE", 40*time.Millisecond, 0)
	c.DBPoolSize = count(env, p, "DB_POOL_SIZE", store.DefaultPoolSize)
	c.DBStreamPoolSize = count(env, p, "DB_STREAM_POOL_SIZE", store.DefaultStreamPoolSize)
	switch v := env("GOGC"); v {
	case "":
		c.GCPercent = 400
	case "off":
		c.GCPercent = -1
	default:
		if n, err := strconv.Atoi(v); err == nil && n >= 1 {
			c.GCPercent = n
		} else {
			p.add("GOGC must be a whole number of at least 1 such as 400, or off, got %q", v)
		}
	}
	c.RevokedAccess = strings.ToLower(cmp.Or(env("REVOKED_ACCESS"), "status"))
	if c.RevokedAccess != "status" && c.RevokedAccess != "none" {
		p.add("REVOKED_ACCESS must be status or none, got %q", c.RevokedAccess)
	}
	c.MaxRefund = minorUnits(env, p, "MAX_REFUND")
	c.ApprovalThreshold = minorUnits(env, p, "APPROVAL_THRESHOLD")
	c.ApprovalDeadline = atLeast(env, p, "APPROVAL_DEADLINE", agent.DefaultApprovalDeadline, 0)
}

// readLimits reads the caps on connections and streams. Their defaults
// follow from the open-file limit (which Go raises to the hard limit at
// start), so that at the caps the process still has descriptors for its
// database connections, and connections for pages and health checks.
func (c *Config) readLimits(env func(string) string, p *problems) {
	files := openFileLimit()
	// The pools, the listener, and 64 for the health listener's
	// connections (healthMaxConnections), files, logs and outgoing clients.
	c.MaxConnections = count(env, p, "MAX_CONNECTIONS", max(files-c.DBPoolSize-c.DBStreamPoolSize-1-64, 64))
	c.MaxStreams = count(env, p, "MAX_STREAMS", c.MaxConnections-max(c.MaxConnections/10, 16))
	c.MaxStreamsPerUser = count(env, p, "MAX_STREAMS_PER_USER", stream.DefaultMaxPerUser)
	c.StreamRetry = atLeast(env, p, "STREAM_RETRY", stream.DefaultRetry, 100*time.Millisecond)
	c.StreamRetrySpread = atLeast(env, p, "STREAM_RETRY_SPREAD", stream.DefaultRetrySpread, 100*time.Millisecond)
	c.StreamDrain = atLeast(env, p, "STREAM_DRAIN", stream.DefaultDrain, 100*time.Millisecond)
	if c.StreamDrain > 9*time.Second {
		p.add("STREAM_DRAIN must be at most 9s, within the 10 s the server gives its shutdown, got %s", c.StreamDrain)
	}
	if c.MaxStreams >= c.MaxConnections {
		p.add("MAX_STREAMS (%d) must be below MAX_CONNECTIONS (%d), so pages, login and health checks keep connections when streams are at their cap",
			c.MaxStreams, c.MaxConnections)
	}
}

// DefaultWebhookSchedule is WEBHOOK_RETRY_SCHEDULE's default: Standard
// Webhooks' retry schedule, about three days in all.
const DefaultWebhookSchedule = "5s,5m,30m,2h,5h,10h,10h"

// maxScheduleSteps bounds WEBHOOK_RETRY_SCHEDULE.
const maxScheduleSteps = 20

// readOutbound reads the webhooks' and the emails' settings.
func (c *Config) readOutbound(env func(string) string, p *problems) {
	for _, h := range strings.Split(env("WEBHOOK_ALLOW_HOSTS"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			c.WebhookAllowHosts = append(c.WebhookAllowHosts, h)
		}
	}
	c.WebhookSchedule = retrySchedule(env, p, "WEBHOOK_RETRY_SCHEDULE")
	c.WebhookTimeout = atLeast(env, p, "WEBHOOK_TIMEOUT", 10*time.Second, 100*time.Millisecond)
	c.WebhookDisableAfter = atLeast(env, p, "WEBHOOK_DISABLE_AFTER", 72*time.Hour, time.Second)
	c.WebhookWorkers = count(env, p, "WEBHOOK_WORKERS", 64)
	c.WebhookPerEndpoint = count(env, p, "WEBHOOK_PER_ENDPOINT", 16)
	c.MaxWebhooks = count(env, p, "MAX_WEBHOOKS", 50)
	// Not trimmed of anything but spaces, and never echoed: it may hold a password.
	c.SMTPURL = env("SMTP_URL")
	c.MailFrom = cmp.Or(env("MAIL_FROM"), "refundd <refundd@localhost>")
	c.MailLease = atLeast(env, p, "MAIL_LEASE", time.Minute, time.Second)
	if c.SMTPURL != "" {
		// Its words never quote the URL: it may hold a password.
		if _, err := outbound.NewSMTPMailer(c.SMTPURL, c.MailFrom); err != nil {
			p.add("%v", err)
		}
	}
	c.PublicURL = strings.TrimRight(cmp.Or(env("PUBLIC_URL"), "http://"+publicHost(c.Addr)), "/")
	if !httpURL(c.PublicURL) {
		p.add("PUBLIC_URL must be an http:// or https:// URL, got %q", c.PublicURL)
	}
}

// publicHost is addr with a host a link can name: ":8080" or
// "0.0.0.0:8080" listen everywhere, and are linked as localhost.
func publicHost(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// retrySchedule reads a comma list of positive durations, at most
// maxScheduleSteps of them; unset is DefaultWebhookSchedule.
func retrySchedule(env func(string) string, p *problems, name string) []time.Duration {
	v := cmp.Or(env(name), DefaultWebhookSchedule)
	parts := strings.Split(v, ",")
	if len(parts) > maxScheduleSteps {
		p.add("%s must have at most %d steps, got %d", name, maxScheduleSteps, len(parts))
		return nil
	}
	out := make([]time.Duration, 0, len(parts))
	for _, s := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			p.add("%s must be positive durations separated by commas such as %s, got %q", name, DefaultWebhookSchedule, v)
			return nil
		}
		out = append(out, d)
	}
	return out
}

// writeGrace is what WRITE_TIMEOUT's default adds to REQUEST_TIMEOUT: the
// time to send an answer made at the deadline. A default derived so that
// setting REQUEST_TIMEOUT alone never makes the two disagree.
const writeGrace = 5 * time.Second

// openFileLimit is the process's soft limit on open files (1024 if it
// cannot be read).
func openFileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 1024
	}
	return int(rl.Cur)
}

// atLeast reads a duration of at least min; unset is def.
func atLeast(env func(string) string, p *problems, name string, def, min time.Duration) time.Duration {
	v := env(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < min {
		p.add("%s must be a duration of at least %s such as %s, got %q", name, min, def, v)
	}
	return d
}

// count reads a whole number of at least 1; unset is def.
func count(env func(string) string, p *problems, name string, def int) int {
	v := env(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		p.add("%s must be a whole number of at least 1 such as %d, got %q", name, def, v)
	}
	return n
}

// minorUnits reads an amount in minor units (cents); unset is 0.
func minorUnits(env func(string) string, p *problems, name string) int64 {
	v := env(name)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		p.add("%s must be a whole number of minor units (cents), 0 or more, got %q", name, v)
	}
	return n
}

// checkModelAndLogging validates the narrator's model and the log settings.
func (c *Config) checkModelAndLogging(env func(string) string, p *problems) {
	switch {
	case c.ModelBaseURL == "" && c.ModelName == "":
	case c.ModelBaseURL == "" || c.ModelName == "":
		p.add("MODEL_BASE_URL and MODEL_NAME must be set together")
	case !httpURL(c.ModelBaseURL):
		p.add("MODEL_BASE_URL must be an http:// or https:// URL, got %q", c.ModelBaseURL)
	}
	if v := env("LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			p.add("LOG_LEVEL must be debug, info, warn or error, got %q", v)
		}
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		p.add("LOG_FORMAT must be text or json, got %q", c.LogFormat)
	}
}

// sameAddr says two listen addresses would clash: the same fixed port on
// the same host, or on all hosts. Port 0 (any free port) never clashes.
func sameAddr(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa == "0" || pa != pb {
		return false
	}
	anyHost := func(h string) bool { ip := net.ParseIP(h); return h == "" || ip != nil && ip.IsUnspecified() }
	return ha == hb || anyHost(ha) || anyHost(hb)
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
