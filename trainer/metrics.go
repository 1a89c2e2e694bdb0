package trainer

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StepMetrics is one training step's record, a line of the JSONL log.
type StepMetrics struct {
	Step    int64 `json:"step"`    // optimizer steps taken so far (unchanged by a batch without signal)
	Version int64 `json:"version"` // policy version this step produced
	// Trained says whether the batch updated the policy; when not,
	// SkipReason says why (one of the skip* constants) and Why in words.
	Trained      bool      `json:"trained"`
	SkipReason   string    `json:"skip_reason,omitempty"`
	Why          string    `json:"why,omitempty"`
	Time         time.Time `json:"time"`
	Samples      int       `json:"samples"` // trained on
	Skipped      int       `json:"skipped"` // in groups without signal
	Dropped      int       `json:"dropped"` // too stale
	Tokens       int       `json:"tokens"`  // loss-masked tokens
	RewardMean   float64   `json:"reward_mean"`
	RewardStd    float64   `json:"reward_std"`
	AdvMean      float64   `json:"adv_mean"`
	AdvStd       float64   `json:"adv_std"`
	AdvMin       float64   `json:"adv_min"`
	AdvMax       float64   `json:"adv_max"`
	Loss         float64   `json:"loss"`
	PGLoss       float64   `json:"pg_loss"`
	KL           float64   `json:"kl"`         // mean per-token KL estimate to the reference
	ClipFrac     float64   `json:"clip_frac"`  // share of tokens whose gradient a clip zeroed
	RatioMean    float64   `json:"ratio_mean"` // mean π/μ against the behaviour policy
	GradNorm     float64   `json:"grad_norm"`  // before clipping
	LR           float64   `json:"lr"`
	MeanLag      float64   `json:"mean_lag"` // policy versions behind, averaged over samples
	StepSeconds  float64   `json:"step_seconds"`
	TokensPerSec float64   `json:"tokens_per_sec"` // all tokens through forward+backward+optimizer
}

// metricsSink writes StepMetrics to a JSONL stream and Prometheus gauges.
type metricsSink struct {
	mu      sync.Mutex
	w       io.Writer
	gauges  map[string]prometheus.Gauge
	steps   prometheus.Counter
	skipped *prometheus.CounterVec
}

// Why a batch trained nothing (StepMetrics.SkipReason, the reason label of
// hone_trainer_skipped_batches_total).
const (
	skipNoVariance = "no_reward_variance" // every task group's rewards were equal (GRPO family)
	skipMinReward  = "below_sft_min_reward"
	skipUnfit      = "unfit"      // every experience too long for the context or with unknown tokens
	skipStale      = "stale"      // every sample beyond trainer.staleness
	skipNonFinite  = "non_finite" // the loss or gradient was not finite
)

// gaugeFields lists the exported gauges and how to read them.
var gaugeFields = []struct {
	name, help string
	get        func(*StepMetrics) float64
}{
	{"reward_mean", "Mean reward of the last step's batch.", func(m *StepMetrics) float64 { return m.RewardMean }},
	{"reward_std", "Reward standard deviation of the last step's batch.", func(m *StepMetrics) float64 { return m.RewardStd }},
	{"advantage_mean", "Mean advantage of the last step.", func(m *StepMetrics) float64 { return m.AdvMean }},
	{"advantage_std", "Advantage standard deviation of the last step.", func(m *StepMetrics) float64 { return m.AdvStd }},
	{"loss", "Loss of the last step.", func(m *StepMetrics) float64 { return m.Loss }},
	{"kl", "Mean per-token KL to the reference policy.", func(m *StepMetrics) float64 { return m.KL }},
	{"clip_fraction", "Share of tokens clipped by PPO in the last step.", func(m *StepMetrics) float64 { return m.ClipFrac }},
	{"grad_norm", "Gradient norm before clipping.", func(m *StepMetrics) float64 { return m.GradNorm }},
	{"learning_rate", "Learning rate of the last step.", func(m *StepMetrics) float64 { return m.LR }},
	{"tokens_per_second", "Training throughput of the last step.", func(m *StepMetrics) float64 { return m.TokensPerSec }},
	{"policy_version", "Latest policy version trained.", func(m *StepMetrics) float64 { return float64(m.Version) }},
	{"samples", "Samples trained on in the last step.", func(m *StepMetrics) float64 { return float64(m.Samples) }},
}

func newMetricsSink(w io.Writer, reg prometheus.Registerer) (*metricsSink, error) {
	s := &metricsSink{w: w, gauges: map[string]prometheus.Gauge{},
		steps: prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_trainer_steps_total",
			Help: "Training steps that updated the policy."}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hone_trainer_skipped_batches_total",
			Help: "Batches that trained nothing, by reason (no_reward_variance, below_sft_min_reward, unfit, stale, non_finite)."},
			[]string{"reason"})}
	if reg == nil {
		return s, nil
	}
	cs := []prometheus.Collector{s.steps, s.skipped}
	for _, f := range gaugeFields {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "hone_trainer_" + f.name, Help: f.help})
		s.gauges[f.name] = g
		cs = append(cs, g)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register trainer metrics: %w", err)
		}
	}
	return s, nil
}

func (s *metricsSink) record(m *StepMetrics) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !m.Trained {
		s.skipped.WithLabelValues(m.SkipReason).Inc()
	} else {
		s.steps.Inc()
	}
	for _, f := range gaugeFields {
		if g := s.gauges[f.name]; g != nil && m.Trained { // a skipped batch has no loss, gradient or rate
			g.Set(f.get(m))
		}
	}
	if s.w == nil {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode step metrics: %w", err)
	}
	if _, err := s.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write step metrics: %w", err)
	}
	return nil
}
