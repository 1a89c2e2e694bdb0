package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// applyEnv sets every scalar key from its HONE_* variable: the YAML path
// upper-cased and joined by "_" (proxy.control_token → HONE_PROXY_CONTROL_TOKEN,
// selection.sample_rate → HONE_SELECTION_SAMPLE_RATE). Lists of strings are
// comma-separated (HONE_ENGINE_URLS is special: a comma-separated list of
// engine URLs).
//
// A HONE_* variable that is neither a key nor in OtherEnv stops hone, as an
// unknown YAML key does, so a misspelt variable is not silently ignored.
func applyEnv(c *Config, env []string) error {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "HONE_") {
			vars[k] = v
		}
	}
	if err := checkEnv(vars); err != nil {
		return err
	}
	if v, ok := vars["HONE_ENGINE_URLS"]; ok {
		c.Engine.Engines = nil
		for _, u := range strings.Split(v, ",") {
			if u = strings.TrimSpace(u); u != "" {
				c.Engine.Engines = append(c.Engine.Engines, engineURL(u))
			}
		}
	}
	return walk(reflect.ValueOf(c).Elem(), "HONE", "", func(name, path string, fv reflect.Value) error {
		s, ok := vars[name]
		if !ok {
			return nil
		}
		if err := setScalar(fv, s); err != nil {
			if fv.Type() == durationType {
				return fmt.Errorf("%s: %s=%q is not a duration: write it with a unit, e.g. %ss, 500ms or 2m", path, name, s, s)
			}
			return fmt.Errorf("%s: %s=%q: %w", path, name, s, err)
		}
		c.src.set(path, name)
		return nil
	})
}

// OtherEnv lists the HONE_* variables that are not configuration keys but
// may be set where hone runs; a name ending in "*" is a prefix. The tests and
// benchmarks read some, the example and acceptance scripts others:
//
//	HONE_ENGINE_URLS                       engine.engines as url1,url2 (read by hone)
//	HONE_REQUIRE_*                         tests fail instead of skipping without a reference (PARITY: python3-torch,
//	                                       NODE: node and the npm packages, PEERS: the peers' virtualenv)
//	HONE_PEERS_*                           the peers' virtualenv (DIR, PYTHON, BASE_PYTHON; scripts/peers, peers/)
//	HONE_SOAK_*                            the soak test's knobs (bench/soak)
//	HONE_SESSION, HONE_TASK, HONE_REWARD   what the example agents send as hone's headers (examples/*.mjs)
//	HONE_UPDATE_GOLDEN                     tests rewrite their golden files
//	HONE_CRASH_ROUNDS                      rounds of the crash-recovery test (make crash-test)
//	HONE_TEST_LONG                         the long variants of tests (make test-long: every CUDA mutant)
//	HONE_BENCH_*                           benchmark knobs (bench/, *_bench_test.go)
//	HONE_EXPECT, HONE_MAX_TOKENS           acceptance/*.mjs and examples/*.mjs
//	HONE_KERNELS                           forces a kernels/cpu variant (generic, avx2)
//	HONE_CUDA_*                            the CUDA toolkit from PyPI's wheels (HOME: its root, DIR: its cache;
//	                                       scripts/cuda, kernels/cuda); HONE_REQUIRE_CUDA makes its absence fail
var OtherEnv = []string{
	"HONE_ENGINE_URLS",
	"HONE_REQUIRE_*",
	"HONE_PEERS_*",
	"HONE_SOAK_*",
	"HONE_SESSION", "HONE_TASK", "HONE_REWARD",
	"HONE_UPDATE_GOLDEN",
	"HONE_CRASH_ROUNDS",
	"HONE_TEST_LONG",
	"HONE_BENCH_*",
	"HONE_EXPECT", "HONE_MAX_TOKENS",
	"HONE_KERNELS",
	"HONE_CUDA_*",
}

// EnvKeys returns the HONE_* variable of every configuration key, sorted.
func EnvKeys() []string {
	c := Default()
	var names []string
	_ = walk(reflect.ValueOf(&c).Elem(), "HONE", "", func(name, _ string, _ reflect.Value) error {
		names = append(names, name)
		return nil
	})
	sort.Strings(names)
	return names
}

// CheckEnv refuses HONE_* variables of env ("K=V" pairs) that are neither
// configuration keys nor in OtherEnv, suggesting the nearest key.
func CheckEnv(env []string) error {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "HONE_") {
			vars[k] = v
		}
	}
	return checkEnv(vars)
}

func checkEnv(vars map[string]string) error {
	if len(vars) == 0 {
		return nil
	}
	keys := EnvKeys()
	known := make(map[string]bool, len(keys))
	for _, k := range keys {
		known[k] = true
	}
	var bad []string
	for name := range vars {
		if !known[name] && !otherEnv(name) {
			bad = append(bad, name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	msgs := make([]string, len(bad))
	for i, name := range bad {
		msgs[i] = "unknown environment variable " + name
		if s := suggestEnv(name, keys); s != "" {
			msgs[i] += " (did you mean " + s + "?)"
		}
	}
	return fmt.Errorf("%s: HONE_* variables set configuration keys (the key path upper-cased, "+
		"e.g. HONE_PROXY_CONTROL_TOKEN for proxy.control_token; see config.example.yaml); unset it or fix the name",
		strings.Join(msgs, "; "))
}

func otherEnv(name string) bool {
	for _, o := range OtherEnv {
		if p, ok := strings.CutSuffix(o, "*"); ok && strings.HasPrefix(name, p) || o == name {
			return true
		}
	}
	return false
}

// suggestEnv names the key nearest to an unknown variable: the closest by
// edit distance when it is close (a typo), else the keys ending in the same
// words, shortest first (a section left out: HONE_LISTEN → HONE_PROXY_LISTEN
// or HONE_PROXY_CONTROL_LISTEN).
func suggestEnv(name string, keys []string) string {
	best, bestD := "", -1
	for _, k := range keys {
		if d := editDistance(name, k); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	rest := strings.TrimPrefix(name, "HONE_")
	if bestD >= 0 && bestD <= max(2, len(rest)/4) {
		return best
	}
	var tail []string // keys ending in _REST, shortest first
	for _, k := range keys {
		if strings.HasSuffix(k, "_"+rest) {
			tail = append(tail, k)
		}
	}
	sort.SliceStable(tail, func(i, j int) bool { return len(tail[i]) < len(tail[j]) })
	switch {
	case len(tail) == 1:
		return tail[0]
	case len(tail) > 1 && len(tail) <= 3:
		return strings.Join(tail[:len(tail)-1], ", ") + " or " + tail[len(tail)-1]
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var durationType = reflect.TypeOf(time.Duration(0))

// walk calls fn with the HONE_* name, the YAML path and the value of every
// non-struct field under v (structs are walked into; an inline struct adds
// no name).
func walk(v reflect.Value, prefix, path string, fn func(name, path string, fv reflect.Value) error) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")
		if tag[0] == "-" || !f.IsExported() {
			continue
		}
		name, p := prefix, path
		if tag[0] != "" {
			name, p = prefix+"_"+strings.ToUpper(tag[0]), strings.TrimPrefix(path+"."+tag[0], ".")
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct {
			if err := walk(fv, name, p, fn); err != nil {
				return err
			}
			continue
		}
		if err := fn(name, p, fv); err != nil {
			return err
		}
	}
	return nil
}

func setScalar(v reflect.Value, s string) error {
	if v.Type() == durationType {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return err
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		v.SetFloat(f)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if err := setScalar(p.Elem(), s); err != nil {
			return err
		}
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("set this key in the config file")
		}
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		v.Set(reflect.ValueOf(parts))
	default:
		return fmt.Errorf("set this key in the config file")
	}
	return nil
}
