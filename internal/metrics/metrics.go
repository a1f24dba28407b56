// Package metrics holds refundd's Prometheus metrics: one registry per
// process, served at GET /metrics (handlers) in the text format. Every part
// counts into the variables below; nothing here reads the database.
//
// Names follow Prometheus conventions: a refundd_ prefix, _total for
// counters, _seconds for durations.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is the process's registry: refundd's metrics plus the Go
// runtime's and the process's own (goroutines, memory, file descriptors).
var Registry = prometheus.NewRegistry()

func counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	Registry.MustRegister(c)
	return c
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	Registry.MustRegister(c)
	return c
}

func gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	Registry.MustRegister(g)
	return g
}

// Streams (handlers).
var (
	StreamsOpen    = gauge("refundd_streams_open", "Event streams open in this process.")
	StreamsRefused = counterVec("refundd_streams_refused_total",
		"Event streams refused before they opened, by reason (user_cap, process_cap, shutting_down).", "reason")
	StreamReads = counter("refundd_stream_store_reads_total",
		"Store reads done to feed live streams (replays and follow-up reads after wake-ups).")
	StreamWakeups = counter("refundd_stream_wakeups_total",
		"Wake-ups (notifications or polls) that led the streams to read a run's log.")
	StreamEncodes = counter("refundd_stream_encodes_total",
		"Events encoded for the streams through a shared stream.Frames: once per event and format for the live streams of a run, however many watch it.")
	StreamReplays = counter("refundd_stream_replays_total", "Streams that resumed from a cursor and replayed after it.")
	StreamResets  = counterVec("refundd_stream_resets_total",
		"Streams sent a fresh snapshot (event: reset), by cause (cursor, access, pruned).", "cause")
	StreamSlowCuts = counter("refundd_stream_slow_cuts_total",
		"Streams closed because their client did not read fast enough.")
	StreamDelivery = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "refundd_stream_delivery_seconds",
		Help:    "From an event's commit (its created_at) to its write on a stream.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})
)

// The web server (package main).
var WriteTimeouts = counter("refundd_http_write_timeouts_total",
	"Connections cut because their client did not read a response within WRITE_TIMEOUT (streams count in refundd_stream_slow_cuts_total).")

// The executor and the append path (agent, store).
var (
	Claims       = counter("refundd_claims_total", "Runs claimed by this process's executor.")
	ClaimQueries = counter("refundd_claim_queries_total",
		"Claim queries the executor sent (a wake-up or poll that looked for work), whether or not a run was due.")
	LeaseTakeovers = counter("refundd_lease_takeovers_total",
		"Claims of a run whose previous lease had expired (a crashed or stalled worker).")
	Reconciliations = counterVec("refundd_reconciliations_total",
		"Reconciliation lookups at the payment provider, by outcome (succeeded, failed, not_found, error).", "outcome")
	ProviderChecks = counterVec("refundd_provider_checks_total",
		"Lookups at the payment provider of a run's key before its next step (a new run, or every unfinished run after the database changed timeline), "+
			"by outcome (found, not_found, error).", "outcome")
	NoticesLost = counter("refundd_notices_lost_total",
		"Wake-up notifications not sent because their transaction failed (delivery waits for the next wake-up or poll).")
	Appends = counterVec("refundd_appends_total",
		"Events appended to run logs by this process, by class (business, presentation); "+
			"an append inside a transaction that then rolls back is counted too.", "class")
)

func init() {
	Registry.MustRegister(StreamDelivery,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Handler serves the registry in the Prometheus text format.
func Handler() http.Handler {
	return promhttp.HandlerFor(Registry, promhttp.HandlerOpts{Registry: Registry})
}

// The outbound engine (outbound).
var (
	WebhookDeliveries = counterVec("refundd_webhook_deliveries_total",
		"Webhook delivery attempts by outcome: delivered (2xx), retry (anything else, a redirect, no answer in time), "+
			"gone (410: the endpoint was disabled), refused (the address is not allowed; retried like a failure).", "outcome")
	WebhookLag = gaugeVec("refundd_webhook_lag_seconds",
		"Per webhook endpoint, the age of its oldest business event not yet acknowledged (0: caught up).", "endpoint")
)

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	Registry.MustRegister(g)
	return g
}
