package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/proxy"
	"github.com/prometheus/client_golang/prometheus"
)

// honeOwn are the data-plane routes hone answers itself.
var honeOwn = []string{"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages",
	"/v1/messages/count_tokens", "/v1/models"}

// TestNoEngineAdminThroughHone reads real vLLM's route list (its OpenAPI
// document, with runtime LoRA updating and dev mode on, so every
// administration route is there) and sends each route hone does not serve or
// forward by name through hone's data plane, in each trust configuration,
// with every method vLLM takes on it. Each must get hone's own 404, and
// afterwards vLLM must be untouched: awake, no adapter loaded by the
// attempts. The routes hone forwards must all be inference routes.
func TestNoEngineAdminThroughHone(t *testing.T) {
	v := needVLLM(t)
	routes := vllmRoutes(t, v.URL)
	for _, admin := range []string{"/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/sleep", "/wake_up",
		"/collective_rpc", "/reset_prefix_cache"} {
		if _, ok := routes[admin]; !ok {
			t.Fatalf("vLLM does not list %s: the check would be vacuous (routes %v)", admin, keys(routes))
		}
	}
	for _, inf := range proxy.DefaultInferenceRoutes() {
		if ms, ok := routes[inf]; ok && !slices.Contains(ms, "post") {
			t.Errorf("inference route %s is not a POST route of vLLM: %v", inf, ms)
		}
	}
	configs := map[string]func(*proxy.Options){
		"loopback, no keys": func(*proxy.Options) {},
		"client keys":       func(o *proxy.Options) { o.ClientKeys = []string{"sk-a"} },
		"keys, feedback on data plane, engine key": func(o *proxy.Options) {
			o.ClientKeys, o.DataPlaneFeedback, o.Upstream.APIKey = []string{"sk-a"}, proxy.FeedbackKeys, "engine-key"
		},
		"agents trust each other": func(o *proxy.Options) { o.AgentsTrustEachOther = true },
	}
	tried := 0
	for name, mutate := range configs {
		url := startHoneFor(t, v, mutate)
		for path, methods := range routes {
			if slices.Contains(honeOwn, path) || slices.Contains(proxy.DefaultInferenceRoutes(), path) {
				continue
			}
			for _, m := range methods {
				status, body := send(t, strings.ToUpper(m), url+fillTemplate(path),
					`{"lora_name":"evil","lora_path":"/tmp/evil","level":1,"method":"sleep"}`)
				if status != 404 || !strings.Contains(body, "proxy.inference_routes") {
					t.Errorf("%s: %s %s answered %d %s", name, m, path, status, body)
				}
				tried++
			}
		}
	}
	t.Logf("%d vLLM routes %v, %d attempts through hone, all 404 from hone", len(routes), keys(routes), tried)
	if status, body := send(t, "GET", v.URL+"/is_sleeping", ""); status != 200 || !strings.Contains(body, "false") {
		t.Fatalf("vLLM after the attempts: /is_sleeping %d %s", status, body)
	}
	if status, body := send(t, "GET", v.URL+"/v1/models", ""); status != 200 || strings.Contains(body, "evil") {
		t.Fatalf("vLLM after the attempts: /v1/models %d %s", status, body)
	}
}

// vllmRoutes maps vLLM's paths to their methods (lower case).
func vllmRoutes(t *testing.T, base string) map[string][]string {
	t.Helper()
	status, body := send(t, "GET", base+"/openapi.json", "")
	if status != 200 {
		t.Fatalf("vLLM /openapi.json: %d", status)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for p, ms := range doc.Paths {
		for m := range ms {
			out[p] = append(out[p], m)
		}
	}
	return out
}

func keys(m map[string][]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// fillTemplate puts a value into each {param} of an OpenAPI path.
func fillTemplate(p string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(p, '{')
		j := strings.IndexByte(p, '}')
		if i < 0 || j < i {
			return b.String() + p
		}
		b.WriteString(p[:i] + "x")
		p = p[j+1:]
	}
}

func send(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// startHoneFor is hone's data plane in front of v, configured by mutate.
func startHoneFor(t *testing.T, v *VLLM, mutate func(*proxy.Options)) string {
	t.Helper()
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: v.URL, Kind: "vllm"}}
	mutate(&o)
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := proxy.New(o, proxy.NewMemRecorder(), prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

// TestCacheSaltThroughHone: real vLLM takes the cache_salt hone gives each
// client key's calls (proxy.cache_salt: owner), with or without the agent's
// own, on chat and completions: the salt is within vLLM's limits. (This
// vLLM runs without prefix caching; the isolation itself is vLLM's, and is
// checked on hone's embedded engine by TestPrefixCacheSalted.)
func TestCacheSaltThroughHone(t *testing.T) {
	v := needVLLM(t)
	wantKeyedOK(t, v, [][2]string{
		{"/v1/chat/completions", `{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":"Hi"}]}`},
		{"/v1/chat/completions", `{"model":%q,"max_tokens":2,"cache_salt":"agent's own/@salt","messages":[{"role":"user","content":"Hi"}]}`},
		{"/v1/completions", `{"model":%q,"max_tokens":2,"prompt":"Hi"}`},
	})
}

// wantKeyedOK sends each call (a path and a body format taking the model
// name) through a hone with one client key in front of v, with that key,
// and wants every answer 200.
func wantKeyedOK(t *testing.T, v *VLLM, calls [][2]string) {
	t.Helper()
	url := startHoneFor(t, v, func(o *proxy.Options) { o.ClientKeys = []string{"sk-a"} })
	for _, c := range calls {
		req, err := http.NewRequest("POST", url+c[0], strings.NewReader(fmt.Sprintf(c[1], v.Model)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer sk-a")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s %s: vLLM through hone answered %d %s", c[0], c[1], resp.StatusCode, b)
		}
	}
}

// TestCacheSaltPoolingThroughHone: a vLLM serving the tiny model as an
// embedding model, with prefix caching on, takes the cache_salt hone adds to
// the forwarded pooling routes (an agent's own salt, which vLLM itself would
// refuse, hashed with the key's); tokenization passes unsalted. It starts a
// vLLM of its own (about a minute), so it runs in make test-long.
func TestCacheSaltPoolingThroughHone(t *testing.T) {
	if os.Getenv("HONE_TEST_LONG") == "" {
		t.Skip("starts its own vLLM (a minute): HONE_TEST_LONG=1 (make test-long) runs it")
	}
	needVLLM(t)
	py := needPython(t)
	tokDir, err := Qwen3TokenizerDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "qwen3-tiny")
	if err := WriteQwen3Folder(dir, tokDir, "tiny", 1); err != nil {
		t.Fatal(err)
	}
	v, err := StartVLLM(VLLMOptions{Python: py, ModelDir: dir, MaxModelLen: 512, LogDir: t.TempDir(),
		ExtraArgs: []string{"--convert", "embed", "--enable-prefix-caching"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Stop)
	wantKeyedOK(t, v, [][2]string{
		{"/v1/embeddings", `{"model":%q,"input":"Hi"}`},
		{"/v1/embeddings", `{"model":%q,"input":["Hi","there"],"cache_salt":"agent's own/@salt"}`},
		{"/pooling", `{"model":%q,"input":"Hi"}`},
		{"/tokenize", `{"model":%q,"prompt":"Hi"}`},
	})
}
