package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hone-rl/hone/config"
	"github.com/hone-rl/hone/proxy"
)

func TestAddPolicyAlias(t *testing.T) {
	cases := []struct {
		name     string
		mutate   func(c *config.Config)
		want     []string // names routed to the trainer's alias; nil: no alias yet
		wantBase string
	}{
		{"embedded served name follows", func(c *config.Config) { c.Embedded.ServedModelName = "tiny" },
			[]string{"hone", "tiny"}, "tiny"},
		{"served_model wins", func(c *config.Config) {
			c.Embedded.ServedModelName, c.Trainer.ServedModel = "tiny", "Qwen/Qwen3-8B"
		}, []string{"hone", "Qwen/Qwen3-8B"}, "Qwen/Qwen3-8B"},
		{"external engine: found later", func(*config.Config) {}, nil, ""},
		{"configured alias gets the served name", func(c *config.Config) {
			c.Embedded.ServedModelName = "tiny"
			c.Proxy.Aliases = []proxy.AliasConfig{{Name: "hone", Target: "tiny", Names: []string{"extra"}}}
		}, []string{"hone", "extra", "tiny"}, "tiny"},
		{"trainer off: nothing", func(c *config.Config) { c.Trainer.Enabled, c.Embedded.ServedModelName = false, "tiny" }, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			c.Trainer.Enabled = true
			tc.mutate(&c)
			addPolicyAlias(&c)
			a := proxy.NewAliases(c.Proxy.Aliases)
			p, ok := a.Lookup("hone")
			if tc.want == nil {
				if ok {
					t.Fatalf("alias made: %+v", p)
				}
				return
			}
			if !ok || p.Target != tc.wantBase {
				t.Fatalf("alias %+v %v, want target %s", p, ok, tc.wantBase)
			}
			if got := a.Names("hone"); !slices.Equal(got, tc.want) {
				t.Fatalf("names %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPrintPolicies(t *testing.T) {
	var v policiesView
	if err := json.Unmarshal([]byte(`{"policies":[{"alias":"agent","target":"agent-v1","version":1,"in_flight":2,
		"names":["agent","Qwen/Qwen3-0.6B"],"rollout":{"alias":"agent","incumbent":{"version":1,"target":"agent-v1"},
		"candidate":{"version":2,"target":"agent-v2"},"step":1,"share":0.25,"arms":[{"n":300,"mean":0.5,"calls":900},
		{"n":100,"mean":0.62,"calls":300,"errors":1}],"looks":2,"diff":0.12,"lower":-0.01,"upper":0.25}}]}`), &v); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := printPolicies(&b, v); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"agent  v1    agent-v1", "rollout of agent: v2 against v1: running, share 25% (step 2)",
		"candidate 100 sessions, mean reward 0.62, 300 calls, 1 errors", "interval [-0.01, 0.25]"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}
