package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigErrorsNameKeyAndSource: each error names the key, the value,
// what is wanted and where the key was set (file and line, variable or
// flag), with a suggestion for a misspelt key or a duration without a unit.
func TestConfigErrorsNameKeyAndSource(t *testing.T) {
	for _, c := range []struct {
		name  string
		yaml  string
		env   []string
		flags []string
		want  []string
	}{
		{name: "sample rate in the file", yaml: "selection:\n  sample_rate: 2\n",
			want: []string{"selection.sample_rate 2: want 0..1", "hone.yaml line 2"}},
		{name: "sample rate in the environment", env: []string{"HONE_SELECTION_SAMPLE_RATE=2"},
			want: []string{"selection.sample_rate 2: want 0..1", "set by HONE_SELECTION_SAMPLE_RATE"}},
		{name: "misspelt key", yaml: "proxy:\n  listn: 127.0.0.1:8080\n",
			want: []string{"unknown key listn", "did you mean proxy.listen?"}},
		{name: "misspelt section", yaml: "trainr:\n  enabled: true\n", want: []string{"did you mean", "trainer?"}},
		{name: "duration without a unit in the file", yaml: "proxy:\n  read_timeout: 5\n",
			want: []string{"read_timeout", "5 is not a duration", "e.g. 5s"}},
		{name: "duration without a unit in the environment", env: []string{"HONE_PROXY_READ_TIMEOUT=5"},
			want: []string{"proxy.read_timeout: HONE_PROXY_READ_TIMEOUT=\"5\" is not a duration", "e.g. 5s"}},
		{name: "train batch flag", flags: []string{"--train", "--train-batch", "-1"},
			want: []string{"trainer.batch_sessions: -1, want > 0", "set by --train-batch"}},
		{name: "train batch in the file", yaml: "trainer:\n  enabled: true\n  batch_sessions: 0\n",
			want: []string{"trainer.batch_sessions: 0, want > 0", "hone.yaml line 3"}},
		{name: "listen flag", flags: []string{"--listen", "0.0.0.0:9"},
			want: []string{"proxy.listen", "proxy.agents_trust_each_other", "set by --listen"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := ""
			if c.yaml != "" {
				path = filepath.Join(t.TempDir(), "hone.yaml")
				if err := os.WriteFile(path, []byte(c.yaml), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := Load(path, c.env)
			if err == nil {
				fs := flag.NewFlagSet("serve", flag.ContinueOnError)
				sf := NewServeFlags(fs)
				if err = fs.Parse(c.flags); err != nil {
					t.Fatal(err)
				}
				sf.Apply(&cfg)
				err = cfg.Finish()
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "trace store") {
				t.Errorf("error %q blames the store", err)
			}
		})
	}
}
