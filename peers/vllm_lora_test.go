package peers

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/trainer"
	"github.com/hone-rl/hone/trainer/checkpoint"
	"github.com/tidwall/gjson"
)

// modelDir is the folder vLLM serves (its /v1/models names it as root).
func modelDir(t *testing.T, v *VLLM) string {
	t.Helper()
	resp, err := http.Get(v.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Data []struct{ ID, Root string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Data {
		if d.ID == v.Model && d.Root != "" {
			return d.Root
		}
	}
	t.Fatalf("vLLM's /v1/models does not name the folder of %s: %+v", v.Model, m.Data)
	return ""
}

// servedModels lists the ids vLLM's /v1/models answers (base and adapters).
func servedModels(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct{ Data []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range m.Data {
		ids = append(ids, d.ID)
	}
	sort.Strings(ids)
	return ids
}

// memSource is a trainer.Source over experiences a test adds.
type memSource struct {
	mu    sync.Mutex
	exps  []capture.Experience
	acked uint64
}

func (s *memSource) Name() string { return "test" }

func (s *memSource) Fetch(_ context.Context, after uint64, limit int) ([]capture.Experience, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []capture.Experience
	for _, e := range s.exps {
		if e.Cursor > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *memSource) Ack(_ context.Context, upTo uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked = max(s.acked, upTo)
	return nil
}

// addBatch adds 4 sessions in 2 tasks (rewards 1 and 0 in each, so GRPO has
// a signal): the prompt followed by random completions, behaviour logprobs
// near the random model's (log 1/151669), collected under policy version.
func (s *memSource) addBatch(prompt []int32, version int64, seed uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i < 4; i++ {
		toks := append([]int32(nil), prompt...)
		for k := 0; k < 8; k++ {
			toks = append(toks, int32(rng.IntN(150000)))
		}
		e := capture.Experience{Task: fmt.Sprintf("task%d-%d", seed, i%2), Session: fmt.Sprintf("s%d-%d", seed, i),
			Tokens: toks, Reward: float64(i / 2 % 2), Mask: make([]uint8, len(toks)), Logprobs: make([]float32, len(toks)),
			Versions: make([]int64, len(toks)), Cursor: uint64(len(s.exps) + 1)}
		if i%2 == 1 {
			e.Reward = 1 - e.Reward
		}
		for k := len(prompt); k < len(toks); k++ {
			e.Mask[k], e.Logprobs[k], e.Versions[k] = 1, -11.93, version
		}
		e.Steps = []capture.StepSpan{{Call: e.Session, Start: len(prompt), End: len(toks)}}
		s.exps = append(s.exps, e)
	}
}

// newTrainer is hone's trainer on the folder vLLM serves: LoRA rank 8 on
// all seven projections, GRPO + PPO-clip, AdamW at 2e-2 (large, so one step
// moves the outputs measurably), versions written under a temp folder and
// published through pub (nil: written only). It also returns the
// checkpoint folder.
func newTrainer(t *testing.T, dir string, src *memSource, pub trainer.Publisher) (*trainer.Trainer, string) {
	t.Helper()
	opts := trainer.DefaultOptions()
	opts.Name, opts.CheckpointDir, opts.BatchSessions = "agent", t.TempDir(), 4
	opts.LoRA = trainer.LoRAOptions{Rank: 8, Alpha: 16, Seed: 1}
	opts.Schedule = trainer.ScheduleOptions{Kind: trainer.SchedConstant, LR: 2e-2}
	pol, err := trainer.LoadPolicy(dir, cpu.New(0), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pol.Free)
	tr, err := trainer.New(opts, trainer.Deps{Policy: pol, Sources: []trainer.Source{src}, Publisher: pub, BaseModel: dir})
	if err != nil {
		t.Fatal(err)
	}
	return tr, opts.CheckpointDir
}

// step adds a batch and runs one training step; it returns the version
// folder the trainer wrote.
func step(t *testing.T, tr *trainer.Trainer, src *memSource, prompt []int32, dir string) string {
	t.Helper()
	src.addBatch(prompt, tr.Version(), uint64(tr.Version()+1))
	start := time.Now()
	m, err := tr.Poll(context.Background())
	if err != nil || m == nil || m.Version != tr.Version() || m.Samples == 0 {
		t.Fatalf("training step: metrics %+v, err %v", m, err)
	}
	t.Logf("trainer step %d: v%d, loss %.4g, grad norm %.3g, %.1fs", m.Step, m.Version, m.Loss, m.GradNorm, time.Since(start).Seconds())
	return filepath.Join(dir, "agent", fmt.Sprintf("v%d", tr.Version()))
}

// promptIDs asks vLLM's /tokenize for the ids of a chat prompt.
func promptIDs(t *testing.T, url, messages string) []int32 {
	t.Helper()
	status, _, body, err := Post(context.Background(), url+"/tokenize", []byte(`{"model":"tiny","messages":`+messages+`,"add_generation_prompt":true}`), nil)
	if err != nil || status != 200 {
		t.Fatalf("/tokenize: %d %v %s", status, err, body)
	}
	var ids []int32
	for _, v := range gjson.GetBytes(body, "tokens").Array() {
		ids = append(ids, int32(v.Int()))
	}
	return ids
}

// loadLoRA loads an adapter folder into an engine (vLLM or the embedded
// one) under name.
func loadLoRA(t *testing.T, url, name, path string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"lora_name": name, "lora_path": path})
	status, _, body, err := Post(context.Background(), url+"/v1/load_lora_adapter", b, nil)
	if err != nil || status != 200 {
		t.Fatalf("load %s into %s: %d %v %s", name, url, status, err, body)
	}
}

// unloadLoRA unloads an adapter from an engine (errors are reported, not
// fatal: it runs in cleanups).
func unloadLoRA(t *testing.T, url, name string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"lora_name": name})
	status, _, body, err := Post(context.Background(), url+"/v1/unload_lora_adapter", b, nil)
	if err != nil || status != 200 {
		t.Errorf("unload %s from %s: %d %v %s", name, url, status, err, body)
	}
}

// perturbedCopy copies adapter folder src and adds delta to the first value
// of its first lora_B tensor: one weight changed.
func perturbedCopy(t *testing.T, src string, delta float32) string {
	t.Helper()
	dst := t.TempDir()
	for _, f := range []string{checkpoint.ConfigFile, checkpoint.WeightsFile} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == checkpoint.WeightsFile {
			n := binary.LittleEndian.Uint64(b[:8])
			var hdr map[string]json.RawMessage
			if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
				t.Fatal(err)
			}
			var names []string
			for k := range hdr {
				if strings.Contains(k, "lora_B") {
					names = append(names, k)
				}
			}
			sort.Strings(names)
			var info struct {
				Dtype   string `json:"dtype"`
				Offsets [2]int `json:"data_offsets"`
			}
			if len(names) == 0 || json.Unmarshal(hdr[names[0]], &info) != nil || info.Dtype != "F32" {
				t.Fatalf("no float32 lora_B tensor in %s", src)
			}
			off := 8 + int(n) + info.Offsets[0]
			v := math.Float32frombits(binary.LittleEndian.Uint32(b[off:])) + delta
			binary.LittleEndian.PutUint32(b[off:], math.Float32bits(v))
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}
