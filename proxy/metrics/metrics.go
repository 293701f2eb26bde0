// Package metrics is the proxy's own Prometheus exposition at
// /metrics/prometheus: requests by route class and status, upstream latency,
// and refusals by code. No series carries a cluster or tenant, so the page
// reveals nothing about any one customer.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the proxy's collectors on a registry of its own.
type Metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	upstream *prometheus.HistogramVec
	denials  *prometheus.CounterVec
	parked   prometheus.Gauge
}

// New registers the collectors, with the Go runtime and process ones.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queen_proxy_requests_total",
			Help: "Requests answered, by route class (x-queen-proxy, or none when refused before classification) and status code.",
		}, []string{"class", "code"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "queen_proxy_upstream_duration_seconds",
			Help:    "Time from forwarding a request to the broker's response headers, by route class. Long-polls included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"class"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queen_proxy_denials_total",
			Help: "Requests the proxy refused itself, by error code; shadow=true counts what shadow mode (QUEEN_PROXY_ENFORCE=false) let through.",
		}, []string{"code", "shadow"}),
		parked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "queen_proxy_parked_long_polls",
			Help: "Long-poll pops forwarded and not answered yet, all clusters together.",
		}),
	}
	m.registry.MustRegister(m.requests, m.upstream, m.denials, m.parked,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Request counts one answered request.
func (m *Metrics) Request(class string, status int) {
	if class == "" {
		class = "none"
	}
	m.requests.WithLabelValues(class, strconv.Itoa(status)).Inc()
}

// Upstream records how long the broker took to answer.
func (m *Metrics) Upstream(class string, d time.Duration) {
	m.upstream.WithLabelValues(class).Observe(d.Seconds())
}

// Denial counts a refusal; shadow is true when it was only logged.
func (m *Metrics) Denial(code string, shadow bool) {
	m.denials.WithLabelValues(code, strconv.FormatBool(shadow)).Inc()
}

// Parked adds delta (+1 or -1) to the parked long-polls.
func (m *Metrics) Parked(delta float64) { m.parked.Add(delta) }

// Handler serves the exposition.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
