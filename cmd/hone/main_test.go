package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs a command line as main does and returns its exit status and
// what it printed.
func runCLI(t *testing.T, args ...string) (code int, out, errOut string) {
	t.Helper()
	var o, e bytes.Buffer
	stdout, stderr = &o, &e
	t.Cleanup(func() { stdout, stderr = os.Stdout, os.Stderr })
	code = run(context.Background(), args)
	return code, o.String(), e.String()
}

// TestHelp: --help, -h and help on hone and every (sub)command print the
// usage on stdout and exit 0, without running anything.
func TestHelp(t *testing.T) {
	cases := []struct {
		args []string
		want string // in stdout
	}{
		{[]string{"--help"}, "usage: hone <command>"},
		{[]string{"-h"}, "usage: hone <command>"},
		{[]string{"help"}, "usage: hone <command>"},
		{[]string{"serve", "--help"}, "usage: hone serve [flags]"},
		{[]string{"serve", "-h"}, "-control-listen"},
		{[]string{"engine", "--help"}, "usage: hone engine --model DIR"},
		{[]string{"train", "--help"}, "HONE_PROXY_CONTROL_TOKEN"},
		{[]string{"train", "plot", "--help"}, "usage: hone train plot --log FILE"},
		{[]string{"demo", "--help"}, "usage: hone demo [flags]"},
		{[]string{"demo", "data", "--help"}, "usage: hone demo data"},
		{[]string{"demo", "prepare", "-h"}, "usage: hone demo prepare"},
		{[]string{"export", "--help"}, "usage: hone export"},
		{[]string{"traces", "--help"}, "usage: hone traces ls|show SESSION|stats|gc"},
		{[]string{"traces", "help"}, "'hone traces SUB --help'"},
		{[]string{"traces", "ls", "--help"}, "-since"},
		{[]string{"traces", "show", "--help"}, "usage: hone traces show [--data DIR] SESSION"},
		{[]string{"traces", "stats", "--help"}, "usage: hone traces stats"},
		{[]string{"traces", "gc", "--help"}, "-dry-run"},
		{[]string{"model", "--help"}, "usage: hone model init"},
		{[]string{"model", "init", "--help"}, "-preset"},
		{[]string{"version", "--help"}, "usage: hone version"},
		{[]string{"policies", "--help"}, "usage: hone policies [--control URL]"},
		{[]string{"selftest", "--help"}, "usage: hone selftest [--backend cpu|cuda|emulated|auto]"},
		{[]string{"help", "traces", "gc"}, "-older-than"},
		{[]string{"help", "serve"}, "usage: hone serve"},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != 0 || !strings.Contains(out, tc.want) || errOut != "" {
				t.Fatalf("exit %d, stdout %q (want %q), stderr %q", code, out, tc.want, errOut)
			}
		})
		if len(tc.args) > 1 {
			covered[tc.args[0]] = true
		}
	}
	for name := range commands {
		if !covered[name] {
			t.Errorf("no --help case for hone %s", name)
		}
	}
}

// TestFailuresPrintOnce: a failing command prints its error once on stderr
// (no log line repeating it, no usage dump) and exits 1; a usage error
// exits 2.
func TestFailuresPrintOnce(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nothing")
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string // once in stderr
	}{
		{"no command", nil, nil, 2, "usage: hone <command>"},
		{"unknown command", nil, []string{"frob"}, 2, `unknown command "frob"`},
		{"bad flag", nil, []string{"serve", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{"bad flag of a subcommand", nil, []string{"traces", "gc", "--task", "x"}, 2, "flag provided but not defined: -task"},
		{"extra argument", nil, []string{"version", "now"}, 2, `unexpected argument "now"`},
		{"missing subcommand", nil, []string{"traces"}, 2, "missing subcommand"},
		{"unknown subcommand", nil, []string{"traces", "frob"}, 2, `unknown traces command "frob"`},
		{"unknown model subcommand", nil, []string{"model", "frob"}, 2, `unknown model command "frob"`},
		{"required flag", nil, []string{"engine"}, 2, "--model is required"},
		{"show without session", nil, []string{"traces", "show", "--data", missing}, 2, "usage: hone traces show"},
		{"failing command", nil, []string{"export", "--data", missing}, 1, "hone export: no capture store at"},
		{"unknown environment variable", []string{"HONE_PROXY_LISTN=127.0.0.1:0"}, []string{"serve", "--data", missing}, 1,
			"hone serve: unknown environment variable HONE_PROXY_LISTN (did you mean HONE_PROXY_LISTEN?)"},
		{"old token variable", []string{"HONE_CONTROL_TOKEN=x"}, []string{"train", "--from", "http://127.0.0.1:1", "--model", missing}, 1,
			"did you mean HONE_PROXY_CONTROL_TOKEN?"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, kv := range tc.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			code, out, errOut := runCLI(t, tc.args...)
			if code != tc.code || strings.Count(errOut, tc.want) != 1 {
				t.Fatalf("exit %d (want %d), stderr %q (want %q once)", code, tc.code, errOut, tc.want)
			}
			if tc.code == 1 && strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Errorf("error printed on more than one line: %q", errOut)
			}
			if out != "" {
				t.Errorf("stdout %q", out)
			}
		})
	}
}
