package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hone-rl/hone/engine"
	"github.com/hone-rl/hone/proxy"
)

func init() {
	register("engine", "run the embedded CPU inference engine (vLLM-compatible API)", runEngine)
}

func runEngine(ctx context.Context, args []string) error {
	opts := engine.DefaultOptions()
	fs := newFlags("engine", "engine --model DIR [flags]",
		"Serves a model folder with the embedded CPU inference engine: vLLM's OpenAI-compatible API\n"+
			"(/v1/chat/completions, /v1/completions, /v1/models, LoRA load/unload, sleep/wake).")
	fs.StringVar(&opts.ModelDir, "model", "", "model folder (config.json, model.safetensors, tokenizer files)")
	listen := fs.String("listen", "127.0.0.1:8000", "address to serve the API on")
	fs.StringVar(&opts.ServedModelName, "served-model-name", "", "model name clients use (default: --model)")
	fs.IntVar(&opts.MaxNumSeqs, "max-num-seqs", opts.MaxNumSeqs, "sequences decoded together")
	fs.IntVar(&opts.MaxNumBatchedTokens, "max-num-batched-tokens", opts.MaxNumBatchedTokens, "tokens per forward step (prompts are chunked to fit)")
	fs.IntVar(&opts.MaxModelLen, "max-model-len", 0, "context length cap (0: the model's)")
	fs.IntVar(&opts.Threads, "threads", 0, "CPU worker threads (0: all cores)")
	fs.IntVar(&opts.KVCacheMiB, "kv-cache-mib", opts.KVCacheMiB, "KV cache memory of running sequences (negative: unbounded)")
	fs.IntVar(&opts.PrefixCacheMiB, "prefix-cache-mib", opts.PrefixCacheMiB, "memory for prefix caching (0: off)")
	fs.StringVar(&opts.ReasoningParser, "reasoning-parser", opts.ReasoningParser, `reasoning parser: "qwen3" or "none"`)
	fs.StringVar(&opts.ReasoningField, "reasoning-field", opts.ReasoningField, "reasoning | reasoning_content | both")
	fs.StringVar(&opts.ToolCallParser, "tool-call-parser", opts.ToolCallParser, `tool call parser: "hermes" or "none"`)
	fs.StringVar(&opts.APIKey, "api-key", "",
		"key every request must send as \"Authorization: Bearer KEY\" (as vLLM's --api-key; env HONE_ENGINE_API_KEY); "+
			"hone sends it with engine.api_key")
	if err := fs.parse(args); err != nil {
		return err
	}
	if opts.ModelDir == "" {
		return usagef("--model is required (usage: hone %s)", fs.synopsis)
	}
	if opts.APIKey == "" { // read after parsing, so that --help never prints it
		opts.APIKey = os.Getenv("HONE_ENGINE_API_KEY")
	}
	if opts.APIKey == "" && !proxy.LoopbackAddr(*listen) {
		return usagef("--listen %s is not a loopback address and there is no --api-key: anyone who reaches it could "+
			"load adapters, put the engine to sleep and reload its weights; set --api-key (HONE_ENGINE_API_KEY) or "+
			"listen on 127.0.0.1", *listen)
	}
	opts.Version = version
	e, err := engine.New(ctx, opts)
	if err != nil {
		return err
	}
	defer e.Close()
	h := e.Handler()
	if opts.APIKey == "" { // on loopback: no web page in a browser on the machine may drive it
		h = proxy.SameSiteOnly(h)
	}
	srv := newHTTPServer(h, 0)
	srv.Addr = *listen
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	slog.Info("engine listening", "addr", *listen, "model", e.ModelName())
	select {
	case err := <-errc:
		return fmt.Errorf("engine server: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
