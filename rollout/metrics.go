package rollout

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exports each alias's rollout: the candidate's share, each
// arm's sessions, mean session reward and call error rate, and whether it
// is running, promoted or rolled back.
type collector struct {
	m                                   *Manager
	share, sessions, reward, errs, done *prometheus.Desc
}

// NewCollector returns the Prometheus collector of m's rollouts.
func NewCollector(m *Manager) prometheus.Collector {
	arm := []string{"alias", "arm", "version"}
	return &collector{m: m,
		share: prometheus.NewDesc("hone_rollout_candidate_share", "Share of new sessions the candidate serves.",
			[]string{"alias", "version"}, nil),
		sessions: prometheus.NewDesc("hone_rollout_sessions", "Rewarded sessions counted per arm.", arm, nil),
		reward:   prometheus.NewDesc("hone_rollout_reward_mean", "Mean session reward per arm.", arm, nil),
		errs:     prometheus.NewDesc("hone_rollout_call_error_rate", "Call error rate per arm.", arm, nil),
		done: prometheus.NewDesc("hone_rollout_state", "1 for the rollout's state (running, promoted, rolled_back).",
			[]string{"alias", "version", "state"}, nil)}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.share, c.sessions, c.reward, c.errs, c.done} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.m.List() {
		cv := version(r.Candidate)
		ch <- prometheus.MustNewConstMetric(c.share, prometheus.GaugeValue, r.Share, r.Alias, cv)
		state := r.Decision
		if state == Running {
			state = "running"
		}
		ch <- prometheus.MustNewConstMetric(c.done, prometheus.GaugeValue, 1, r.Alias, cv, state)
		for i, name := range []string{"incumbent", "candidate"} {
			v := version(r.Incumbent)
			if i == Candidate {
				v = cv
			}
			a := r.Arms[i]
			ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(a.N), r.Alias, name, v)
			ch <- prometheus.MustNewConstMetric(c.reward, prometheus.GaugeValue, a.Mean, r.Alias, name, v)
			ch <- prometheus.MustNewConstMetric(c.errs, prometheus.GaugeValue, a.errorRate(), r.Alias, name, v)
		}
	}
}

func version(v Version) string { return "v" + strconv.FormatInt(v.Version, 10) }
