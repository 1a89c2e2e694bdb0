package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/config"
	"github.com/hone-rl/hone/proxy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// Every server of the benchmark runs in its own process, as it would in a
// deployment (agent, hone and engine are separate programs): the parent
// re-executes its own binary with -role, reads the listen URL from the
// child's first stdout line, and stops it with SIGTERM at the end (each
// server in its own process group, sent SIGTERM by the kernel if the harness
// dies first; SIGINT or SIGTERM to the harness stops them all). So one
// server's garbage collector or scheduler never pauses another's, nor the
// load generator's clock.

// child is a server process started by spawn.
type child struct {
	cmd     *exec.Cmd
	url     string
	metrics string // hone's Prometheus metrics, "" for other roles
	dir     string // data folder to remove after a hone serve child
	stopFn  func() // in-process servers
	group   bool   // CPU and stop cover the process group (nginx's workers)
	waited  chan struct{}
	once    sync.Once
}

// pid is the child's process id (this process's for in-process servers).
func (c *child) pid() int {
	if c.cmd == nil {
		return os.Getpid()
	}
	return c.cmd.Process.Pid
}

// cpu is the CPU time the child has used so far: its process
// group's live processes for nginx, its process otherwise.
func (c *child) cpu() time.Duration {
	if c.group {
		return groupCPU(c.pid())
	}
	return procCPU(c.pid())
}

// live are the children started so far, for stopAll.
var live struct {
	sync.Mutex
	children []*child
}

func track(c *child) {
	live.Lock()
	live.children = append(live.children, c)
	live.Unlock()
}

// stopAll stops every child, the last started first.
func stopAll() {
	live.Lock()
	cs := append([]*child(nil), live.children...)
	live.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i].stop()
	}
}

// stopOnSignal stops the children and exits when the harness is
// interrupted (the children, in their own process groups, do not see a
// terminal's Ctrl-C).
func stopOnSignal() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "bench/proxy: %v: stopping the servers\n", s)
		stopAll()
		os.Exit(130)
	}()
}

// spawn starts this binary in role, passing args, and waits for its URL
// (with -inprocess: starts role here).
func spawn(role string, args ...string) *child {
	if *inprocess {
		upstream := ""
		if len(args) >= 2 && args[0] == "-upstream" {
			upstream = args[1]
		}
		c := local(role, upstream)
		track(c)
		return c
	}
	argv := append([]string{os.Args[0], "-role", role}, args...)
	if cpus := os.Getenv("HONE_BENCH_PROXY_CPUS"); cpus != "" && role != "stub" {
		argv = append([]string{"taskset", "-c", cpus}, argv...) // the proxy on its own cores
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = childAttr()
	out, err := cmd.StdoutPipe()
	must(err)
	must(cmd.Start())
	c := &child{cmd: cmd}
	track(c)
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) == 0 {
		fatalf("role %s: no URL: %v", role, err)
	}
	c.url = f[0]
	if len(f) > 1 {
		c.metrics = f[1]
	}
	return c
}

// spawnServe starts the shipped binary, `hone serve`, in front of upstream
// with a fresh data folder and its defaults, and waits until it answers.
func spawnServe(bin, upstream string) *child {
	dir, err := os.MkdirTemp("", "hone-bench-serve-")
	must(err)
	data, control := freeAddr(), freeAddr()
	argv := []string{bin, "serve", "--engine", upstream, "--listen", data, "--control-listen", control, "--data", dir}
	if cpus := os.Getenv("HONE_BENCH_PROXY_CPUS"); cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "HONE_LOG_LEVEL=warn")
	if *clientKey != "" {
		cmd.Env = append(cmd.Env, "HONE_PROXY_CLIENT_KEYS="+*clientKey)
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = childAttr()
	must(cmd.Start())
	c := &child{cmd: cmd, url: "http://" + data, metrics: "http://" + control + "/metrics", dir: dir}
	track(c)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + control + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return c
			}
		}
		if time.Now().After(deadline) {
			fatalf("hone serve did not become ready")
		}
	}
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer ln.Close()
	return ln.Addr().String()
}

// stop asks the child to shut down (SIGTERM: nginx's master then stops its
// workers), waits for it, and removes its folder; it runs once.
func (c *child) stop() { c.once.Do(c.doStop) }

func (c *child) doStop() {
	if c.cmd == nil {
		if c.stopFn != nil {
			c.stopFn()
		}
		return
	}
	if c.cmd.Process == nil { // never started
		return
	}
	if c.waited == nil {
		c.waited = make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(c.waited) }()
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.waited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.waited
	}
	if c.group { // workers left behind by a master that did not stop them
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// runRole serves role until SIGTERM.
func runRole(role string, upstream string) {
	if strings.HasPrefix(role, "hone") {
		_, _, err := config.DefaultRuntime().Apply(os.Getenv) // as hone serve does
		must(err)
		if n, err := strconv.Atoi(os.Getenv("HONE_BENCH_HONE_GOGC")); err == nil {
			debug.SetGCPercent(n)
		}
	}
	stubReplyBody = replyBody(*replyTokens)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	stopProfile := startProfiles()
	shutdown, metrics := serveRole(role, ln, upstream)
	fmt.Println("http://"+ln.Addr().String(), metrics)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	shutdown()
	stopProfile()
}

// serveRole starts role's server on ln and returns its shutdown and, for
// hone, the URL of its Prometheus metrics.
func serveRole(role string, ln net.Listener, upstream string) (shutdown func(), metrics string) {
	switch role {
	case "stub":
		srv := &fasthttp.Server{Handler: stubHandler}
		go srv.Serve(ln) //nolint:errcheck
		shutdown = func() { _ = srv.Shutdown() }
	case "httputil":
		shutdown = serveHTTPUtil(ln, upstream)
	case "relay":
		shutdown = serveRelay(ln, upstream)
	case "fasthttp":
		shutdown = serveFastHTTP(ln, upstream)
	case "hone":
		shutdown, metrics = serveHone(ln, upstream, false)
	case "hone-capture":
		shutdown, metrics = serveHone(ln, upstream, true)
	default:
		panic("unknown role " + role)
	}
	return shutdown, metrics
}

// local starts role in this process (-inprocess): the layout of the first
// measurements, where one Go runtime schedules load generator, stub and
// proxy together.
func local(role, upstream string) *child {
	stubReplyBody = replyBody(*replyTokens)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	stop, metrics := serveRole(role, ln, upstream)
	return &child{url: "http://" + ln.Addr().String(), metrics: metrics, stopFn: stop}
}

// startProfiles writes a CPU profile, an allocation profile and an
// execution trace of this process when HONE_BENCH_CPUPROFILE,
// HONE_BENCH_MEMPROFILE and HONE_BENCH_TRACE name files (the role is
// appended to the name).
func startProfiles() func() {
	var stops []func()
	if p := os.Getenv("HONE_BENCH_CPUPROFILE"); p != "" {
		f, err := os.Create(p + "." + *role)
		must(err)
		must(pprof.StartCPUProfile(f))
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if p := os.Getenv("HONE_BENCH_MEMPROFILE"); p != "" {
		stops = append(stops, func() {
			f, err := os.Create(p + "." + *role)
			must(err)
			must(pprof.Lookup("allocs").WriteTo(f, 0))
			f.Close()
		})
	}
	if p := os.Getenv("HONE_BENCH_TRACE"); p != "" {
		f, err := os.Create(p + "." + *role)
		must(err)
		must(trace.Start(f))
		stops = append(stops, func() { trace.Stop(); f.Close() })
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

// ---- stub engine ----

const chatBody = `{"id":"chatcmpl-bench","object":"chat.completion","created":1763780000,"model":"Qwen/Qwen3-0.6B","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help?","refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[],"reasoning_content":null},"logprobs":{"content":[{"token":"Hello","logprob":-0.011,"bytes":[72,101,108,108,111],"top_logprobs":[]},{"token":"!","logprob":-0.022,"bytes":[33],"top_logprobs":[]},{"token":" How","logprob":-0.033,"bytes":[32,72,111,119],"top_logprobs":[]},{"token":" can","logprob":-0.044,"bytes":[32,99,97,110],"top_logprobs":[]},{"token":" I","logprob":-0.055,"bytes":[32,73],"top_logprobs":[]},{"token":" help","logprob":-0.066,"bytes":[32,104,101,108,112],"top_logprobs":[]},{"token":"?","logprob":-0.077,"bytes":[63],"top_logprobs":[]}]},"finish_reason":"stop","stop_reason":null,"token_ids":[2000,2007,2014,2021,2028,2035,2042]}],"service_tier":null,"system_fingerprint":null,"usage":{"prompt_tokens":10,"total_tokens":17,"completion_tokens":7,"prompt_tokens_details":null},"prompt_logprobs":null,"prompt_token_ids":[151644,872,198,9707,0,151645,198,151644,77091,198],"kv_transfer_params":null}`

// stubReplyBody is the stub's chat reply: chatBody, or with -reply-tokens
// other than 7, the same reply with that many completion tokens (content,
// logprobs and token ids), set by runRole.
var stubReplyBody = chatBody

// replyBody is a vLLM chat reply like chatBody with n completion tokens, the
// seven of chatBody repeated ("Hello! How can I help?Hello! ...").
func replyBody(n int) string {
	if n == 7 {
		return chatBody
	}
	return buildReply(n)
}

// buildReply writes replyBody's reply (buildReply(7) is chatBody).
func buildReply(n int) string {
	toks := []string{"Hello", "!", " How", " can", " I", " help", "?"}
	var content, lps, ids strings.Builder
	for i := 0; i < n; i++ {
		tok := toks[i%len(toks)]
		content.WriteString(tok)
		if i > 0 {
			lps.WriteByte(',')
			ids.WriteByte(',')
		}
		bs := make([]string, len(tok))
		for j := range len(tok) {
			bs[j] = strconv.Itoa(int(tok[j]))
		}
		fmt.Fprintf(&lps, `{"token":%q,"logprob":-0.0%02d,"bytes":[%s],"top_logprobs":[]}`, tok, 11*(i%7+1), strings.Join(bs, ","))
		fmt.Fprintf(&ids, "%d", 2000+7*(i%7))
	}
	return `{"id":"chatcmpl-bench","object":"chat.completion","created":1763780000,"model":"Qwen/Qwen3-0.6B","choices":[{"index":0,"message":{"role":"assistant","content":` +
		strconv.Quote(content.String()) + `,"refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[],"reasoning_content":null},"logprobs":{"content":[` +
		lps.String() + `]},"finish_reason":"stop","stop_reason":null,"token_ids":[` + ids.String() +
		fmt.Sprintf(`]}],"service_tier":null,"system_fingerprint":null,"usage":{"prompt_tokens":10,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":null},`, 10+n, n) +
		`"prompt_logprobs":null,"prompt_token_ids":[151644,872,198,9707,0,151645,198,151644,77091,198],"kv_transfer_params":null}`
}

// stubHandler replays a vLLM chat response, or an SSE stream of -events
// chunks 2 ms apart whose "created" field is the send time (unix µs), the
// first with the prompt's token ids as vLLM sends them.
func stubHandler(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/health":
		return
	case "/tokenize": // vLLM's, for a capture that asks (calls without prompt ids)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"count":10,"max_model_len":40960,"tokens":[151644,872,198,9707,0,151645,198,151644,77091,198],"token_strs":null}`)
		return
	case "/v1/models":
		ctx.SetBodyString(`{"object":"list","data":[{"id":"Qwen/Qwen3-0.6B","object":"model"}]}`)
		return
	}
	if !gjson.GetBytes(ctx.PostBody(), "stream").Bool() {
		ctx.SetContentType("application/json")
		body := stubReplyBody
		if *promptIDs == "echo" {
			body = echoReply(len(ctx.PostBody()) / 4)
		}
		setReply(&ctx.Response, body, ctx.Request.Header.Peek("X-Request-Id"))
		return
	}
	ctx.SetContentType("text/event-stream")
	n := *events
	id := string(responseID(nil, ctx.Request.Header.Peek("X-Request-Id")))
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		for i := 0; i < n; i++ {
			promptIDs := ""
			if i == 0 { // as vLLM sends them with return_token_ids (proxy/testdata's streams)
				promptIDs = `,"prompt_token_ids":[151644,872,198,9707,0,151645,198,151644,77091,198]`
			}
			fmt.Fprintf(w, `data: {"id":"%s","object":"chat.completion.chunk","created":%d,"model":"m","choices":[{"index":0,"delta":{"content":"x"},"logprobs":{"content":[{"token":"x","logprob":-0.5,"bytes":[120],"top_logprobs":[]}]},"finish_reason":null,"token_ids":[87]}]%s}`+"\n\n", id, nowMicros(), promptIDs)
			if w.Flush() != nil {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		fmt.Fprintf(w, `data: {"id":"%s","object":"chat.completion.chunk","created":%d,"model":"m","choices":[],"usage":{"prompt_tokens":10,"total_tokens":42,"completion_tokens":32}}`+"\n\ndata: [DONE]\n\n", id, nowMicros())
		w.Flush()
	})
}

// replyIDField opens every reply body of the stub; setReply puts a fresh
// response id in place of its placeholder.
const replyIDField = `{"id":"chatcmpl-bench"`

// setReply sets body as the response, with a response id of its own as
// vLLM gives every request (hone finds captured calls by it).
func setReply(r *fasthttp.Response, body string, reqID []byte) {
	var id [48]byte
	r.ResetBody()
	r.AppendBodyString(`{"id":"`)
	r.AppendBody(responseID(id[:0], reqID))
	r.AppendBodyString(body[len(replyIDField)-1:])
}

// responseID appends a chat answer's id as vLLM makes one to dst:
// "chatcmpl-" and the request's X-Request-Id, or when it has none a random
// UUID's 32 hex digits.
func responseID(dst, reqID []byte) []byte {
	dst = append(dst, "chatcmpl-"...)
	if len(reqID) > 0 {
		return append(dst, reqID...)
	}
	return hex.AppendEncode(dst, binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, rand.Uint64()), rand.Uint64()))
}

// fixedPromptIDs are the prompt ids of the stub's answers.
const fixedPromptIDs = `"prompt_token_ids":[151644,872,198,9707,0,151645,198,151644,77091,198]`

// echoReplies caches echoReply's answers by their number of prompt ids.
var echoReplies sync.Map

// echoReply is the stub's reply with n prompt token ids (at least the fixed
// reply's 10) in place of the fixed ones: what vLLM sends back for a prompt
// of n tokens when asked for its ids.
func echoReply(n int) string {
	n = max(n, 10)
	if b, ok := echoReplies.Load(n); ok {
		return b.(string)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(100 + i*7919%150000)
	}
	b := strings.Replace(stubReplyBody, fixedPromptIDs, `"prompt_token_ids":[`+strings.Join(ids, ",")+`]`, 1)
	echoReplies.Store(n, b)
	return b
}

// nowMicros is the wall clock in µs, shared by all processes on the machine.
func nowMicros() int64 { return time.Now().UnixMicro() }

// ---- proxies ----

func serveHTTPUtil(ln net.Listener, upstream string) func() {
	u, _ := url.Parse(upstream)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 1024}
	srv := &http.Server{Handler: rp}
	go srv.Serve(ln) //nolint:errcheck
	return func() { _ = srv.Close() }
}

// serveRelay is the floor of any proxy: a TCP relay that copies bytes both
// ways between each client connection and its own upstream connection, with
// no HTTP parsing at all. What it adds is the cost of one more hop.
func serveRelay(ln net.Listener, upstream string) func() {
	u, _ := url.Parse(upstream)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", u.Host)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); up.Close() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return func() { _ = ln.Close() }
}

// serveFastHTTP is a bare fasthttp reverse proxy (server + HostClient.Do, no
// body processing): the floor of the libraries hone is built on.
func serveFastHTTP(ln net.Listener, upstream string) func() {
	u, _ := url.Parse(upstream)
	hc := &fasthttp.HostClient{Addr: u.Host, MaxConns: 1024}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if err := hc.Do(&ctx.Request, &ctx.Response); err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
		}
	}}
	go srv.Serve(ln) //nolint:errcheck
	return func() { _ = srv.Shutdown() }
}

// serveHone runs hone's data plane with the defaults `hone serve` uses; with
// captureOn the real Badger store records every call.
func serveHone(ln net.Listener, upstream string, captureOn bool) (func(), string) {
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: upstream}}
	if *clientKey != "" {
		o.ClientKeys = []string{*clientKey}
	}
	reg := prometheus.NewRegistry()
	var rec proxy.Recorder
	var store *capture.Store
	dir := ""
	if captureOn {
		var err error
		dir, err = os.MkdirTemp("", "hone-bench-")
		must(err)
		co := capture.DefaultOptions()
		if d, err := time.ParseDuration(os.Getenv("HONE_BENCH_BATCH_DELAY")); err == nil {
			co.Queue.BatchDelay = d
		}
		store, err = capture.Open(dir, co, reg)
		must(err)
		rec = store
	}
	s, err := proxy.New(o, rec, reg, nil)
	must(err)
	go s.Serve(ln) //nolint:errcheck
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	go http.Serve(mln, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) //nolint:errcheck
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		if store != nil {
			_ = store.Close()
			_ = os.RemoveAll(dir)
		}
	}, "http://" + mln.Addr().String() + "/metrics"
}
