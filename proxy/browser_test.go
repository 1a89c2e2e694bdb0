package proxy

import (
	"strings"
	"testing"
)

func TestCrossSite(t *testing.T) {
	for _, tc := range []struct {
		host, origin, site string
		checkHost, refused bool
	}{
		{"127.0.0.1:8080", "", "", true, false},
		{"localhost:8080", "", "", true, false},
		{"LOCALHOST", "", "", true, false},
		{"app.localhost:8080", "", "", true, false},
		{"[::1]:8080", "", "", true, false},
		{"127.1.2.3", "", "", true, false},
		{"", "", "", true, false}, // HTTP/1.0 without a Host: no browser
		{"evil.example:8080", "", "", true, true},
		{"localhost.evil.example", "", "", true, true},
		{"127.0.0.1.nip.io", "", "", true, true},
		{"192.168.1.5:8080", "", "", true, false}, // an address: no DNS name to rebind
		{"[fe80::1]:8080", "", "", true, false},
		{machineName + ":8080", "", "", true, machineName == ""},
		{strings.ToUpper(machineName) + ".", "", "", true, machineName == ""},
		{machineName + ".evil.example", "", "", true, true},
		{"evil.example:8080", "", "", false, false}, // a listener others reach by name
		{"localhost", "http://localhost:3000", "same-site", true, false},
		{"localhost", "https://127.0.0.1", "", true, false},
		{"localhost", "http://evil.example", "", true, true},
		{"localhost", "http://evil.example", "", false, true},
		{"localhost", "null", "", true, true},
		{"localhost", "file://", "", true, true},
		{"localhost", "http://localhost.evil.example", "", true, true},
		{"localhost", "", "cross-site", true, true},
		{"127.0.0.1:8080", "http://localhost:3000", "cross-site", true, false}, // another site, both loopback
		{"localhost", "", "Cross-Site", false, true},
		{"localhost", "", "same-origin", true, false},
		{"localhost", "", "none", true, false},
	} {
		why := crossSite(tc.host, tc.origin, tc.site, tc.checkHost)
		if (why != "") != tc.refused {
			t.Errorf("host %q origin %q site %q checkHost %v: %q, want refused %v", tc.host, tc.origin, tc.site, tc.checkHost, why, tc.refused)
		}
		// errors never echo the request's head
		if tc.origin != "" && strings.Contains(why, tc.origin) || tc.host != "" && strings.Contains(why, tc.host) {
			t.Errorf("host %q origin %q: the refusal quotes them: %q", tc.host, tc.origin, why)
		}
	}
}
