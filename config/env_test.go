package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestUnknownEnv: a HONE_* variable that is no key stops hone as an unknown
// YAML key does, naming the nearest key; the variables the tests, benchmarks
// and scripts read are allowed.
func TestUnknownEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want []string // substrings of the error; none: no error
	}{
		{"typo", []string{"HONE_PROXY_LISTN=:9000"}, []string{"unknown environment variable HONE_PROXY_LISTN", "did you mean HONE_PROXY_LISTEN?"}},
		{"transposed", []string{"HONE_SELECTION_SMAPLE_RATE=0.5"}, []string{"did you mean HONE_SELECTION_SAMPLE_RATE?"}},
		{"old token name", []string{"HONE_CONTROL_TOKEN=x"}, []string{"HONE_CONTROL_TOKEN", "did you mean HONE_PROXY_CONTROL_TOKEN?"}},
		{"section left out", []string{"HONE_LISTEN=:9000"}, []string{"did you mean HONE_PROXY_LISTEN or HONE_PROXY_CONTROL_LISTEN?"}},
		{"sections left out", []string{"HONE_SEED=1"}, []string{"did you mean HONE_TRAINER_LORA_SEED?"}},
		{"three tails", []string{"HONE_INTERVAL=1s"}, []string{"(did you mean HONE_RETENTION_INTERVAL, HONE_TRAINER_POLL_INTERVAL or HONE_ENGINE_HEALTH_INTERVAL?)"}},
		{"far off", []string{"HONE_COMPLETELY_DIFFERENT=1"}, []string{"unknown environment variable HONE_COMPLETELY_DIFFERENT: "}},
		{"every unknown named, sorted", []string{"HONE_ZZZ=1", "HONE_AAA=1"}, []string{"HONE_AAA", "; unknown environment variable HONE_ZZZ"}},
		{"unknown next to a good one", []string{"HONE_LOG_LEVEL=debug", "HONE_LOG_LEVL=debug"}, []string{"HONE_LOG_LEVL (did you mean HONE_LOG_LEVEL?)"}},
		{"keys", []string{"HONE_PROXY_LISTEN=:9000", "HONE_LOG_LEVEL=warn", "HONE_TRAINER_SCHEDULE_LR=0.001", "HONE_DATA=/d"}, nil},
		{"engine urls", []string{"HONE_ENGINE_URLS=http://a:8000"}, nil},
		{"test and bench knobs", []string{"HONE_REQUIRE_PARITY=1", "HONE_REQUIRE_NODE=1", "HONE_UPDATE_GOLDEN=1",
			"HONE_CRASH_ROUNDS=25", "HONE_BENCH_LARGE=1", "HONE_BENCH_TRACE=/tmp/t", "HONE_BENCH_HONE_GOGC=200"}, nil},
		{"script variables", []string{"HONE_EXPECT=stub", "HONE_MAX_TOKENS=48"}, nil},
		{"not ours", []string{"HONEY=1", "XHONE_FOO=1", "PATH=/bin"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("", tc.env)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if cerr := CheckEnv(tc.env); cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("CheckEnv %v, Load %v", cerr, err)
			}
		})
	}
}

// TestEnvKeysMatchYAML: every derived variable names a key of the example
// config (so the YAML tags and the variable names agree), and the
// Dockerfile's and deploy files' variables are keys.
func TestEnvKeysMatchYAML(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range EnvKeys() {
		keys[k] = true
	}
	for _, k := range []string{"HONE_DATA", "HONE_TRAINER_CHECKPOINT_DIR", "HONE_PROXY_LISTEN", "HONE_PROXY_CONTROL_LISTEN",
		"HONE_PROXY_CONTROL_TOKEN", "HONE_SELECTION_SAMPLE_RATE", "HONE_ENGINE_TIMEOUTS_IDLE", "HONE_RUNTIME_GC_PERCENT",
		"HONE_PROXY_CLIENT_KEYS", "HONE_PROXY_AGENTS_TRUST_EACH_OTHER", "HONE_PROXY_INFERENCE_ROUTES"} {
		if !keys[k] {
			t.Errorf("%s is not a key", k)
		}
	}
	files, _ := filepath.Glob(filepath.Join("..", "deploy", "*"))
	for _, f := range append(files, filepath.Join("..", "Dockerfile")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range regexp.MustCompile(`HONE_[A-Z0-9_]+`).FindAllString(string(b), -1) {
			if !keys[k] && !otherEnv(k) {
				t.Errorf("%s names %s, which hone does not read", f, k)
			}
		}
	}
	for k := range keys {
		if otherEnv(k) {
			t.Errorf("%s is both a key and in OtherEnv", k)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "abc", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"LISTN", "LISTEN", 1}, {"SMAPLE", "SAMPLE", 2}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
