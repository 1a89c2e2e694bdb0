package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/config"
	"github.com/hone-rl/hone/engine"
	"github.com/hone-rl/hone/kernels/backends"
	"github.com/hone-rl/hone/proxy"
	"github.com/hone-rl/hone/trainer/gpu"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

func init() {
	register("serve", "run the proxy (and the embedded engine when no --engine is given)", runServe)
}

// shippedModel is the SFT-prepared tiny model (make tiny-model), used by
// the embedded engine when no --model is given and it exists.
const shippedModel = "testdata/tiny-model"

func runServe(ctx context.Context, args []string) error {
	fs := newFlags("serve", "serve [flags]",
		"Runs the proxy: the OpenAI API for agents (data plane), capture, and the control plane (feedback,\n"+
			"experiences, admin, metrics). Without --engine it starts the embedded CPU engine; --train adds the\n"+
			"in-process trainer. Settings: defaults < --config FILE < HONE_* variables < flags (config.example.yaml).")
	sf := config.NewServeFlags(fs.FlagSet)
	if err := fs.parse(args); err != nil {
		return err
	}
	c, err := config.Load(sf.ConfigFile, os.Environ())
	if err != nil {
		return err
	}
	sf.Apply(&c)
	if err := c.Finish(); err != nil {
		return err
	}
	log := newLogger(c.Log)
	slog.SetDefault(log)
	gcPercent, memLimit, err := c.Runtime.Apply(os.Getenv)
	if err != nil {
		return err
	}
	log.Debug("go runtime", "gc_percent", gcPercent, "memory_limit_bytes", memLimit)
	if w := openControlWarning(&c); w != "" {
		log.Warn(w)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		gpu.Open().Collector()) // hone_gpu_*: NVML's GPU count, memory and utilisation (count 0 without a GPU)

	store, err := capture.Open(filepath.Join(c.Data, "capture"), c.Capture, reg)
	if err != nil {
		return fmt.Errorf("open trace store: %w", err)
	}
	defer closeLogged(log, "trace store", store.Close)
	if len(c.Proxy.Upstream.Engines) == 0 {
		emb, err := startEmbedded(ctx, &c, log)
		if err != nil {
			return err
		}
		defer emb.close()
	}
	addPolicyAlias(&c)
	continuityModel(&c)
	srv, err := proxy.New(c.Proxy, store, reg, log)
	if err != nil {
		return err
	}
	srv.SetConversations(store.Conversations(c.Proxy.Responses.TTL, c.Proxy.Responses.Max)) // Responses API conversations survive a restart
	go linkServedModel(ctx, &c, srv, log)
	feedback := chi.NewRouter()
	store.Routes(feedback)
	for _, p := range []string{"/feedback", "/commit", "/v1/feedback", "/v1/commit"} {
		srv.Mount(p, feedback)
	}
	mounts := []proxy.ControlRoutes{store.Routes}
	rm, err := startRollouts(ctx, &c, store, srv, reg, log)
	if err != nil {
		return err
	}
	tr, err := startTrainer(ctx, &c, store, srv, reg, log)
	if err != nil {
		return err
	}
	if tr != nil && rm != nil {
		tr.useRollouts(rm)
	}
	if tr != nil {
		defer tr.stop()
	}
	return serveUntilDone(ctx, &c, srv, proxy.NewControl(srv, c.Proxy.ControlToken, reg, mounts...), log)
}

// serveUntilDone runs both planes until ctx ends or one fails, then shuts
// down gracefully: in-flight calls (streams included) get ShutdownGrace.
func serveUntilDone(ctx context.Context, c *config.Config, srv *proxy.Server, ctl http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", c.Proxy.Listen)
	if err != nil {
		return fmt.Errorf("data plane: %w", err)
	}
	cln, err := net.Listen("tcp", c.Proxy.ControlListen)
	if err != nil {
		ln.Close()
		return fmt.Errorf("control plane: %w", err)
	}
	ctlSrv := newHTTPServer(ctl, 0)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	go func() { errc <- ctlSrv.Serve(cln) }()
	banner(ln.Addr().String(), cln.Addr().String(), c, aliasedNames(c, srv))
	select {
	case err = <-errc:
		err = fmt.Errorf("server stopped: %w", err)
	case <-ctx.Done():
		log.Info("shutting down", "grace", c.Proxy.ShutdownGrace)
	}
	sctx, cancel := context.WithTimeout(context.Background(), c.Proxy.ShutdownGrace)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Warn("data plane shutdown", "err", serr)
	}
	if serr := ctlSrv.Shutdown(sctx); serr != nil {
		log.Warn("control plane shutdown", "err", serr)
	}
	return err
}

// continuityModel points capture.continuity: tokens at the model folder
// when engine.tokenizer is not set: --model, or the embedded engine's.
func continuityModel(c *config.Config) {
	u := &c.Proxy.Upstream
	if u.Tokenizer == "" {
		u.Tokenizer = c.Model
	}
	if u.Tokenizer == "" {
		u.Tokenizer = c.Embedded.ModelDir
	}
}

// embedded is the in-process engine, served on a loopback port so the proxy
// reaches it exactly as it reaches vLLM.
type embedded struct {
	e   *engine.Engine
	srv *http.Server
	be  backends.Opened
}

func (m *embedded) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	m.e.Close()
	m.be.Close()
}

func startEmbedded(ctx context.Context, c *config.Config, log *slog.Logger) (*embedded, error) {
	dir, err := resolveModel(ctx, c)
	if err != nil {
		return nil, err
	}
	opts := c.Embedded
	opts.ModelDir, opts.Version = dir, version
	if opts.ServedModelName == "" {
		opts.ServedModelName = filepath.Base(dir)
	}
	be, err := openEngineBackend(ctx, opts.Backend, log)
	if err != nil {
		return nil, fmt.Errorf("embedded engine: %w", err)
	}
	if be.Name != backends.CPU {
		opts.Device = be.Backend // the CPU backend is the engine's own, with opts.Threads
	}
	if c.Proxy.Upstream.APIKey == "" {
		// Only hone may call the engine on its loopback port: another process
		// on the host could otherwise load adapters or sleep it.
		c.Proxy.Upstream.APIKey = randomKey()
	}
	opts.APIKey = c.Proxy.Upstream.APIKey
	e, err := engine.New(ctx, opts)
	if err != nil {
		be.Close()
		return nil, fmt.Errorf("embedded engine: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.Close()
		be.Close()
		return nil, fmt.Errorf("embedded engine: %w", err)
	}
	srv := newHTTPServer(e.Handler(), c.Proxy.MaxHeaderBytes) // takes every head hone forwards
	go srv.Serve(ln)                                          //nolint:errcheck // ends with Shutdown
	c.Proxy.Upstream.Engines = []proxy.EngineOptions{{URL: "http://" + ln.Addr().String(), Kind: "embedded"}}
	c.Embedded = opts
	log.Info("embedded engine", "model", dir, "served_model_name", e.ModelName(), "addr", ln.Addr().String())
	return &embedded{e: e, srv: srv, be: be}, nil
}

// randomKey is a fresh secret for the embedded engine.
func randomKey() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "hone-engine-" + hex.EncodeToString(b)
}

// resolveModel picks the embedded engine's model: --model, else the shipped
// prepared tiny model, else a random tiny model made once in the data folder.
func resolveModel(ctx context.Context, c *config.Config) (string, error) {
	if c.Model != "" {
		return c.Model, nil
	}
	if _, err := os.Stat(filepath.Join(shippedModel, "config.json")); err == nil {
		return shippedModel, nil
	}
	dir := filepath.Join(c.Data, "models", "tiny")
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
		return dir, nil
	}
	slog.Info("no model given: making a random tiny model", "dir", dir)
	if err := modelInit(ctx, []string{"--preset", "tiny", "--out", dir}); err != nil {
		return "", err
	}
	return dir, nil
}

func banner(data, control string, c *config.Config, policyNames []string) {
	host := data
	if strings.HasPrefix(host, ":") || strings.HasPrefix(host, "0.0.0.0:") || strings.HasPrefix(host, "[::]:") {
		host = "127.0.0.1" + host[strings.LastIndex(host, ":"):]
	}
	model := c.Embedded.ServedModelName
	if model == "" {
		model = "<your model>"
	}
	policy := ""
	if len(policyNames) > 0 {
		policy = fmt.Sprintf("  trained policy %q is served to agents that send model %s\n",
			c.Trainer.Name, strings.Join(policyNames, " or "))
	}
	fmt.Printf(`
hone is listening
  data plane (OpenAI API for agents): http://%s/v1
  control plane (feedback, experiences, admin, metrics): http://%s
%s
  export OPENAI_BASE_URL=http://%s/v1 OPENAI_API_KEY=dummy

  curl -s http://%s/v1/chat/completions -H 'Content-Type: application/json' \
    -H 'X-Hone-Session: first-%d' \
    -d '{"model":"%s","max_tokens":100,"messages":[{"role":"user","content":"Ann has 85 cups and gives away 23. How many cups are left?"}]}'
%s
`, host, control, policy, host, host, time.Now().Unix()%100000, model, tinyNote(c))
}

// tinyNote says what the shipped tiny model can answer, when it serves.
func tinyNote(c *config.Config) string {
	if d := c.Embedded.ModelDir; d == "" || filepath.Base(d) != "tiny-model" {
		return ""
	}
	return "  (the tiny demo model answers only one-line arithmetic problems like this one, with a calculator\n" +
		"   tool call; README.md, Five minutes, walks from rewarded calls to a trained policy)\n"
}

func newLogger(o config.LogOptions) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(o.Level))
	ho := &slog.HandlerOptions{Level: lvl}
	if o.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, ho))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, ho))
}

func closeLogged(log *slog.Logger, what string, fn func() error) {
	if err := fn(); err != nil && !errors.Is(err, context.Canceled) {
		log.Warn("close "+what, "err", err)
	}
}

// newHTTPServer is the net/http server of the control plane and of an
// engine: a client that sends its head slowly, or holds a connection idle
// (after a 401, say), is cut off, so that no one keeps sockets (file
// descriptors hone shares with the data plane and the store) open forever.
// No ReadTimeout: net/http keeps it as the read deadline of the whole
// exchange, and its expiry cancels the request's context, which would end
// a long experience read or an engine stream.
// maxHeader raises the head's bound above 64 KiB (0: 64 KiB).
func newHTTPServer(h http.Handler, maxHeader int) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: max(64<<10, maxHeader)}
}

// openControlWarning says when client keys separate agents on the data
// plane while the control plane, which reads and rewards every client's
// sessions, takes no token: any process on the host then reaches it.
func openControlWarning(c *config.Config) string {
	if len(c.Proxy.ClientKeys) == 0 || c.Proxy.ControlToken != "" {
		return ""
	}
	return "proxy.client_keys is set but proxy.control_token is not: any process on this host can read and reward " +
		"every client's sessions on the control plane (" + c.Proxy.ControlListen + "); set proxy.control_token"
}
