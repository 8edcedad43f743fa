package broker

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
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
	// heldBack counts the times a connection's reading waited for its session to catch up.
	heldBack prometheus.Counter
	// journalErrors counts the journal writes that failed (journalhealth.go).
	journalErrors prometheus.Counter

	// The voice hot path (voicemetrics.go): caller audio from its read to the model's input,
	// agent audio from when its pacing schedule had it due to its write, barge-in reaction,
	// and the packets counted at each end.
	audioInDelay    prometheus.Histogram
	audioOutDelay   prometheus.Histogram
	bargeIn         prometheus.Histogram
	audioIn         prometheus.Counter
	audioOut        prometheus.Counter
	audioOutDropped prometheus.Counter

	// The counters of every known label value, looked up once at start: the per-frame and
	// per-transition paths read these maps (never written afterwards) instead of hashing the
	// label and taking the vector's lock on every count.
	frameCounters  map[string]prometheus.Counter
	changeCounters map[jobs.Event]prometheus.Counter
}

// audioDelayBuckets resolve the audio delays to a tenth of a millisecond at the low end and to
// a few milliseconds around the 20 ms of one frame (the voice bench's p99 target).
var audioDelayBuckets = []float64{.0001, .0002, .0005, .001, .0015, .002, .003, .004, .005, .0075, .01, .0125, .015,
	.0175, .02, .025, .03, .04, .05, .075, .1, .25, .5, 1}

// jobEvents are the events of jobs.Change, for the transitions counter.
var jobEvents = []jobs.Event{jobs.EventCreated, jobs.EventApproved, jobs.EventDeferred, jobs.EventProgress,
	jobs.EventPartial, jobs.EventInteractionOpened, jobs.EventInteractionClosed, jobs.EventPermissionAsked,
	jobs.EventPermissionHeld, jobs.EventCompleted, jobs.EventFailed, jobs.EventCancelled, jobs.EventTimedOut,
	jobs.EventDeclined, jobs.EventLateResultDropped, jobs.EventDuplicateCancel, jobs.EventDeferRejected,
	jobs.EventRecorded}

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
		heldBack: prometheus.NewCounter(prometheus.CounterOpts{Name: "backchannel_connections_held_back_total",
			Help: "Times a connection was not read until its session caught up (SPEC 2: at most 64 messages or 4 MiB queued)."}),
		journalErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "backchannel_journal_errors_total",
			Help: "Journal writes that failed (the frames they carried wait and are retried)."}),
	}
	m.audioInDelay = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "backchannel_voice_audio_in_delay_seconds",
		Help:    "Caller audio: from the read of its packet (RTP or WebSocket message) to its hand-over to the model's input.",
		Buckets: audioDelayBuckets})
	m.audioOutDelay = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "backchannel_voice_audio_out_delay_seconds",
		Help: "Agent audio: from when a 20 ms frame was due by the real-time pacing (its arrival from the model, or the end " +
			"of the audio before it if later) to its write to the caller (the RTP packet written, or the WebSocket message queued).",
		Buckets: audioDelayBuckets})
	m.bargeIn = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "backchannel_voice_barge_in_seconds",
		Help: "From the caller's speech start (the arrival of the audio that started it) to the broker stopping the " +
			"interrupted response's audio (no later frame of it is sent).",
		Buckets: []float64{.0001, .00025, .0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1}})
	m.audioIn = prometheus.NewCounter(prometheus.CounterOpts{Name: "backchannel_voice_audio_in_packets_total",
		Help: "Caller audio packets handed to the model's input."})
	m.audioOut = prometheus.NewCounter(prometheus.CounterOpts{Name: "backchannel_voice_audio_out_packets_total",
		Help: "Agent audio frames of 20 ms written to callers."})
	m.audioOutDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "backchannel_voice_audio_out_dropped_total",
		Help: "Agent audio frames dropped because the caller's transport had a second of audio waiting."})
	m.registry.MustRegister(m.sessions, m.connections, m.framesIn, m.framesOut, m.errors, m.changes, m.narrationDelay, m.heldBack, m.journalErrors,
		m.audioInDelay, m.audioOutDelay, m.bargeIn, m.audioIn, m.audioOut, m.audioOutDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.frameCounters = make(map[string]prometheus.Counter)
	for _, typ := range frames.Types() {
		if dir, _ := frames.DirectionOf(typ); dir == frames.ClientToBroker {
			m.frameCounters[typ] = m.framesIn.WithLabelValues(typ)
		}
	}
	m.changeCounters = make(map[jobs.Event]prometheus.Counter, len(jobEvents))
	for _, e := range jobEvents {
		m.changeCounters[e] = m.changes.WithLabelValues(string(e))
	}
	return m
}

// frameReceived counts one client frame of type typ.
func (m *metrics) frameReceived(typ string) {
	if c, ok := m.frameCounters[typ]; ok {
		c.Inc()
		return
	}
	m.framesIn.WithLabelValues(typ).Inc()
}

// changed counts one job change of event e.
func (m *metrics) changed(e jobs.Event) {
	if c, ok := m.changeCounters[e]; ok {
		c.Inc()
		return
	}
	m.changes.WithLabelValues(string(e)).Inc()
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
