package main

import (
	"testing"

	"github.com/hone-rl/hone/config"
)

// TestContinuityModel: tokens mode renders with engine.tokenizer, else
// --model, else the embedded engine's model folder.
func TestContinuityModel(t *testing.T) {
	for _, tc := range []struct{ tokenizer, model, embedded, want string }{
		{"/tok", "/model", "/emb", "/tok"},
		{"", "/model", "/emb", "/model"},
		{"", "", "/emb", "/emb"},
		{"", "", "", ""},
	} {
		c := config.Default()
		c.Proxy.Upstream.Tokenizer, c.Model, c.Embedded.ModelDir = tc.tokenizer, tc.model, tc.embedded
		continuityModel(&c)
		if got := c.Proxy.Upstream.Tokenizer; got != tc.want {
			t.Errorf("%+v: %q", tc, got)
		}
	}
}
