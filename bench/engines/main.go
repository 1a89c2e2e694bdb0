// Command engines measures decode tokens/s of hone's embedded engine beside
// vLLM's CPU build on the same model folder, in one run: both serve a
// Qwen3-architecture folder hone writes (random weights, Qwen3's real
// tokenizer), and the same greedy /v1/completions requests (ignore_eos, a
// fixed number of tokens) go to each, interleaved round by round, one at a
// time (batch 1) and concurrently (batch 8). vLLM comes from the peers'
// virtualenv (make peers).
//
//	go run ./bench/engines -presets tiny,small -tokens 128 -rounds 3
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hone-rl/hone/bench/internal/machine"
	"github.com/hone-rl/hone/engine"
	"github.com/hone-rl/hone/peers"
)

func main() {
	presets := flag.String("presets", "tiny,small", "model shapes (model.Preset names)")
	tokens := flag.Int("tokens", 128, "tokens generated per request")
	rounds := flag.Int("rounds", 3, "interleaved rounds")
	batch := flag.Int("batch", 8, "concurrent requests in the batched measurement")
	flag.Parse()
	if err := run(strings.Split(*presets, ","), *tokens, *rounds, *batch); err != nil {
		fmt.Fprintln(os.Stderr, "engines:", err)
		os.Exit(1)
	}
}

func run(presets []string, tokens, rounds, batch int) error {
	py, err := peers.Python()
	if err != nil {
		return err
	}
	tok, err := peers.Qwen3TokenizerDir()
	if err != nil {
		return err
	}
	fmt.Printf("| shape | engine | batch 1 tokens/s (median of %d) | batch %d tokens/s (median of %d) |\n|---|---|---|---|\n", rounds, batch, rounds)
	for _, p := range presets {
		if err := one(py, tok, p, tokens, rounds, batch); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// one measures a shape: both engines up, then the interleaved rounds.
func one(py, tok, preset string, tokens, rounds, batch int) error {
	dir, err := os.MkdirTemp("", "hone-engines-"+preset+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	model := filepath.Join(dir, "model")
	if err := peers.WriteQwen3Folder(model, tok, preset, 1); err != nil {
		return err
	}
	v, err := peers.StartVLLM(peers.VLLMOptions{Python: py, ModelDir: model, ServedName: "m", MaxModelLen: 1024, KVCacheGiB: 2})
	if err != nil {
		return err
	}
	defer v.Stop()
	ctx := context.Background()
	if err := v.Warm(ctx); err != nil {
		return err
	}
	eng, err := engine.New(ctx, engine.Options{ModelDir: model, ServedModelName: "m"})
	if err != nil {
		return err
	}
	defer eng.Close()
	srv := httptest.NewServer(eng.Handler())
	defer srv.Close()
	urls := map[string]string{"hone": srv.URL, "vLLM": v.URL}
	names := []string{"hone", "vLLM"}
	b1, bn := map[string][]float64{}, map[string][]float64{}
	for _, n := range names { // warm-up: one request each
		if _, err := measure(urls[n], tokens, 1); err != nil {
			return fmt.Errorf("%s warm-up: %w", n, err)
		}
	}
	for r := 0; r < rounds; r++ {
		for _, n := range names {
			x, err := measure(urls[n], tokens, 1)
			if err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			y, err := measure(urls[n], tokens, batch)
			if err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			b1[n], bn[n] = append(b1[n], x), append(bn[n], y)
		}
	}
	for _, n := range names {
		fmt.Printf("| %s | %s | %.1f (%s) | %.1f (%s) |\n", preset, n, machine.Median(b1[n]), list(b1[n]), machine.Median(bn[n]), list(bn[n]))
	}
	return nil
}

// measure sends k identical greedy requests at once and returns generated
// tokens per wall second.
func measure(url string, tokens, k int) (float64, error) {
	body, _ := json.Marshal(map[string]any{"model": "m", "prompt": "The quick brown fox", "max_tokens": tokens,
		"temperature": 0, "ignore_eos": true})
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, k)
	got := make([]int, k)
	for i := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = complete(url, body)
		}()
	}
	wg.Wait()
	total := 0
	for i := range k {
		if errs[i] != nil {
			return 0, errs[i]
		}
		total += got[i]
	}
	return float64(total) / time.Since(start).Seconds(), nil
}

// complete posts one /v1/completions request and returns the completion
// tokens its usage reports.
func complete(url string, body []byte) (int, error) {
	resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, raw)
	}
	var out struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return 0, fmt.Errorf("decode: %w", err)
	}
	return out.Usage.CompletionTokens, nil
}

func list(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(parts, ", ")
}
