package capture

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func TestMetricsRegisteredAndDriftCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := Open(t.TempDir(), testOptions(), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := newVocab()
	prompts, replies := toolSession()
	a := v.makeCall("a", "m", prompts[0], replies[0], 1)
	b := v.makeCall("b", "m", []msg{{Role: "user", Content: "something else"}}, replies[2], 1)
	s.Record(a)
	s.Record(b)
	ctx := context.Background()
	if _, err := s.Feedback(ctx, FeedbackReq{Session: "m", Reward: ptr(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	rec, _, err := s.GetSession(ctx, "m")
	if err != nil || len(rec.Drifts) != 1 || rec.Drifts[0].Call != "b" || rec.Drifts[0].Against != "a" || rec.Drifts[0].Cause != DriftEdited {
		t.Errorf("stored drifts %+v (%v)", rec.Drifts, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			for _, l := range m.GetLabel() {
				if l.GetValue() == "ready" || l.GetName() == "cause" {
					got[mf.GetName()+"{"+l.GetValue()+"}"] = v
				}
			}
			got[mf.GetName()] += v
		}
	}
	want := map[string]float64{"hone_trajectory_drift_total": 1, "hone_trajectory_drift_total{edited}": 1,
		"hone_trajectory_drift_total{tool_arguments}": 0, "hone_trajectory_drift_total{unknown}": 0, "hone_capture_calls_stored_total": 2,
		"hone_capture_experiences_total": 2, "hone_capture_sessions{ready}": 1, "hone_capture_queue_depth": 0, "hone_capture_dropped_total": 0}
	for name, w := range want {
		if v, ok := got[name]; !ok || v != w {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, w)
		}
	}
}
