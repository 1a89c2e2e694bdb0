package config

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzLoad feeds Load a YAML file and a HONE_* environment: one variable
// chosen among the configuration keys (so the fuzzer reaches every key's
// value parser) plus free "K=V" lines. Load must not panic; it either fails
// with an error that names a key (or, for a file that is not YAML at all,
// the place of the syntax error), or gives a config whose Finish either
// accepts it or names a key. Loading twice gives the same result.
func FuzzLoad(f *testing.F) {
	keys := EnvKeys()
	keyIndex := func(name string) uint16 {
		for i, k := range keys {
			if k == name {
				return uint16(i)
			}
		}
		f.Fatalf("no key %s", name)
		return 0
	}
	type seed struct{ yaml, key, val, env string }
	seeds := []seed{
		{"", "HONE_LOG_LEVEL", "debug", ""},
		{"data: /from/file\nproxy:\n  listen: :7000\n  control_token: file-token\nselection:\n  sample_rate: 0.5\n",
			"HONE_PROXY_LISTEN", ":7001", "HONE_ENGINE_URLS=http://a:8000/v1,http://b:8000\nHONE_TRAINER_ENABLED=true\nUNRELATED=1"},
		{"listen_addr: :9000\n", "HONE_DATA", "/d", ""},
		{"proxy:\n  lisen: :9000\n", "HONE_PROXY_CLIENT_KEYS", "k1, k2", ""},
		{"proxy:\n  max_body_bytes: lots\n", "HONE_ENGINE_TIMEOUTS_IDLE", "7s", ""},
		{"engine:\n  timeouts:\n    idle: soon\n", "HONE_ENGINE_TIMEOUTS_IDLE", "5", ""},
		{"engine:\n  engines:\n    - url: http://localhost:8000\n      kind: vllm\n    - url: localhost:8001\n", "HONE_SELECTION_SAMPLE_RATE", "half", ""},
		{"proxy:\n  control_listen: 0.0.0.0:8081\n", "HONE_PROXY_CONTROL_TOKEN", "", "HONE_PROXY_LISTN=:9000"},
		{"trainer:\n  enabled: true\n  lora:\n    rank: 0\n", "HONE_TRAINER_SCHEDULE_LR", "0.001", "HONE_BENCH_LARGE=1"},
		{"runtime:\n  gc_percent: -2\n  memory_limit: 4GiB\n", "HONE_RUNTIME_MEMORY_LIMIT", "lots", ""},
		{"reward:\n  default: 0.5\nretention:\n  call_ttl: 1h\n", "HONE_TRAINER_LORA_SEED", "-1", "HONE_SEED=1"},
		{"log: {level: loud, format: json}\n", "HONE_LOG_FORMAT", "xml", ""},
		{"proxy:\n  client_keys: [a, b]\n", "HONE_PROXY_DATA_PLANE_FEEDBACK", "keys", ""},
		{"---\n- 1\n", "HONE_LOG_LEVEL", "", "HONE_=1\nHONE_LOG_LEVEL"},
		{"a: [\n", "HONE_LOG_LEVEL", "info", ""},
		{"proxy: &p\n  listen: :1\nengine: *p\n", "HONE_LOG_LEVEL", "info", ""},
	}
	if ex, err := os.ReadFile(filepath.Join("..", "config.example.yaml")); err == nil {
		seeds = append(seeds, seed{string(ex), "HONE_TRAINER_ENABLED", "true", ""})
	}
	for _, s := range seeds {
		f.Add([]byte(s.yaml), keyIndex(s.key), s.val, s.env)
	}
	paths := knownKeyPaths(f)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, file []byte, key uint16, val, extra string) {
		path := filepath.Join(dir, "hone.yaml")
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		env := append([]string{keys[int(key)%len(keys)] + "=" + val}, strings.Split(extra, "\n")...)
		c, err := Load(path, env)
		c2, err2 := Load(path, env)
		if errString(err) != errString(err2) || (err == nil && !sameValue(reflect.ValueOf(c), reflect.ValueOf(c2))) {
			t.Fatalf("loading twice differs:\n%v %+v\n%v %+v", err, c, err2, c2)
		}
		if err != nil {
			if !loadErrorNamesKey(err.Error(), file, env, paths) {
				t.Fatalf("load error names no key: %v", err)
			}
			return
		}
		if err := c.Finish(); err != nil && !finishErrorNamesKey(err.Error(), paths) {
			t.Fatalf("finish error names no key: %v", err)
		}
	})
}

// knownKeyPaths returns the dotted path of every YAML key of the defaults.
func knownKeyPaths(t testing.TB) []string {
	b, err := yaml.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	keyPaths(&n, "", set)
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	return out
}

var (
	yamlKeyRef = regexp.MustCompile(`line \d+ \(key ([A-Za-z0-9_.-]+|"([^"\\]|\\.)*")\): |unknown key \S`)
	yamlLine   = regexp.MustCompile(`line \d+`)
)

// loadErrorNamesKey: an environment error names the variable; a file that is
// YAML but does not fit the configuration names the key; a file that is not
// YAML at all names the place of the syntax error where yaml.v3 knows it.
func loadErrorNamesKey(msg string, file []byte, env []string, paths []string) bool {
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "HONE_") && strings.Contains(msg, k) {
			return true
		}
	}
	if !strings.HasPrefix(msg, "config ") { // not the file's: Finish-style errors of the overlay
		return finishErrorNamesKey(msg, paths)
	}
	if yamlKeyRef.MatchString(msg) || strings.Contains(msg, "into config.Config") { // the document is no mapping: no key to name
		return true
	}
	var any yaml.Node
	if yaml.Unmarshal(file, &any) != nil { // not YAML: a syntax error has no key to name
		return true
	}
	return yamlLine.MatchString(msg) && finishErrorNamesKey(msg, paths)
}

// finishErrorNamesKey: the message holds a dotted key path, or starts with
// a section ("trainer: ...").
func finishErrorNamesKey(msg string, paths []string) bool {
	for _, p := range paths {
		if strings.Contains(p, ".") && strings.Contains(msg, p) || strings.HasPrefix(msg, p+":") || strings.HasPrefix(msg, p+".") {
			return true
		}
	}
	return false
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// sameValue is reflect.DeepEqual with NaN equal to NaN (a YAML .nan loads
// the same way twice).
func sameValue(a, b reflect.Value) bool {
	if a.Kind() != b.Kind() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		return x == y || math.IsNaN(x) && math.IsNaN(y)
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameValue(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() || a.Kind() == reflect.Slice && a.IsNil() != b.IsNil() {
			return false
		}
		for i := 0; i < a.Len(); i++ {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() || a.IsNil() != b.IsNil() {
			return false
		}
		for _, k := range a.MapKeys() {
			if bv := b.MapIndex(k); !bv.IsValid() || !sameValue(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}
