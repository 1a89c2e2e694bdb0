package main

import (
	"strings"
	"testing"

	"github.com/hone-rl/hone/config"
)

// With client keys and no control token, hone serve warns that the
// control plane is open to every process on the host.
func TestOpenControlWarning(t *testing.T) {
	for _, tc := range []struct {
		keys  []string
		token string
		warn  bool
	}{
		{nil, "", false},
		{[]string{"sk-a"}, "", true},
		{[]string{"sk-a"}, "secret", false},
		{nil, "secret", false},
	} {
		c := config.Default()
		c.Proxy.ClientKeys, c.Proxy.ControlToken = tc.keys, tc.token
		w := openControlWarning(&c)
		if (w != "") != tc.warn || tc.warn && !strings.Contains(w, "proxy.control_token") {
			t.Errorf("keys %v token %q: %q", tc.keys, tc.token, w)
		}
	}
}
