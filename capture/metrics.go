package capture

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	dropped       prometheus.Counter
	stored        prometheus.Counter
	storedBytes   prometheus.Counter
	drift         *prometheus.CounterVec // by cause
	sessions      *prometheus.CounterVec // by selection decision
	skippedCalls  prometheus.Counter
	skippedEvents *prometheus.CounterVec // reward/commit headers on skipped sessions
	states        *prometheus.GaugeVec
	experiences   prometheus.Counter
	feedback      *prometheus.CounterVec
	writeErrors   prometheus.Counter
	batchSeconds  prometheus.Histogram
	evicted       prometheus.Counter
	orphans       prometheus.Counter
	foreign       *prometheus.CounterVec // by source and kind
	continuations prometheus.Counter
	rebuilds      prometheus.Counter
	expired       prometheus.Counter
	// open sessions closed early: more than session.max_open were open
	capacityClosed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, depth func() float64) (*metrics, error) {
	m := &metrics{
		dropped:     prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_capture_dropped_total", Help: "Captured calls dropped because the queue was full or the store closed."}),
		stored:      prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_capture_calls_stored_total", Help: "Calls written to the store."}),
		storedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_capture_stored_bytes_total", Help: "Encoded bytes of calls written (before compression)."}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hone_trajectory_drift_total",
			Help: "Calls that extended no earlier path of their session, by cause (tool_arguments, reasoning, edited, unknown)."}, []string{"cause"}),
		sessions:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hone_capture_sessions_total", Help: "Sessions seen, by selection decision."}, []string{"decision"}),
		skippedCalls:  prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_capture_skipped_calls_total", Help: "Calls of sessions not selected for capture."}),
		skippedEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hone_capture_skipped_events_total", Help: "Reward or commit headers on skipped sessions."}, []string{"kind"}),
		states:        prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hone_capture_sessions", Help: "Stored sessions by state."}, []string{"state"}),
		experiences:   prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_capture_experiences_total", Help: "Experiences added to the ready queue."}),
		feedback:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hone_capture_rewards_total", Help: "Rewards recorded, by source."}, []string{"source"}),
		writeErrors:   prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_capture_write_errors_total", Help: "Failed store writes."}),
		batchSeconds:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hone_capture_batch_seconds", Help: "Time to encode one batch of calls into the store.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14)}),
		evicted:       prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_capture_evicted_sessions_total", Help: "Consumed sessions evicted by the size cap."}),
		orphans:       prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_capture_orphan_calls_total", Help: "Calls for a dropped session: stored, never trained on."}),
		foreign: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hone_capture_foreign_feedback_total",
			Help: "Rewards and commits for another client's session, not applied to it (source: header, feedback, commit, trinity)."}, []string{"source", "kind"}),
		continuations: prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_capture_continuations_total", Help: "Continuation sessions started by a call for a consumed session."}),
		rebuilds:      prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_capture_rebuilds_total", Help: "Ready sessions whose experiences were withdrawn and rebuilt (a call or reward arrived after they were ready)."}),
		expired:       prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_capture_expired_sessions_total", Help: "Sessions dropped because calls expired (retention.call_ttl) before their experiences were built."}),
		capacityClosed: prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_capture_capacity_closed_sessions_total",
			Help: "Open sessions closed before their idle timeout, longest idle first, because more than session.max_open were open."}),
	}
	for _, c := range DriftCauses {
		m.drift.WithLabelValues(c) // every cause shows, at 0 until it happens
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.dropped, m.stored, m.storedBytes, m.drift, m.sessions, m.skippedCalls, m.skippedEvents,
		m.states, m.experiences, m.feedback, m.writeErrors, m.batchSeconds, m.evicted,
		m.orphans, m.foreign, m.continuations, m.rebuilds, m.expired, m.capacityClosed,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hone_capture_queue_depth", Help: "Calls waiting in the capture queue."}, depth)}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register capture metrics: %w", err)
		}
	}
	return m, nil
}
