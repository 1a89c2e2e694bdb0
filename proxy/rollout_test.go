package proxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/hone-rl/hone/rollout"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// A rollout's candidate serves its share of sessions, each session keeps
// its version, and the control plane shows, pins, promotes and rolls back.
func TestRolloutRouting(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, func(o *Options) {
		o.Aliases = []AliasConfig{{Name: "agent", Target: "Qwen/Qwen3-0.6B", Version: 0}}
	}, stub)
	m, err := rollout.New(rollout.DefaultOptions(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.s.SetRollouts(m)
	if err := m.Begin("agent", rollout.Version{Version: 0, Target: "Qwen/Qwen3-0.6B"},
		rollout.Version{Version: 1, Target: "agent-v1"}); err != nil {
		t.Fatal(err)
	}
	call := func(session string) (policy, upstream string) {
		r := post(t, h.url, "/v1/chat/completions", []byte(`{"model":"agent","messages":[{"role":"user","content":"hi"}]}`),
			map[string]string{"X-Hone-Session": session})
		if r.status != 200 {
			t.Fatalf("%s: %d %s", session, r.status, r.body)
		}
		body, _ := stub.lastRequest()
		return r.header.Get("X-Hone-Policy"), gjson.GetBytes(body, "model").String()
	}
	onCand := 0
	for i := 0; i < 200; i++ {
		s := fmt.Sprint("sess-", i)
		p, up := call(s)
		if (p == "1") != (up == "agent-v1") || (p == "0") != (up == "Qwen/Qwen3-0.6B") {
			t.Fatalf("%s: policy %s but the engine was asked for %s", s, p, up)
		}
		if p2, _ := call(s); p2 != p {
			t.Fatalf("%s moved from v%s to v%s", s, p, p2)
		}
		if p == "1" {
			onCand++
		}
	}
	if onCand < 8 || onCand > 40 {
		t.Fatalf("%d of 200 sessions on the candidate at share 0.1", onCand)
	}
	// every call fed the guards: counted, with its latency and length
	r, _ := m.Running("agent")
	raw, err := os.ReadFile(fixture(t, "chat", "upstream.json"))
	if err != nil {
		t.Fatal(err)
	}
	usage := gjson.GetBytes(raw, "usage.completion_tokens").Float()
	for arm, want := range []int{400 - 2*onCand, 2 * onCand} {
		a := r.Arms[arm]
		if a.Calls != want || a.Errors != 0 || a.Latency.N != want || !(a.Latency.Mean > 0) || a.Length.Mean != usage {
			t.Fatalf("arm %d: %+v, want %d calls of %v completion tokens", arm, a, want, usage)
		}
	}
	ctl := httptest.NewServer(NewControl(h.s, "", h.reg))
	defer ctl.Close()
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, ctl.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := do("GET", "/admin/policies", ""); st != 200 || gjson.Get(b, "policies.0.rollout.candidate.version").Int() != 1 ||
		gjson.Get(b, "policies.0.rollout.share").Float() != 0.1 {
		t.Fatalf("policies %d %s", st, b)
	}
	if st, b := do("POST", "/admin/rollouts/agent", `{"action":"pin","share":1}`); st != 200 || !gjson.Get(b, "pinned").Bool() {
		t.Fatalf("pin %d %s", st, b)
	}
	if p, _ := call("after-pin"); p != "1" {
		t.Fatalf("a new session at share 1 served by v%s", p)
	}
	if st, b := do("POST", "/admin/rollouts/agent", `{"action":"promote"}`); st != 200 || gjson.Get(b, "decision").String() != "promoted" {
		t.Fatalf("promote %d %s", st, b)
	}
	if target, v, _ := h.s.Aliases().Get("agent"); target != "agent-v1" || v != 1 {
		t.Fatalf("after promotion the alias routes to %s v%d", target, v)
	}
	for i := 0; i < 20; i++ {
		if p, _ := call(fmt.Sprint("sess-", i)); p != "1" {
			t.Fatalf("after promotion a session is served by v%s", p)
		}
	}
	if st, _ := do("POST", "/admin/rollouts/agent", `{"action":"rollback"}`); st != 404 {
		t.Fatalf("rollback without a rollout: %d", st)
	}
	// a remote trainer begins the next rollout; the operator rolls it back
	if st, b := do("POST", "/admin/rollouts/agent", `{"action":"begin","target":"agent-v2","version":2}`); st != 200 {
		t.Fatalf("begin %d %s", st, b)
	}
	if st, b := do("POST", "/admin/rollouts/agent", `{"action":"rollback"}`); st != 200 || gjson.Get(b, "decision").String() != "rolled_back" {
		t.Fatalf("rollback %d %s", st, b)
	}
	for i := 0; i < 50; i++ {
		if p, _ := call(fmt.Sprint("late-", i)); p != "1" {
			t.Fatalf("after the rollback a session is served by v%s", p)
		}
	}
	if st, _ := do("POST", "/admin/rollouts/agent", `{"action":"explode"}`); st != 404 {
		t.Fatalf("an action without a rollout: %d", st)
	}
}

// An agent that calls a policy alias sees its own model name in the
// answer, whole or streamed, not the adapter hone sent the engine.
func TestAliasAnswerKeepsAgentsModelName(t *testing.T) {
	for _, stream := range []bool{false, true} {
		stub := newStub(t)
		name, file := "chat", "upstream.json"
		if stream {
			name, file = "chat_stream", "upstream.sse"
		}
		stub.answer = replay(t, fixture(t, name, file), 0)
		h := startHone(t, func(o *Options) { o.Aliases = []AliasConfig{{Name: "agent", Target: "agent-v3", Version: 3}} }, stub)
		body := fmt.Sprintf(`{"model":"agent","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream)
		r := post(t, h.url, "/v1/chat/completions", []byte(body), nil)
		if up, _ := stub.lastRequest(); r.status != 200 || gjson.GetBytes(up, "model").String() != "agent-v3" {
			t.Fatalf("stream %v: %d, engine asked for %s", stream, r.status, gjson.GetBytes(up, "model"))
		}
		n := 0
		for _, ev := range strings.Split(string(r.body), "\n") {
			js := strings.TrimPrefix(ev, "data: ")
			if !gjson.Valid(js) || !gjson.Get(js, "model").Exists() {
				continue
			}
			n++
			if m := gjson.Get(js, "model").String(); m != "agent" {
				t.Fatalf("stream %v: the answer names model %q", stream, m)
			}
		}
		if n == 0 {
			t.Fatalf("stream %v: no model field in %s", stream, r.body)
		}
	}
}

// An agent that names a trained version's adapter (agent-v3) directly, not
// the alias, is served that adapter, told and captured as version 3, and
// counted in flight against it (a publisher does not unload it under the
// call); no rollout moves it. The alias keeps serving the live version.
func TestPinnedVersionCall(t *testing.T) {
	stub := newStub(t)
	release, arrived := make(chan struct{}), make(chan struct{}, 4)
	fixed := replay(t, fixture(t, "chat", "upstream.json"), 0)
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		arrived <- struct{}{}
		<-release
		fixed(ctx)
	}
	h := startHone(t, func(o *Options) { o.Aliases = []AliasConfig{{Name: "agent", Target: "agent-v3", Version: 3}} }, stub)
	h.s.aliases.Swap("agent", "agent-v4", 4)
	done := make(chan *rawResponse, 1)
	go func() {
		done <- post(t, h.url, "/v1/chat/completions", []byte(`{"model":"agent-v3","messages":[{"role":"user","content":"hi"}]}`), nil)
	}()
	<-arrived
	if n := h.s.aliases.InFlight("agent", 3); n != 1 {
		t.Errorf("a call naming agent-v3: %d calls in flight on version 3, want 1", n)
	}
	close(release)
	r := <-done
	if up, _ := stub.lastRequest(); r.status != 200 || gjson.GetBytes(up, "model").String() != "agent-v3" {
		t.Fatalf("%d, engine asked for %s", r.status, gjson.GetBytes(up, "model"))
	}
	if v := r.header.Get("X-Hone-Policy"); v != "3" {
		t.Errorf("X-Hone-Policy %q, want 3", v)
	}
	calls := waitCalls(t, h.rec, 1)
	if c := calls[0]; c.Policy != "agent" || c.Version != 3 {
		t.Errorf("captured as policy %q version %d, want agent 3", c.Policy, c.Version)
	}
	if n := h.s.aliases.InFlight("agent", 3); n != 0 {
		t.Errorf("%d calls in flight on version 3 after the call", n)
	}
	r = post(t, h.url, "/v1/chat/completions", []byte(`{"model":"agent","messages":[{"role":"user","content":"hi"}]}`), nil)
	if up, _ := stub.lastRequest(); gjson.GetBytes(up, "model").String() != "agent-v4" || r.header.Get("X-Hone-Policy") != "4" {
		t.Errorf("the alias: engine asked for %s, policy %q; want agent-v4, 4", gjson.GetBytes(up, "model"), r.header.Get("X-Hone-Policy"))
	}
}

// A call naming a running rollout's candidate adapter directly is pinned to
// that version (told, captured, counted in flight), and /v1/models does not
// list the candidate.
func TestPinnedCandidateCall(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	stub.setModels(`{"object":"list","data":[{"id":"Qwen/Qwen3-0.6B","object":"model","parent":null},` +
		`{"id":"agent-v1","object":"model","parent":"Qwen/Qwen3-0.6B"}]}`)
	h := startHone(t, func(o *Options) { o.Aliases = []AliasConfig{{Name: "agent", Target: "Qwen/Qwen3-0.6B"}} }, stub)
	m, err := rollout.New(rollout.DefaultOptions(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.s.SetRollouts(m)
	if err := m.Begin("agent", rollout.Version{Version: 0, Target: "Qwen/Qwen3-0.6B"}, rollout.Version{Version: 1, Target: "agent-v1"}); err != nil {
		t.Fatal(err)
	}
	r := post(t, h.url, "/v1/chat/completions", []byte(`{"model":"agent-v1","messages":[{"role":"user","content":"hi"}]}`), nil)
	if up, _ := stub.lastRequest(); r.status != 200 || r.header.Get("X-Hone-Policy") != "1" || gjson.GetBytes(up, "model").String() != "agent-v1" {
		t.Fatalf("%d, policy %q, engine asked for %s", r.status, r.header.Get("X-Hone-Policy"), gjson.GetBytes(up, "model"))
	}
	if c := waitCalls(t, h.rec, 1)[0]; c.Policy != "agent" || c.Version != 1 {
		t.Errorf("captured as %q version %d, want agent 1", c.Policy, c.Version)
	}
	req, _ := http.NewRequest("GET", h.url+"/v1/models", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(b), `"agent-v1"`) {
		t.Errorf("/v1/models lists the candidate adapter: %s", b)
	}
}
