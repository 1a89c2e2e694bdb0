package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOtherEnvCoversTheRepo: every HONE_* variable the repository's own
// code, scripts and CI set or read (Go tests and the config package aside) is a configuration key or in OtherEnv, so
// hone started from a test, a script or CI (which exports them) never
// refuses to start over one of them.
func TestOtherEnvCoversTheRepo(t *testing.T) {
	name := regexp.MustCompile(`HONE_[A-Z0-9_]*[A-Z0-9]`)
	seen := map[string]string{}
	root := ".."
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", ".git", "testdata", "data":
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(p)
		if ext != ".go" && ext != ".mjs" && ext != ".sh" && d.Name() != "run" && d.Name() != "Makefile" {
			return nil
		}
		if filepath.Dir(p) == filepath.Join("..", "config") || strings.HasSuffix(p, "_test.go") {
			return nil // tests name wrong variables on purpose; this package names OtherEnv's patterns
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range name.FindAllString(string(b), -1) {
			seen[m] = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, k := range EnvKeys() {
		keys[k] = true
	}
	for v, where := range seen {
		if keys[v] || allowedOther(v) || strings.HasSuffix(v, "_") {
			continue
		}
		if err := checkEnv(map[string]string{v: "1"}); err != nil {
			t.Errorf("%s (used in %s) would stop hone: %v", v, where, err)
		}
	}
}

func allowedOther(v string) bool {
	for _, o := range OtherEnv {
		if o == v || (strings.HasSuffix(o, "*") && strings.HasPrefix(v, strings.TrimSuffix(o, "*"))) {
			return true
		}
	}
	return false
}
