package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hone-rl/hone/rollout"
)

// stubEngine behaves like vLLM or SGLang's adapter and weight endpoints.
type stubEngine struct {
	kind string
	mu   sync.Mutex
	lora map[string]string // name -> path
	log  []string          // "METHOD path body"
	// failLoad makes the load of this adapter name fail; hideModels makes
	// /v1/models omit adapters; failPath fails one path with a 500.
	failLoad, failPath string
	hideModels         bool
	wantToken          string
}

func newStub(t *testing.T, kind string) (*stubEngine, *httptest.Server) {
	s := &stubEngine{kind: kind, lora: map[string]string{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *stubEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	b, _ := json.Marshal(body)
	s.log = append(s.log, fmt.Sprintf("%s %s %s", r.Method, r.URL.RequestURI(), b))
	if s.wantToken != "" && r.Header.Get("Authorization") != "Bearer "+s.wantToken {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.URL.Path == s.failPath {
		http.Error(w, `{"error":"boom"}`, http.StatusInternalServerError)
		return
	}
	prefix := "/v1"
	if s.kind == KindSGLang {
		prefix = ""
	}
	name, _ := body["lora_name"].(string)
	switch r.URL.Path {
	case prefix + "/load_lora_adapter":
		s.load(w, name, body)
	case prefix + "/unload_lora_adapter":
		if _, ok := s.lora[name]; !ok {
			http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
			return
		}
		delete(s.lora, name)
		s.ok(w, "Success: LoRA adapter '"+name+"' removed successfully.")
	case "/v1/models":
		s.models(w)
	case "/update_weights_from_disk", "/sleep", "/wake_up", "/collective_rpc",
		"/release_memory_occupation", "/resume_memory_occupation":
		s.ok(w, "")
	default:
		http.NotFound(w, r)
	}
}

func (s *stubEngine) load(w http.ResponseWriter, name string, body map[string]any) {
	if name == s.failLoad {
		if s.kind == KindSGLang { // SGLang reports failure in a 200 JSON body
			_, _ = w.Write([]byte(`{"success":false,"error_message":"bad adapter"}`))
			return
		}
		http.Error(w, `{"error":"bad adapter"}`, http.StatusBadRequest)
		return
	}
	if _, dup := s.lora[name]; dup {
		http.Error(w, `{"error":"already loaded"}`, http.StatusBadRequest)
		return
	}
	s.lora[name], _ = body["lora_path"].(string)
	s.ok(w, "Success: LoRA adapter '"+name+"' added successfully.")
}

func (s *stubEngine) ok(w http.ResponseWriter, text string) {
	if s.kind == KindSGLang {
		_, _ = w.Write([]byte(`{"success":true,"message":"ok"}`))
		return
	}
	_, _ = w.Write([]byte(text))
}

func (s *stubEngine) models(w http.ResponseWriter) {
	data := []map[string]string{{"id": "base", "object": "model"}}
	if !s.hideModels {
		for n := range s.lora {
			data = append(data, map[string]string{"id": n, "object": "model", "parent": "base"})
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}

func (s *stubEngine) loaded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.lora {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (s *stubEngine) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// aliasTable is an in-memory Aliases with settable in-flight counts.
type aliasTable struct {
	mu       sync.Mutex
	target   map[string]string
	version  map[string]int64
	inflight map[int64]int
	swaps    []int64
}

func newAliases() *aliasTable {
	return &aliasTable{target: map[string]string{"agent": "base"}, version: map[string]int64{"agent": 0}, inflight: map[int64]int{}}
}

func (a *aliasTable) Get(alias string) (string, int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.target[alias]
	return t, a.version[alias], ok
}

func (a *aliasTable) Swap(alias, target string, v int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.target[alias], a.version[alias] = target, v
	a.swaps = append(a.swaps, v)
}

func (a *aliasTable) InFlight(_ string, v int64) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inflight[v]
}

func (a *aliasTable) setInFlight(v int64, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inflight[v] = n
}

func TestPublishAdapterSwapsAndRetires(t *testing.T) {
	vl, vsrv := newStub(t, KindVLLM)
	sg, ssrv := newStub(t, KindSGLang)
	al := newAliases()
	p := &Publisher{Engines: []Engine{{URL: vsrv.URL}, {URL: ssrv.URL, Kind: KindSGLang}}, Aliases: al, PollInterval: time.Millisecond}
	ctx := context.Background()
	if err := p.PublishAdapter(ctx, "agent", 1, "/ck/agent/v1"); err != nil {
		t.Fatal(err)
	}
	p.Wait() // the base model is not ours: nothing to retire
	for _, s := range []*stubEngine{vl, sg} {
		if got := s.loaded(); !slices.Equal(got, []string{"agent-v1"}) {
			t.Fatalf("%s loaded %v", s.kind, got)
		}
	}
	if target, v, _ := al.Get("agent"); target != "agent-v1" || v != 1 {
		t.Fatalf("alias -> %s v%d", target, v)
	}
	al.setInFlight(1, 2) // two calls still running on v1
	if err := p.PublishAdapter(ctx, "agent", 2, "/ck/agent/v2"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if got := vl.loaded(); !slices.Equal(got, []string{"agent-v1", "agent-v2"}) {
		t.Fatalf("v1 unloaded while its calls run: %v", got)
	}
	al.setInFlight(1, 0)
	p.Wait()
	for _, s := range []*stubEngine{vl, sg} {
		if got := s.loaded(); !slices.Equal(got, []string{"agent-v2"}) {
			t.Fatalf("%s after drain: %v", s.kind, got)
		}
	}
	if h := p.History("agent"); len(h) != 2 || h[1].Version != 2 || h[1].Path != "/ck/agent/v2" {
		t.Fatalf("history %+v", h)
	}
	if !slices.Contains(sg.calls(), `POST /load_lora_adapter {"lora_name":"agent-v2","lora_path":"/ck/agent/v2"}`) {
		t.Fatalf("sglang calls %v", sg.calls())
	}
	if !slices.Contains(vl.calls(), `POST /v1/load_lora_adapter {"lora_name":"agent-v2","lora_path":"/ck/agent/v2"}`) {
		t.Fatalf("vllm calls %v", vl.calls())
	}
}

func TestPublishAdapterRollsBack(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s *stubEngine)
		kind   string
	}{
		{"vllm load error", func(s *stubEngine) { s.failLoad = "agent-v1" }, KindVLLM},
		{"sglang success=false", func(s *stubEngine) { s.failLoad = "agent-v1" }, KindSGLang},
		{"not listed by /v1/models", func(s *stubEngine) { s.hideModels = true }, KindVLLM},
		{"models endpoint down", func(s *stubEngine) { s.failPath = "/v1/models" }, KindVLLM},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			good, gsrv := newStub(t, KindVLLM)
			bad, bsrv := newStub(t, tc.kind)
			tc.mutate(bad)
			al := newAliases()
			p := &Publisher{Engines: []Engine{{URL: gsrv.URL}, {URL: bsrv.URL, Kind: tc.kind}}, Aliases: al}
			err := p.PublishAdapter(context.Background(), "agent", 1, "/ck/v1")
			if err == nil || !strings.Contains(err.Error(), "rolled back") {
				t.Fatalf("err = %v", err)
			}
			if target, v, _ := al.Get("agent"); target != "base" || v != 0 || len(al.swaps) != 0 {
				t.Fatalf("alias moved to %s v%d", target, v)
			}
			if len(good.loaded()) != 0 || len(bad.loaded()) != 0 {
				t.Fatalf("left loaded: %v %v", good.loaded(), bad.loaded())
			}
		})
	}
}

func TestPublishAdapterRefusesOldVersion(t *testing.T) {
	_, srv := newStub(t, KindVLLM)
	al := newAliases()
	al.Swap("agent", "agent-v3", 3)
	p := &Publisher{Engines: []Engine{{URL: srv.URL}}, Aliases: al}
	if err := p.PublishAdapter(context.Background(), "agent", 3, "/x"); err == nil {
		t.Fatal("republishing the live version accepted")
	}
	if err := (&Publisher{Aliases: al}).PublishAdapter(context.Background(), "agent", 4, "/x"); err == nil {
		t.Fatal("no engines accepted")
	}
}

func TestDrainTimeoutUnloadsAnyway(t *testing.T) {
	s, srv := newStub(t, KindVLLM)
	al := newAliases()
	p := &Publisher{Engines: []Engine{{URL: srv.URL}}, Aliases: al, DrainTimeout: 20 * time.Millisecond, PollInterval: time.Millisecond}
	ctx := context.Background()
	_ = p.PublishAdapter(ctx, "agent", 1, "/v1")
	al.setInFlight(1, 1) // never drains
	if err := p.PublishAdapter(ctx, "agent", 2, "/v2"); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	if got := s.loaded(); !slices.Equal(got, []string{"agent-v2"}) {
		t.Fatalf("after timeout: %v", got)
	}
}

func TestPublishWeights(t *testing.T) {
	vl, vsrv := newStub(t, KindVLLM)
	sg, ssrv := newStub(t, KindSGLang)
	vl.wantToken, sg.wantToken = "k1", "k2"
	al := newAliases()
	p := &Publisher{Engines: []Engine{{URL: ssrv.URL, Kind: KindSGLang, APIKey: "k2"}, {URL: vsrv.URL, APIKey: "k1"}}, Aliases: al}
	if err := p.PublishWeights(context.Background(), "agent", "base", 1, "/ck/full/v1", ""); err != nil {
		t.Fatal(err)
	}
	if got := sg.calls(); !slices.Equal(got, []string{`POST /update_weights_from_disk {"model_path":"/ck/full/v1"}`}) {
		t.Fatalf("sglang calls %v", got)
	}
	want := []string{"POST /sleep?level=2 null", "POST /wake_up?tags=weights null",
		`POST /collective_rpc {"method":"reload_weights"}`, "POST /wake_up?tags=kv_cache null"}
	if got := vl.calls(); !slices.Equal(got, want) {
		t.Fatalf("vllm calls %v, want %v", got, want)
	}
	if target, v, _ := al.Get("agent"); target != "base" || v != 1 {
		t.Fatalf("alias -> %s v%d", target, v)
	}
	// a failing vLLM reload restores the SGLang engine to the previous weights.
	vl.failPath = "/collective_rpc"
	if err := p.PublishWeights(context.Background(), "agent", "base", 2, "/ck/full/v2", "/ck/full/v1"); err == nil {
		t.Fatal("failure not reported")
	}
	got := sg.calls()
	if last := got[len(got)-1]; last != `POST /update_weights_from_disk {"model_path":"/ck/full/v1"}` {
		t.Fatalf("sglang not restored: %v", got)
	}
	if _, v, _ := al.Get("agent"); v != 1 {
		t.Fatalf("alias moved to v%d after a failure", v)
	}
}

func TestSleepWake(t *testing.T) {
	vl, vsrv := newStub(t, KindVLLM)
	sg, ssrv := newStub(t, KindSGLang)
	p := &Publisher{Engines: []Engine{{URL: vsrv.URL}, {URL: ssrv.URL, Kind: KindSGLang}}, Aliases: newAliases()}
	ctx := context.Background()
	if err := p.Sleep(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	if got := vl.calls(); !slices.Equal(got, []string{"POST /sleep?level=1 null", "POST /wake_up null"}) {
		t.Fatalf("vllm %v", got)
	}
	if got := sg.calls(); !slices.Equal(got, []string{"POST /release_memory_occupation {}", "POST /resume_memory_occupation {}"}) {
		t.Fatalf("sglang %v", got)
	}
	sg.failPath = "/release_memory_occupation"
	if err := p.Sleep(ctx); err == nil {
		t.Fatal("sleep failure not reported")
	}
	if got := vl.calls(); got[len(got)-1] != "POST /wake_up null" {
		t.Fatalf("vllm not woken after a failed sleep: %v", got)
	}
}

// With rollouts a published adapter becomes the candidate; versions
// trained meanwhile wait, the newest is the next candidate after a
// promotion and is dropped after a rollback; decisions retire what they
// leave unused.
func TestPublishAdapterAsRolloutCandidate(t *testing.T) {
	vl, vsrv := newStub(t, KindVLLM)
	al := newAliases()
	m, err := rollout.New(rollout.DefaultOptions(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &Publisher{Engines: []Engine{{URL: vsrv.URL}}, Aliases: al, Rollouts: m, PollInterval: time.Millisecond}
	m.OnDecision(func(r rollout.Rollout) { // the proxy's part: the alias moves on a promotion
		if r.Decision == rollout.Promoted {
			al.Swap(r.Alias, r.Candidate.Target, r.Candidate.Version)
		}
	})
	m.OnDecision(p.Decided)
	ctx := context.Background()
	for v := int64(1); v <= 3; v++ {
		if err := p.PublishAdapter(ctx, "agent", v, fmt.Sprintf("/ck/agent/v%d", v)); err != nil {
			t.Fatal(err)
		}
	}
	r, ok := m.Running("agent")
	if !ok || r.Candidate.Version != 1 || r.Incumbent.Version != 0 || !slices.Equal(vl.loaded(), []string{"agent-v1"}) {
		t.Fatalf("rollout %+v, loaded %v", r, vl.loaded())
	}
	if _, v, _ := al.Get("agent"); v != 0 {
		t.Fatalf("the alias moved to v%d before a decision", v)
	}
	if _, err := m.Set("agent", "promote", 0); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	r, ok = m.Running("agent")
	if _, v, _ := al.Get("agent"); v != 1 || !ok || r.Candidate.Version != 3 || r.Incumbent.Version != 1 {
		t.Fatalf("after promotion: alias v%d, next rollout %+v", v, r)
	}
	if !slices.Equal(vl.loaded(), []string{"agent-v1", "agent-v3"}) {
		t.Fatalf("loaded %v", vl.loaded())
	}
	if err := p.PublishAdapter(ctx, "agent", 4, "/ck/agent/v4"); err != nil { // waits behind v3
		t.Fatal(err)
	}
	if _, err := m.Set("agent", "rollback", 0); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	if _, running := m.Running("agent"); running || !slices.Equal(vl.loaded(), []string{"agent-v1"}) {
		t.Fatalf("after rollback: running %v, loaded %v", running, vl.loaded())
	}
	if _, v, _ := al.Get("agent"); v != 1 {
		t.Fatalf("after rollback the alias is at v%d", v)
	}
}

// TestRestartedPublisherRetiresItsAdapters: a publisher started after a
// restart (it loaded nothing itself) retires the live adapter its
// predecessor loaded, named as hone names them, once a new version is
// live; the base model and adapters named otherwise stay loaded.
func TestRestartedPublisherRetiresItsAdapters(t *testing.T) {
	vl, vsrv := newStub(t, KindVLLM)
	al := newAliases()
	ctx := context.Background()
	before := &Publisher{Engines: []Engine{{URL: vsrv.URL}}, Aliases: al, PollInterval: time.Millisecond}
	if err := before.PublishAdapter(ctx, "agent", 3, "/ck/agent/v3"); err != nil {
		t.Fatal(err)
	}
	before.Wait()
	after := &Publisher{Engines: []Engine{{URL: vsrv.URL}}, Aliases: al, PollInterval: time.Millisecond}
	if err := after.PublishAdapter(ctx, "agent", 4, "/ck/agent/v4"); err != nil {
		t.Fatal(err)
	}
	after.Wait()
	if got := vl.loaded(); !slices.Equal(got, []string{"agent-v4"}) {
		t.Fatalf("after the restarted publisher's first version: %v loaded, want agent-v4 alone", got)
	}
	for _, tc := range []struct {
		name string
		want bool
	}{{"agent-v3", true}, {"agent-v0", true}, {"agent-v", false}, {"agent-v03", false}, {"agent-v-1", false},
		{"agent-vx", false}, {"other-v3", false}, {"tiny", false}, {"agent-v3-lora", false}} {
		if got := after.ownsAdapter("agent", tc.name); got != tc.want {
			t.Errorf("ownsAdapter(agent, %s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
