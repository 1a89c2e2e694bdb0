package main

import (
	"slices"
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
