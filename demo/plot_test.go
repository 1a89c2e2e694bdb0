package demo

import (
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestByPolicy(t *testing.T) {
	results := []Result{{Policy: "10", Reward: 1}, {Policy: "9", Reward: 0}, {Policy: "10", Reward: 0}, {Policy: "9", Reward: 1},
		{Policy: "9", Reward: 1}, {Policy: "", Reward: 1}}
	want := []PolicyStat{{Policy: "", Sessions: 1, Reward: 1}, {Policy: "9", Sessions: 3, Reward: 2.0 / 3},
		{Policy: "10", Sessions: 2, Reward: 0.5}}
	if got := byPolicy(results); !reflect.DeepEqual(got, want) {
		t.Fatalf("byPolicy: %+v, want %+v (by version number, not as strings)", got, want)
	}
}

// TestPlotRollout draws a run with a promotion and a rollback and checks a
// PNG of the stated size comes out; a run without rollouts draws too.
func TestPlotRollout(t *testing.T) {
	rep := Report{Rounds: []RoundStat{
		{Round: 1, ByPolicy: []PolicyStat{{Policy: "0", Sessions: 32, Reward: 0.5}}},
		{Round: 2, ByPolicy: []PolicyStat{{Policy: "0", Sessions: 15, Reward: 0.5}, {Policy: "1", Sessions: 17, Reward: 0.7}}},
		{Round: 3, ByPolicy: []PolicyStat{{Policy: "1", Sessions: 16, Reward: 0.7}, {Policy: "2", Sessions: 16, Reward: 0.2}}},
		{Round: 4, ByPolicy: []PolicyStat{{Policy: "1", Sessions: 32, Reward: 0.75}}},
	}, Decisions: []Decision{{Round: 2, Candidate: 1, Incumbent: 0, Decision: "promoted"},
		{Round: 3, Candidate: 2, Incumbent: 1, Decision: "rolled_back"}}}
	for name, r := range map[string]Report{"rollouts": rep, "none": {Rounds: rep.Rounds[:1]}} {
		path := filepath.Join(t.TempDir(), "rollout.png")
		if err := PlotRollout(r, path); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || cfg.Width != 768 || cfg.Height != 499 {
			t.Fatalf("%s: %+v %v", name, cfg, err)
		}
	}
	if err := PlotRollout(Report{}, filepath.Join(t.TempDir(), "x.png")); err == nil {
		t.Fatal("no rounds: drawn anyway")
	}
}
