package capture

import "testing"

func TestParseRewardPlainDecimal(t *testing.T) {
	ok := map[string]float64{"0": 0, "1": 1, "-1": -1, "+0.25": 0.25, "0.7": 0.7, " 1.5 ": 1.5, "1e-3": 0.001, "-2.5E2": -250}
	for in, want := range ok {
		v, err := ParseReward(in)
		if err != nil || v == nil || *v != want {
			t.Errorf("ParseReward(%q) = %v, %v; want %v", in, v, err, want)
		}
	}
	for _, in := range []string{"NaN", "nan", "Inf", "-Infinity", "0x1p-2", "1_0", "1.", ".5", "01", "1e", "1e999", "lots", "1 2"} {
		if v, err := ParseReward(in); err == nil {
			t.Errorf("ParseReward(%q) = %v, want an error", in, *v)
		}
	}
	if v, err := ParseReward(""); v != nil || err != nil {
		t.Errorf("empty: %v %v", v, err)
	}
}
