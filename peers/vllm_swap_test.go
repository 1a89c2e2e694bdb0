package peers

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hone-rl/hone/proxy"
	"github.com/hone-rl/hone/trainer/publish"
	"github.com/prometheus/client_golang/prometheus"
)

// swapTol bounds |logprob difference| between a call served through hone
// under load and a direct call to vLLM naming the same adapter: vLLM batches
// the concurrent calls (mixing adapters), which moves float32 results in the
// last bits.
const swapTol = 1e-4

// recordingPublisher passes versions to the real publisher and keeps its
// errors (the trainer only logs a failed publish).
type recordingPublisher struct {
	*publish.Publisher
	mu   sync.Mutex
	errs []error
	done func(version int64) // called after each successful publish
}

func (r *recordingPublisher) PublishAdapter(ctx context.Context, alias string, version int64, dir string) error {
	err := r.Publisher.PublishAdapter(ctx, alias, version, dir)
	if err != nil {
		r.mu.Lock()
		r.errs = append(r.errs, fmt.Errorf("publish v%d: %w", version, err))
		r.mu.Unlock()
		return err
	}
	r.done(version)
	return nil
}

// served is one call made through hone during the swaps.
type served struct {
	client  int
	n       int // the client's n-th call
	version int64
	answer  answer
	err     error
}

// TestHotSwapIntoVLLM: hone's trainer takes three steps and its publisher
// loads each version into vLLM through /v1/load_lora_adapter, checks
// /v1/models, flips hone's alias and unloads the previous version once its
// calls drained, while three clients call hone without pause. Asserted:
// no call fails; each client's X-Hone-Policy only moves forward; every call
// served as version N got exactly the greedy tokens (and logprobs within
// swapTol) of a direct vLLM call naming adapter agent-vN (the base model for
// version 0), and each version's outputs differ from the base's and the
// previous version's; at the end vLLM lists only the base and agent-v3.
func TestHotSwapIntoVLLM(t *testing.T) {
	v := needVLLM(t)
	dir := modelDir(t, v)
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: v.URL, Kind: "vllm"}}
	o.Aliases = []proxy.AliasConfig{{Name: "agent", Target: v.Model, Version: 0}}
	s, err := proxy.New(o, proxy.NewMemRecorder(), prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	honeURL := "http://" + ln.Addr().String()

	const msgs = `[{"role":"user","content":"Name a colour."}]`
	body := `{"messages":` + msgs + `,"max_tokens":6,"temperature":0,"logprobs":true,"return_token_ids":true}`
	refs := map[int64]answer{0: ask(t, v.URL, v.Model, "/v1/chat/completions", body)}
	var refsMu sync.Mutex
	pub := &recordingPublisher{
		Publisher: &publish.Publisher{Engines: []publish.Engine{{URL: v.URL, Kind: "vllm"}}, Aliases: s.Aliases(), DrainTimeout: time.Minute},
		done: func(version int64) { // the adapter is loaded: vLLM's own answer under its name
			a := ask(t, v.URL, publish.AdapterName("agent", version), "/v1/chat/completions", body)
			refsMu.Lock()
			refs[version] = a
			refsMu.Unlock()
		},
	}
	src := &memSource{}
	tr, ckpt := newTrainer(t, dir, src, pub)

	var stop atomic.Bool
	var mu sync.Mutex
	var calls []served
	count := func(version int64) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, c := range calls {
			if c.version == version || version < 0 {
				n++
			}
		}
		return n
	}
	var wg sync.WaitGroup
	for c := 0; c < 3; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				r := served{client: c, n: n}
				status, hdr, got, err := Post(context.Background(), honeURL+"/v1/chat/completions", []byte(`{"model":"agent",`+body[1:]), nil)
				switch {
				case err != nil:
					r.err = err
				case status != 200:
					r.err = fmt.Errorf("status %d: %s", status, got)
				default:
					r.version, r.err = strconv.ParseInt(hdr.Get("X-Hone-Policy"), 10, 64)
					tk := vllmTokens(got, false)
					r.answer = answer{prompt: tk.prompt, ids: tk.ids[0], lps: tk.lps[0]}
				}
				mu.Lock()
				calls = append(calls, r)
				mu.Unlock()
			}
		}()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				stop.Store(true)
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	prompt := promptIDs(t, v.URL, msgs)
	for version := int64(1); version <= 3; version++ {
		waitFor(fmt.Sprintf("6 calls on v%d", version-1), func() bool { return count(version-1) >= 6 })
		step(t, tr, src, prompt, ckpt)
		if _, live, _ := s.Aliases().Get("agent"); live != version {
			t.Fatalf("after the trainer's step %d the alias serves v%d (publish errors: %v)", version, live, pub.errs)
		}
	}
	waitFor("6 calls on v3", func() bool { return count(3) >= 6 })
	stop.Store(true)
	wg.Wait()
	pub.Wait()

	if len(pub.errs) > 0 {
		t.Errorf("publisher errors: %v", pub.errs)
	}
	last := map[int]int64{}
	perVersion := map[int64]int{}
	failed := 0
	for _, c := range calls {
		if c.err != nil {
			failed++
			t.Errorf("client %d: call failed during the swaps: %v", c.client, c.err)
			continue
		}
		if c.version < last[c.client] {
			t.Errorf("client %d: X-Hone-Policy went back from %d to %d", c.client, last[c.client], c.version)
		}
		last[c.client] = max(last[c.client], c.version)
		perVersion[c.version]++
		ref, ok := refs[c.version]
		if !ok {
			t.Errorf("a call was served as v%d, which was never published", c.version)
			continue
		}
		worst, err := diff(c.answer, ref)
		if err != nil || worst > swapTol {
			like := "no version's"
			for k, r := range refs {
				if d, err := diff(c.answer, r); err == nil && d <= swapTol {
					like = fmt.Sprintf("v%d's", k)
				}
			}
			t.Errorf("client %d (call %d), served as v%d: the answer through hone is not adapter agent-v%d's but %s (max |logprob diff| %.3g, %v)",
				c.client, c.n, c.version, c.version, like, worst, err)
		}
	}
	t.Logf("%d calls through hone, %d failed; per version %v", len(calls), failed, perVersion)
	for version := int64(1); version <= 3; version++ {
		for _, earlier := range []int64{0, version - 1} {
			if d := distance(refs[version], refs[earlier]); d < 100*swapTol {
				t.Errorf("v%d's outputs are within %.3g of v%d's: the versions cannot be told apart", version, d, earlier)
			} else {
				t.Logf("v%d vs v%d: max |logprob diff| %.3g", version, earlier, d)
			}
		}
	}
	if got, want := servedModels(t, v.URL), []string{publish.AdapterName("agent", 3), v.Model}; !slices.Equal(got, want) {
		t.Errorf("vLLM serves %v after the swaps, want %v (old versions unloaded)", got, want)
	}
	unloadLoRA(t, v.URL, publish.AdapterName("agent", 3)) // the next test finds vLLM as it was
}

// distance is the largest logprob difference of two answers to the same
// prompt (infinite when their tokens differ).
func distance(a, b answer) float64 {
	if !slices.Equal(a.ids, b.ids) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range min(len(a.lps), len(b.lps)) {
		d = max(d, math.Abs(a.lps[i]-b.lps[i]))
	}
	return d
}
