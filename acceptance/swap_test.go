package acceptance

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/proxy"
	"github.com/hone-rl/hone/trainer/publish"
	"github.com/prometheus/client_golang/prometheus"
)

// TestSwapUnderLoad publishes three adapter versions through the real
// publisher into the embedded engine while clients call hone without pause:
// no call fails, every X-Hone-Policy is a version that was live during the
// call, and each client sees versions only move forward.
func TestSwapUnderLoad(t *testing.T) {
	dir := tinyModel(t)
	engineURL := serveEngine(t, dir)
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: engineURL, Kind: "embedded"}}
	o.Aliases = []proxy.AliasConfig{{Name: "agent-model", Target: "tiny", Version: 0}}
	s, err := proxy.New(o, proxy.NewMemRecorder(), prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	base := "http://" + ln.Addr().String()

	adapters := writeAdapters(t, dir, 3)
	pub := &publish.Publisher{Engines: []publish.Engine{{URL: engineURL, Kind: "embedded"}}, Aliases: s.Aliases(),
		DrainTimeout: 30 * time.Second}

	var live atomic.Int64 // highest version made live so far
	var stop atomic.Bool
	var failures, calls atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(-1)
			for !stop.Load() {
				before := live.Load()
				v, err := call(base)
				after := live.Load()
				calls.Add(1)
				switch {
				case err != nil:
					failures.Add(1)
					t.Errorf("call failed during swaps: %v", err)
				case v < before || v > after+1:
					// the alias flips inside PublishAdapter, just before live is
					// raised: a call may see the next version a moment early
					t.Errorf("X-Hone-Policy %d outside the live window [%d, %d]", v, before, after+1)
				case v < last:
					t.Errorf("version went backwards: %d after %d", v, last)
				}
				last = max(last, v)
			}
		}()
	}
	for i, a := range adapters {
		waitCalls(t, &calls, calls.Load()+8) // calls in flight and served on the version before this one
		v := int64(i + 1)
		if err := pub.PublishAdapter(context.Background(), "agent-model", v, a); err != nil {
			t.Fatalf("publish v%d: %v", v, err)
		}
		live.Store(v)
	}
	waitCalls(t, &calls, calls.Load()+8)
	stop.Store(true)
	wg.Wait()
	pub.Wait()
	if _, v, _ := s.Aliases().Get("agent-model"); v != 3 || failures.Load() != 0 || calls.Load() < 10 {
		t.Fatalf("final version %d, %d failures in %d calls", v, failures.Load(), calls.Load())
	}
	t.Logf("%d calls, 0 failed, across 3 swaps", calls.Load())
}

// waitCalls waits until n calls were made (by count, not time, so a slow
// machine or the race detector still gets calls around every swap).
func waitCalls(t *testing.T, calls *atomic.Int64, n int64) {
	deadline := time.Now().Add(60 * time.Second)
	for calls.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d calls in a minute", calls.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// call sends one small chat call and returns the policy version that served it.
func call(base string) (int64, error) {
	body := `{"model":"agent-model","messages":[{"role":"user","content":"Hi"}],"max_tokens":4}`
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, &statusError{resp.StatusCode}
	}
	return strconv.ParseInt(resp.Header.Get("X-Hone-Policy"), 10, 64)
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + strconv.Itoa(e.code) }

// writeAdapters writes n random LoRA adapters (PEFT folders) for the model.
func writeAdapters(t *testing.T, dir string, n int) []string {
	m, err := model.Load(dir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := 0; i < n; i++ {
		a, err := model.NewAdapter(m, "v", model.AdapterConfig{Rank: 4, Alpha: 8}, int64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "v"+strconv.Itoa(i+1))
		if err := a.Save(p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}
