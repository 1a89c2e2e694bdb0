package trainer

import (
	"fmt"
	"math"
	"testing"

	"github.com/hone-rl/hone/capture"
)

// exp builds an experience with three generated tokens.
func exp(task, session string, leaf int, reward float64, stepRewards ...float64) *capture.Experience {
	e := &capture.Experience{
		Task: task, Session: session, Leaf: leaf, Reward: reward,
		Tokens: []int32{1, 2, 3, 4, 5}, Mask: []uint8{0, 0, 1, 1, 1},
	}
	for i, r := range stepRewards {
		r := r
		e.Steps = append(e.Steps, capture.StepSpan{Call: fmt.Sprint(i), Reward: &r})
	}
	return e
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*(1+math.Abs(b)) }

func scoresOf(t *testing.T, samples []Sample) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range samples {
		key := fmt.Sprintf("%s/%d", s.Exp.Session, s.Exp.Leaf)
		out[key] = s.Score
		for i, a := range s.Advantages {
			want := float32(0)
			if s.Exp.Mask[i] != 0 {
				want = float32(s.Score)
			}
			if a != want {
				t.Fatalf("%s token %d: advantage %v, want %v (broadcast over mask)", key, i, a, want)
			}
		}
	}
	return out
}

func TestAdvantages(t *testing.T) {
	s3 := math.Sqrt(1.0 / 3) // unbiased std of {0,1,0,1}
	tests := []struct {
		name    string
		opts    AdvantageOptions
		exps    []*capture.Experience
		want    map[string]float64
		skipped int
	}{
		{
			name: "grpo group normalised, zero-variance and singleton groups skipped",
			opts: AdvantageOptions{Algorithm: AlgGRPO, Epsilon: 1e-6},
			exps: []*capture.Experience{
				exp("a", "s1", 0, 0), exp("a", "s2", 0, 1), exp("a", "s3", 0, 0), exp("a", "s4", 0, 1),
				exp("b", "s5", 0, 1), exp("b", "s6", 0, 1), exp("c", "s7", 0, 5), exp("", "s8", 0, 3),
			},
			want: map[string]float64{
				"s1/0": -0.5 / (s3 + 1e-6), "s2/0": 0.5 / (s3 + 1e-6),
				"s3/0": -0.5 / (s3 + 1e-6), "s4/0": 0.5 / (s3 + 1e-6),
			},
			skipped: 4,
		},
		{
			name: "grpo without skipping follows Trinity: singleton uses mean 0 std 1",
			opts: AdvantageOptions{Algorithm: AlgGRPO, Epsilon: 0, StdThreshold: -1},
			exps: []*capture.Experience{exp("c", "s7", 0, 5), exp("b", "s5", 0, 2), exp("b", "s6", 0, 4)},
			want: map[string]float64{"s7/0": 5, "s5/0": -1 / math.Sqrt2, "s6/0": 1 / math.Sqrt2},
		},
		{
			name: "grpo batch-level std, group-level mean",
			opts: AdvantageOptions{Algorithm: AlgGRPO, StdLevel: "batch"},
			// batch rewards {0,2,10,14}: mean 6.5, unbiased std sqrt(((6.5²+4.5²+3.5²+7.5²)/3))
			exps: []*capture.Experience{exp("a", "s1", 0, 0), exp("a", "s2", 0, 2), exp("b", "s3", 0, 10), exp("b", "s4", 0, 14)},
			want: func() map[string]float64 {
				bs := math.Sqrt((6.5*6.5 + 4.5*4.5 + 3.5*3.5 + 7.5*7.5) / 3)
				return map[string]float64{"s1/0": -1 / bs, "s2/0": 1 / bs, "s3/0": -2 / bs, "s4/0": 2 / bs}
			}(),
		},
		{
			name:    "rloo leave-one-out baseline",
			opts:    AdvantageOptions{Algorithm: AlgRLOO},
			exps:    []*capture.Experience{exp("a", "s1", 0, 1), exp("a", "s2", 0, 0), exp("a", "s3", 0, 0), exp("b", "s4", 0, 2), exp("b", "s5", 0, 2)},
			want:    map[string]float64{"s1/0": 1, "s2/0": -0.5, "s3/0": -0.5},
			skipped: 2,
		},
		{
			name: "step-wise grpo scores each run by its last step reward",
			opts: AdvantageOptions{Algorithm: AlgStepWiseGRPO},
			// run r1 = two leaves, last step reward 1 (overrides session reward 0);
			// run r2 last step reward 0; run r3 has no step reward: session reward 0.5.
			exps: []*capture.Experience{
				exp("t", "r1", 1, 0, 0, 1), exp("t", "r1", 0, 0, 9), exp("t", "r2", 0, 1, 1, 0), exp("t", "r3", 0, 0.5),
			},
			// last rewards {1, 0, 0.5}: mean 0.5, unbiased std 0.5
			want: map[string]float64{"r1/0": 1, "r1/1": 1, "r2/0": -1, "r3/0": 0},
		},
		{
			name: "step-wise grpo with step normalisation divides by the run's step count",
			opts: AdvantageOptions{Algorithm: AlgStepWiseGRPO, StepNorm: true},
			exps: []*capture.Experience{
				exp("t", "r1", 1, 0, 0, 1), exp("t", "r1", 0, 0, 9), exp("t", "r2", 0, 1, 1, 0), exp("t", "r3", 0, 0.5),
			},
			// r1: 3 steps over two leaves; r2: 2 steps; r3: no spans counts as one step
			want: map[string]float64{"r1/0": 1.0 / 3, "r1/1": 1.0 / 3, "r2/0": -0.5, "r3/0": 0},
		},
		{
			name: "step-wise grpo skips a task whose runs all ended alike",
			opts: AdvantageOptions{Algorithm: AlgStepWiseGRPO},
			exps: []*capture.Experience{exp("t", "r1", 0, 0, 1), exp("t", "r2", 0, 1)},
			want: map[string]float64{}, skipped: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewAdvantager(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			samples, st := a.Compute(tc.exps)
			got := scoresOf(t, samples)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d samples %v, want %v", len(got), got, tc.want)
			}
			for k, w := range tc.want {
				if g, ok := got[k]; !ok || !near(g, w, 1e-9) {
					t.Errorf("%s: advantage %v, want %v", k, g, w)
				}
			}
			if st.Skipped != tc.skipped || st.Kept != len(tc.want) {
				t.Errorf("stats kept %d skipped %d, want %d %d", st.Kept, st.Skipped, len(tc.want), tc.skipped)
			}
		})
	}
}

func TestEMABaseline(t *testing.T) {
	a, err := NewAdvantager(AdvantageOptions{Algorithm: AlgReinforceEMA, EMADecay: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	// first batch: baseline starts at its mean (2), then stays 2.
	s, _ := a.Compute([]*capture.Experience{exp("", "a", 0, 1), exp("", "b", 0, 3)})
	if s[0].Score != -1 || s[1].Score != 1 {
		t.Fatalf("first batch scores %v %v, want -1 1", s[0].Score, s[1].Score)
	}
	// second batch mean 6: advantage vs 2, baseline moves to 0.5*2+0.5*6 = 4.
	s, _ = a.Compute([]*capture.Experience{exp("", "c", 0, 6)})
	if s[0].Score != 4 || a.(*emaBaseline).Baseline() != 4 {
		t.Fatalf("second batch score %v baseline %v, want 4 4", s[0].Score, a.(*emaBaseline).Baseline())
	}
}

func TestNewAdvantagerErrors(t *testing.T) {
	for _, o := range []AdvantageOptions{
		{Algorithm: "ppo-gae"}, {Algorithm: AlgGRPO, StdLevel: "global"}, {Algorithm: AlgReinforceEMA, EMADecay: 1},
	} {
		if _, err := NewAdvantager(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// Groups are per client: another key's sessions naming the same task never
// enter a client's baseline, so they cannot turn its rewards' advantages
// around (with one group, the attacker's high rewards would make both of
// the victim's sessions negative).
func TestAdvantageGroupsPerOwner(t *testing.T) {
	owned := func(owner, session string, reward float64) *capture.Experience {
		e := exp("t", session, 0, reward, reward)
		e.Owner = owner
		return e
	}
	for _, alg := range []string{AlgGRPO, AlgStepWiseGRPO} {
		adv, err := NewAdvantager(AdvantageOptions{Algorithm: alg, Epsilon: 1e-6})
		if err != nil {
			t.Fatal(err)
		}
		samples, _ := adv.Compute([]*capture.Experience{
			owned("key:victim", "v1", 0), owned("key:victim", "v2", 1),
			owned("key:attacker", "a1", 100), owned("key:attacker", "a2", 100),
		})
		scores := map[string]float64{}
		for _, s := range samples {
			scores[s.Exp.Session] = s.Score
		}
		if !(scores["v1"] < 0 && scores["v2"] > 0) || near(scores["v2"], 0, 1e-9) {
			t.Errorf("%s: victim's advantages %v moved by another owner's sessions", alg, scores)
		}
	}
}
