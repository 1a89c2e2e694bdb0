package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the data plane's Prometheus metrics.
type metrics struct {
	requests    *prometheus.CounterVec   // route, status
	upstream    *prometheus.HistogramVec // route: engine time of a call
	overhead    *prometheus.HistogramVec // route: time spent inside hone
	ttft        *prometheus.HistogramVec // route
	openStreams prometheus.Gauge
	bytesIn     prometheus.Counter   // body bytes from engines
	bytesOut    prometheus.Counter   // body bytes to agents
	engineUp    *prometheus.GaugeVec // engine
	retries     prometheus.Counter
	panics      prometheus.Counter
	durableWait prometheus.Histogram // answers held until their header reward/commit is stored
	// headerWarnings counts hone request headers ignored as invalid.
	headerWarnings prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	lat := []float64{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, .025, .1, .5, 1, 2.5, 10, 30, 120}
	// hone's own time per call is tens of µs: finer buckets there
	inside := []float64{5e-6, 1e-5, 1.5e-5, 2e-5, 3e-5, 4e-5, 5e-5, 7.5e-5, 1e-4, 1.5e-4, 2e-4, 3e-4, 5e-4, 1e-3,
		2.5e-3, 5e-3, .01, .025, .1, 1}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hone_requests_total",
			Help: "Data-plane requests by route and HTTP status."}, []string{"route", "status"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hone_upstream_seconds",
			Help: "Time from sending a call upstream to its last response byte.", Buckets: lat}, []string{"route"}),
		overhead: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hone_overhead_seconds",
			Help: "Time a call spends inside hone (request handling and response processing).", Buckets: inside},
			[]string{"route"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hone_ttft_seconds",
			Help: "Time to the first streamed token event.", Buckets: lat}, []string{"route"}),
		openStreams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hone_open_streams",
			Help: "Streams currently open to agents."}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_bytes_total",
			Help: "Body bytes: in from engines, out to agents.", ConstLabels: prometheus.Labels{"direction": "in"}}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_bytes_total",
			Help: "Body bytes: in from engines, out to agents.", ConstLabels: prometheus.Labels{"direction": "out"}}),
		engineUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hone_engine_healthy",
			Help: "1 when the engine passes health checks."}, []string{"engine"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_upstream_retries_total",
			Help: "Calls retried on another engine before any byte reached the agent."}),
		durableWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hone_durable_wait_seconds",
			Help: "Time an answer carrying X-Hone-Reward or X-Hone-Commit waits until they are stored.", Buckets: lat}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_upstream_panic_total",
			Help: "Engines tried although marked unhealthy, because no healthy engine was left (panic mode)."}),
		headerWarnings: prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_header_warnings_total",
			Help: "hone request headers ignored because their value was invalid (reported in X-Hone-Warning)."}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.upstream, m.overhead, m.ttft, m.openStreams, m.bytesIn, m.bytesOut, m.engineUp, m.retries,
			m.headerWarnings, m.panics, m.durableWait)
	}
	return m
}
