package broker

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the node's Prometheus metrics (SPEC 16), on a registry of its own.
type metrics struct {
	registry    *prometheus.Registry
	sessions    prometheus.Gauge
	connections prometheus.Gauge
	framesIn    *prometheus.CounterVec
	framesOut   prometheus.Counter
	errors      *prometheus.CounterVec
	changes     *prometheus.CounterVec
	// narrationDelay is the time from the floor becoming free with an item queued (or the
	// item being queued on a free floor) to the broker's request of its response (SPEC 8).
	narrationDelay prometheus.Histogram
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{Name: "backchannel_sessions",
			Help: "Live sessions on this node."}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "backchannel_connections",
			Help: "Attached client connections on this node."}),
		framesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "backchannel_frames_received_total",
			Help: "Client frames received, by frame type."}, []string{"type"}),
		framesOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "backchannel_frames_sent_total",
			Help: "Server frames put in slot outboxes."}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "backchannel_error_frames_total",
			Help: "error frames sent, by code."}, []string{"code"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "backchannel_job_transitions_total",
			Help: "Job transitions applied on this node, by event."}, []string{"event"}),
		narrationDelay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "backchannel_narration_start_delay_seconds",
			Help:    "From the floor becoming free with something queued to the request of its narration.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1}}),
	}
	m.registry.MustRegister(m.sessions, m.connections, m.framesIn, m.framesOut, m.errors, m.changes, m.narrationDelay,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
