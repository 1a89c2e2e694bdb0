package config

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func writeFile(t *testing.T, body string) string {
	p := filepath.Join(t.TempDir(), "hone.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env        []string
		want       string
	}{
		{"unknown top-level key", "listen_addr: :9000\n", nil, "listen_addr"},
		{"unknown nested key", "proxy:\n  lisen: :9000\n", nil, "lisen"},
		{"wrong type", "proxy:\n  max_body_bytes: lots\n", nil, "line 2 (key max_body_bytes): "},
		{"key with brackets and spaces quoted", ")0 0: 1\n", nil, `line 1 (key ")0 0"): `},
		{"bad duration", "engine:\n  timeouts:\n    idle: soon\n", nil, "soon"},
		{"section given a number on its own line", "proxy:\n  0\n", nil, "line 2 (key proxy): "},
		{"section in a flow mapping", "{engine: {},\n proxy:\n  0}\n", nil, "line 3 (key proxy): "},
		{"flow mapping names the wrong-typed key", "proxy: {listen: x, max_body_bytes: lots}\n", nil, "line 1 (key max_body_bytes): "},
		{"complex key", "? ?\n", nil, `line 1 (key "{'': ''}"): `},
		{"duration in a flow mapping", "engine: {timeouts: {idle: 5}}\n", nil, "line 1 (key idle): 5 is not a duration"},
		{"bad env value", "", []string{"HONE_SELECTION_SAMPLE_RATE=half"}, "HONE_SELECTION_SAMPLE_RATE"},
		{"bad env duration", "", []string{"HONE_ENGINE_TIMEOUTS_IDLE=5"}, "HONE_ENGINE_TIMEOUTS_IDLE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.yaml != "" {
				path = writeFile(t, tc.yaml)
			}
			_, err := Load(path, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v does not name %q", err, tc.want)
			}
		})
	}
}

func TestFinishErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*Config)
		want string
	}{
		{"token ids", func(c *Config) { c.Engine.TokenIDs = "maybe" }, "engine.token_ids"},
		{"engine url", func(c *Config) { c.Engine.Engines = append(c.Engine.Engines, engineURL("localhost:8000")) }, "engine.engines[0].url"},
		{"open control plane", func(c *Config) { c.Proxy.ControlListen = "0.0.0.0:8081" }, "proxy.control_token"},
		{"log level", func(c *Config) { c.Log.Level = "loud" }, "log.level"},
		{"timeout", func(c *Config) { c.Engine.Timeouts.Idle = 0 }, "engine.timeouts.idle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.mut(&c)
			if err := c.Finish(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v does not name %q", err, tc.want)
			}
		})
	}
}

// TestPrecedence: defaults < file < environment < flags.
func TestPrecedence(t *testing.T) {
	path := writeFile(t, "data: /from/file\nproxy:\n  listen: :7000\n  control_token: file-token\nselection:\n  sample_rate: 0.5\n")
	env := []string{"HONE_PROXY_LISTEN=:7001", "HONE_ENGINE_URLS=http://a:8000/v1,http://b:8000", "HONE_TRAINER_ENABLED=true",
		"HONE_ENGINE_TIMEOUTS_IDLE=7s", "HONE_PROXY_CLIENT_KEYS=k1, k2", "UNRELATED=1"}
	c, err := Load(path, env)
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	sf := NewServeFlags(fs)
	if err := fs.Parse([]string{"--listen", ":7002", "--engine", "http://c:8000"}); err != nil {
		t.Fatal(err)
	}
	sf.Apply(&c)
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	if c.Data != "/from/file" || c.Proxy.ControlToken != "file-token" || c.Capture.Selection.SampleRate != 0.5 {
		t.Errorf("file values lost: %+v", c)
	}
	if c.Proxy.Listen != ":7002" {
		t.Errorf("flag did not win: listen %q", c.Proxy.Listen)
	}
	if len(c.Proxy.Upstream.Engines) != 1 || c.Proxy.Upstream.Engines[0].URL != "http://c:8000" {
		t.Errorf("--engine did not replace HONE_ENGINE_URLS: %+v", c.Proxy.Upstream.Engines)
	}
	if !c.Trainer.Enabled || c.Proxy.Upstream.Timeouts.Idle != 7*time.Second {
		t.Errorf("env not applied: trainer %v idle %s", c.Trainer.Enabled, c.Proxy.Upstream.Timeouts.Idle)
	}
	if !reflect.DeepEqual(c.Proxy.ClientKeys, []string{"k1", "k2"}) {
		t.Errorf("client keys %q", c.Proxy.ClientKeys)
	}
	if c.Trainer.CheckpointDir != filepath.Join("/from/file", "checkpoints") {
		t.Errorf("checkpoint dir %q", c.Trainer.CheckpointDir)
	}
}

func TestEngineURLs(t *testing.T) {
	for in, want := range map[string]string{"http://a:8000/v1": "http://a:8000", "sglang=http://b:30000": "http://b:30000"} {
		if got := engineURL(in); got.URL != want {
			t.Errorf("%s -> %+v", in, got)
		}
	}
	if engineURL("sglang=http://b:30000").Kind != "sglang" {
		t.Error("kind prefix lost")
	}
}

// TestExampleIsComplete: config.example.yaml loads with unknown keys
// refused and equals the defaults, so it documents every option.
func TestExampleIsComplete(t *testing.T) {
	c, err := Load(filepath.Join("..", "config.example.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := yaml.Marshal(c)
	want, _ := yaml.Marshal(Default())
	if string(got) != string(want) { // compared as YAML: [] and nil lists are the same setting
		t.Fatalf("config.example.yaml differs from the defaults:\n%s", lineDiff(string(got), string(want)))
	}
	// Every key of the defaults must be written in the example (a missing key
	// would decode to its default and pass the comparison above).
	var example, defaults yaml.Node
	raw, _ := os.ReadFile(filepath.Join("..", "config.example.yaml"))
	if err := yaml.Unmarshal(raw, &example); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(want, &defaults); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	keyPaths(&example, "", have)
	need := map[string]bool{}
	keyPaths(&defaults, "", need)
	for k := range need {
		if !have[k] {
			t.Errorf("config.example.yaml does not document %s", k)
		}
	}
}

func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var out []string
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			out = append(out, "example: "+a+"\ndefault: "+b)
		}
	}
	return strings.Join(out, "\n")
}

// keyPaths collects the dotted paths of every mapping key under n.
func keyPaths(n *yaml.Node, prefix string, out map[string]bool) {
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			keyPaths(c, prefix, out)
		}
		return
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := prefix + n.Content[i].Value
		out[k] = true
		keyPaths(n.Content[i+1], k+".", out)
	}
}

func TestNonFiniteOptionsRefused(t *testing.T) {
	for _, tc := range []struct{ env, key string }{
		{"HONE_SELECTION_SAMPLE_RATE=NaN", "selection.sample_rate"},
		{"HONE_REWARD_DEFAULT=+Inf", "reward.default"},
		{"HONE_TRAINER_MAX_GRAD_NORM=-Inf", "trainer.max_grad_norm"},
	} {
		c, err := Load("", []string{tc.env})
		if err == nil {
			err = c.Finish()
		}
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v, want an error naming %s", tc.env, err, tc.key)
		}
	}
	dir := t.TempDir()
	f := dir + "/c.yaml"
	if err := os.WriteFile(f, []byte("trainer:\n  schedule:\n    lr: .nan\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(f, nil)
	if err == nil {
		err = c.Finish()
	}
	if err == nil || !strings.Contains(err.Error(), "trainer.schedule.lr") {
		t.Errorf("lr .nan: %v", err)
	}
}
