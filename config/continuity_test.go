package config

import (
	"strings"
	"testing"
)

// TestContinuityKey: capture.continuity defaults to observe, is set by
// HONE_CAPTURE_CONTINUITY, reaches the proxy's options and rejects other
// values naming the key.
func TestContinuityKey(t *testing.T) {
	for _, tc := range []struct {
		env, want, err string
	}{
		{"", "observe", ""},
		{"HONE_CAPTURE_CONTINUITY=tokens", "tokens", ""},
		{"HONE_CAPTURE_CONTINUITY=observe", "observe", ""},
		{"HONE_CAPTURE_CONTINUITY=token", "", "capture.continuity"},
	} {
		var env []string
		if tc.env != "" {
			env = []string{tc.env}
		}
		c, err := Load("", env)
		if err == nil {
			err = c.Finish()
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one naming %s", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || c.Proxy.Continuity != tc.want {
			t.Errorf("%s: continuity %q (err %v), want %q", tc.env, c.Proxy.Continuity, err, tc.want)
		}
	}
}
