package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy/continuity"
	"github.com/hone-rl/hone/proxy/internal/sse"
	"github.com/hone-rl/hone/rollout"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"
)

// Server is hone's data plane: an OpenAI-compatible reverse proxy.
type Server struct {
	opts    Options
	rec     Recorder
	aliases *Aliases
	pool    *pool
	m       *metrics
	log     *slog.Logger
	srv     *fasthttp.Server
	ctx     context.Context // ends the health checks at Shutdown
	cancel  context.CancelFunc
	keys    map[string]bool
	salts   map[string]string // owner -> cache_salt (cachesalt.go); nil: none
	mounted map[string]fasthttp.RequestHandler
	dropUp  []string // request headers never forwarded upstream, any spelling
	ownDown []string // hone's response headers, never copied from an engine's answer
	// corsExposed lists hone's response headers for Access-Control-Expose-Headers (cors.go)
	corsExposed string
	forward     map[string]bool // proxy.inference_routes

	rollouts *rollout.Manager // guarded rollouts (nil: a new version serves everyone)

	responses  *conversations // Responses API conversations, for previous_response_id
	bg         sync.WaitGroup // background work the server owns (tokenize fallbacks)
	tokenizing chan struct{}  // slots of tokenize fallbacks in flight

	cont    *continuity.Continuity // continuity mode tokens (nil: observe)
	contWhy string                 // why tokens mode was asked for but is off
}

// New returns a data plane for opts. rec may be nil (nothing is captured);
// reg may be nil (no metrics registered).
func New(opts Options, rec Recorder, reg prometheus.Registerer, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	p, err := newPool(&opts, log)
	if err != nil {
		return nil, err
	}
	if len(opts.ClientKeys) > 0 && opts.Upstream.APIKey == "" {
		log.Warn("proxy.client_keys are hone's: no agent's key reaches an engine, and engine.api_key is empty, " +
			"so engines get no credential; set engine.api_key if they want one")
	}
	s := &Server{opts: opts, rec: rec, aliases: NewAliases(opts.Aliases), pool: p, m: newMetrics(reg), log: log,
		keys: map[string]bool{}, forward: newRoutes(opts.InferenceRoutes), tokenizing: make(chan struct{}, maxTokenizing),
		responses: newConversations(opts.Responses.Max, opts.Responses.TTL)}
	if s.rec == nil {
		s.rec = noRecorder{}
	}
	for _, k := range opts.ClientKeys {
		s.keys[k] = true
	}
	s.salts = cacheSalts(&opts)
	if len(s.keys) == 0 && slices.Contains(opts.CORSOrigins, "*") {
		log.Warn("proxy.cors_origins has * and proxy.client_keys is empty: any web page open in a browser that " +
			"reaches the data plane may call it as an agent (reward, commit, continue sessions)")
	}
	if opts.Continuity == ContinuityTokens {
		if s.cont, err = continuity.New(opts.Upstream.Tokenizer, reg, log); err != nil {
			s.contWhy = err.Error()
			log.Warn("continuity: tokens mode needs the model folder; observing", "err", err)
		} else {
			if lc, ok := s.rec.(continuity.LatestCalls); ok {
				s.cont.Restore(lc)
			}
			s.rec = continuityRecorder{Recorder: s.rec, k: s.cont}
		}
	}
	s.dropUp = upstreamDrops(&opts)
	s.ownDown = []string{opts.Headers.Session, opts.Headers.Call, opts.Headers.Policy, warningHeader}
	s.corsExposed = corsExposed(opts.Headers)
	p.onState = func(e *engine, up bool) {
		s.m.engineUp.WithLabelValues(e.url).Set(b2f(up))
		if up && s.cont != nil {
			s.bg.Add(1)
			go func() { defer s.bg.Done(); s.probe(s.ctx, e) }() // the engine may have changed
		}
	}
	p.onBase = func(e *engine) {
		if s.cont != nil {
			s.bg.Add(1)
			go func() { defer s.bg.Done(); s.probe(s.ctx, e) }()
		}
	}
	p.onPanic = s.m.panics.Inc
	for _, e := range p.engines {
		s.m.engineUp.WithLabelValues(e.url).Set(1)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background()) // health checks, until Shutdown
	s.srv = &fasthttp.Server{
		Handler:                       s.handle,
		Name:                          "hone",
		MaxRequestBodySize:            opts.MaxBodyBytes,
		ReadBufferSize:                opts.MaxHeaderBytes, // also fasthttp's limit on the request head
		WriteBufferSize:               writeBufferSize,
		ErrorHandler:                  s.readError,
		HeaderReceived:                s.headerReceived,
		SecureErrorLogMessage:         true, // fasthttp logs no request bytes either
		Logger:                        serverLog{log},
		NoDefaultServerHeader:         true,
		NoDefaultContentType:          true,
		DisableHeaderNamesNormalizing: true,
		ReadTimeout:                   opts.ReadTimeout, // the request head and body; answers and streams are not bounded by it
		IdleTimeout:                   opts.IdleTimeout,
		Concurrency:                   opts.MaxConns,
		CloseOnShutdown:               true,
	}
	return s, nil
}

// writeBufferSize is the agent connection's write buffer: an answer of up
// to 16 KiB (a chat reply, a tool call) leaves in one write instead of
// fasthttp's 4 KiB writes; with capture off about half of hone's CPU per
// call is syscalls. fasthttp keeps a connection's buffers while it lives:
// with the 32 KiB read buffer (MaxHeaderBytes), an open agent connection
// holds 48 KiB instead of 36.
const writeBufferSize = 16 << 10

// Aliases is the policy alias table the trainer swaps.
func (s *Server) Aliases() *Aliases { return s.aliases }

// Ready reports whether at least one engine is healthy.
func (s *Server) Ready() bool { return s.pool.anyHealthy() }

// Serve checks the engines once, then serves the data plane on ln until
// Shutdown. Health checks run in the background.
func (s *Server) Serve(ln net.Listener) error {
	s.pool.checkAll(s.ctx)
	if s.cont != nil {
		s.bg.Add(1)
		go func() { defer s.bg.Done(); s.probeAll(s.ctx) }()
	}
	go s.pool.run(s.ctx)
	return s.srv.Serve(retryListener{Listener: ln, log: s.log})
}

// Shutdown stops accepting calls and waits for in-flight ones (streams
// included) until ctx ends.
// Background work (tokenize fallbacks) gets what is left of ctx, then is
// cancelled: a call still waiting for /tokenize is recorded without prompt
// ids.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.ShutdownWithContext(ctx)
	done := make(chan struct{})
	go func() { s.bg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	s.cancel()
	return err
}

// readError answers a request fasthttp could not read. The answer never
// echoes request bytes (fasthttp's errors quote the head they were parsing).
func (s *Server) readError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	api := surfaceOf(ctx) // the head was read when the body is too large
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge) && s.keyless(&ctx.Request.Header):
		s.failAPI(ctx, api, errUnauthorized) // what the handler answers it
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		s.failAPI(ctx, api, errTooLarge)
	case errors.As(err, &small):
		s.fail(ctx, "other", &apiError{431, "invalid_request_error", "request_header_fields_too_large",
			"request headers exceed " + strconv.Itoa(s.opts.MaxHeaderBytes) + " bytes (proxy.max_header_bytes)", ""})
	case errors.As(err, &ne) && ne.Timeout():
		s.fail(ctx, "other", &apiError{408, "invalid_request_error", "request_timeout",
			"the request did not arrive within proxy.read_timeout", ""})
	default:
		s.log.Debug("unreadable request", "err", redact(err.Error()))
		s.fail(ctx, "other", &apiError{400, "invalid_request_error", "bad_request", "cannot parse the HTTP request", ""})
	}
	if origin := peekFold(&ctx.Request.Header, "Origin")[0]; s.corsAllowed(origin) { // a page reads why, not a network error
		s.corsMark(ctx, bytes.Clone(origin))
	}
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	cors := false
	if len(s.opts.CORSOrigins) > 0 {
		if origin := peekFold(&ctx.Request.Header, "Origin")[0]; s.corsAllowed(origin) {
			defer s.corsMark(ctx, bytes.Clone(origin))
			if corsPreflight(ctx) {
				return
			}
			cors = true
		}
	}
	if len(s.keys) == 0 && s.browserGuard(ctx, cors) {
		return
	}
	path := string(ctx.Path())
	if h, ok := s.mounted[path]; ok {
		s.serveMounted(ctx, h)
		return
	}
	kind := s.routeOf(path)
	if kind == routeUnknown {
		s.notFound(ctx)
		return
	}
	key, ok := s.clientKey(ctx)
	if len(s.keys) > 0 && !ok {
		s.failAPI(ctx, surfaceOf(ctx), errUnauthorized)
		return
	}
	ctx.SetUserValue(ownerKey{}, ownerOf(key))
	if kind == routeInference {
		s.passthrough(ctx)
		return
	}
	if api, ok := surfaces[path]; ok {
		if !ctx.IsPost() {
			s.methodNotAllowed(ctx, "POST")
			return
		}
		s.handleCall(ctx, api)
		return
	}
	r := ownRoutes[path] // routeOf found it in one of the two tables
	if string(ctx.Method()) != r.method {
		s.methodNotAllowed(ctx, r.method)
		return
	}
	r.handle(s, ctx)
}

// keylessBodyBytes is the most body fasthttp reads for a request without
// a valid client key (headerReceived).
const keylessBodyBytes = 64 << 10

// headerReceived bounds the body fasthttp reads, and allocates from its
// Content-Length, before the handler runs: with client keys, a request
// without a valid one is refused (401), so it may bring at most
// keylessBodyBytes, not proxy.max_body_bytes; otherwise anyone who reaches
// the port could make hone reserve 32 MiB per connection with a head
// alone.
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if s.keyless(h) {
		return fasthttp.RequestConfig{MaxRequestBodySize: keylessBodyBytes}
	}
	return fasthttp.RequestConfig{}
}

// keyless reports whether hone has client keys and h presents none of them
// (every route wants one then, the data-plane feedback routes included).
func (s *Server) keyless(h *fasthttp.RequestHeader) bool {
	return len(s.keys) > 0 && s.validKey(h) == nil
}

// validKey returns the one of proxy.client_keys h presents, in any of the
// credential headers agents' SDKs use (nil for none): a view of h, found
// without allocating.
func (s *Server) validKey(h *fasthttp.RequestHeader) []byte {
	for k, v := range h.All() {
		if key := presentedKey(k, v); len(key) > 0 && s.keys[string(key)] {
			return key
		}
	}
	return nil
}

// clientKey returns the one of proxy.client_keys the agent presented.
func (s *Server) clientKey(ctx *fasthttp.RequestCtx) (string, bool) {
	key := s.validKey(&ctx.Request.Header)
	return string(key), key != nil
}

// surfaceOf is the API a request's path names, for errors answered before
// routing (OpenAI's shape for any other path).
func surfaceOf(ctx *fasthttp.RequestCtx) surface {
	path := string(ctx.Path())
	if api, ok := surfaces[path]; ok {
		return api
	}
	if path == countTokensPath { // Anthropic's route, not a call: its errors in Anthropic's shape
		return messagesSurface{}
	}
	return otherSurface{}
}

// failAPI answers an error in the API's own shape and counts it.
func (s *Server) failAPI(ctx *fasthttp.RequestCtx, api surface, e *apiError) {
	api.writeError(ctx, e)
	s.m.requests.WithLabelValues(api.label(), strconv.Itoa(e.status)).Inc()
	s.logRefused(ctx, api.label(), e)
}

func (s *Server) fail(ctx *fasthttp.RequestCtx, route string, e *apiError) {
	writeError(ctx, e)
	s.m.requests.WithLabelValues(route, strconv.Itoa(e.status)).Inc()
	s.logRefused(ctx, route, e)
}

// logRefused logs, at debug level (log.level: debug), a request hone
// answered with an error of its own, so that an operator can see why an
// agent fails: the route, status and error code, none of the request's
// bytes (an error's message may quote a header or the path, which may
// hold anything; FuzzRedactHead).
func (s *Server) logRefused(ctx *fasthttp.RequestCtx, route string, e *apiError) {
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("request answered with an error", "route", route, "status", e.status, "code", e.code)
	}
}

// handleCall proxies one chat or completions call, capturing it when the
// recorder selects it.
func (s *Server) handleCall(ctx *fasthttp.RequestCtx, api surface) {
	d := api.dialect()
	c := &call{s: s, api: api, reply: native{}, dialect: d, start: time.Now(), status: capture.StatusOK, acc: accumulator{dialect: d},
		upPath: ctx.Request.URI().RequestURI()}
	body := ctx.PostBody()
	// one walk validates the agent's body and, for the engine's own APIs,
	// reads what the call needs from it; a translated body is read as the
	// translation writes it
	var ok bool
	if c.asked, c.model, ok = inspect(body, d); !ok {
		s.failAPI(ctx, api, errBadJSON)
		return
	}
	if c.asked.repeats { // what the engine would read, for every reader
		body = lastOfEach(body)
		c.asked, c.model, _ = inspect(body, d)
	}
	owner, _ := ctx.UserValue(ownerKey{}).(string)
	tr, terr := api.translate(s, owner, body)
	if terr != nil {
		s.failAPI(ctx, api, terr)
		return
	}
	if tr != nil {
		body, c.reply, c.upPath = tr.body, translated{tr.enc}, []byte(tr.path)
		c.asked, c.model = tr.in.a, tr.in.model
		if verifyEncoded {
			mustInspectAs(body, d, c.asked, c.model)
		}
	}
	hr := readHoneHeaders(&ctx.Request.Header, &s.opts.Headers, s.opts.StrictHeaders)
	if hr.err != nil {
		s.failAPI(ctx, api, hr.err)
		return
	}
	hh := hr.hh
	c.hh, c.warnings = hh, hr.warnings
	c.model = strings.Clone(c.model) // a view of fasthttp's request buffer, reused after the handler
	c.target = c.model
	if p, release, ok := s.aliases.acquire(c.model); ok {
		c.policy, c.isAlias, c.target, c.release = p, true, p.Target, release
	} else if p, release, ok := s.acquirePinned(c.model); ok {
		c.policy, c.release = p, release // no rollout moves a call that named its version
	}
	c.id = "call-" + capture.NewID()
	c.answerID = c.reply.named(c.id)
	c.owner = owner
	c.verdict = s.rec.Admit(&capture.Admission{CallID: c.id, Route: d.route(), Model: c.model, Hone: hh, Body: body,
		Owner: owner})
	if c.verdict.Refused != nil {
		c.verdict.Capture = false
		e := errSessionOwned(s.opts.Headers.Session)
		if !errors.Is(c.verdict.Refused, capture.ErrSessionOwned) { // the owner could not be read
			e = &apiError{503, "service_unavailable", "store_unavailable", "the session's owner cannot be read now", ""}
		}
		c.failEarly(ctx, e)
		return
	}
	c.reply.admitted(c.verdict.Capture)
	s.routeRollout(c, c.verdict.Session)
	if c.target != c.model && !c.reply.namesModel() {
		c.asked.renamed, _ = json.Marshal(c.model)
		c.acc.renaming = true
	}
	up, err := rewriteRequest(body, d, c.asked, c.model, s.opts.Upstream.TokenIDs, c.target, c.verdict.Capture, s.salts[owner])
	if err != nil {
		c.failEarly(ctx, &apiError{400, "invalid_request_error", "invalid_json", "cannot rewrite request: " + err.Error(), ""})
		return
	}
	if c.verdict.Capture {
		c.reqBody = append([]byte(nil), body...)
	}
	s.useContinuity(ctx, c, body, up)
	s.setHoneHeaders(ctx, c)
	s.forwardCall(ctx, c, up)
}

func (s *Server) setHoneHeaders(ctx *fasthttp.RequestCtx, c *call) {
	h := &ctx.Response.Header
	if c.verdict.Session != "" {
		h.Set(s.opts.Headers.Session, c.verdict.Session)
	}
	h.Set(s.opts.Headers.Call, c.id)
	h.Set(s.opts.Headers.Policy, strconv.FormatInt(c.policy.Version, 10))
	for _, w := range c.warnings {
		h.Add(warningHeader, w)
	}
	for _, msg := range c.reply.warnings() {
		h.Add(warningHeader, msg)
	}
	if len(c.warnings) > 0 {
		s.m.headerWarnings.Add(float64(len(c.warnings)))
	}
}

// warningHeader tells the agent which of its hone headers were ignored.
const warningHeader = "X-Hone-Warning"

// forwardCall sends the call upstream and answers the agent, streaming or not.
func (s *Server) forwardCall(ctx *fasthttp.RequestCtx, c *call, up []byte) {
	c.sentAt = time.Now()
	eng, resp, aerr := s.roundTrip(ctx, c.target, c.verdict.Session, c.id, up, c.upPath)
	if aerr != nil {
		c.failEarly(ctx, aerr)
		return
	}
	c.eng = eng
	c.httpStatus = resp.StatusCode()
	p := planOf(ctx)
	if p != nil {
		p.Count()
	}
	copyResponseHeaders(&ctx.Response.Header, &resp.Header, s.ownDown)
	ctx.SetStatusCode(c.httpStatus)
	if isEventStream(resp) && c.httpStatus == 200 {
		s.m.openStreams.Inc()
		c.streaming = true
		ctx.Response.ImmediateHeaderFlush = true
		sb := newStreamBody(c, resp)
		if p != nil && p.Sent() {
			sb.events = sse.NewReader(p.ChatStream(resp.BodyStream())) // token-id completions stream -> chat stream
		}
		ctx.SetBodyStream(sb, -1)
		return
	}
	s.finishBody(ctx, c, resp)
}

// finishBody reads a whole (non-stream or error) response, strips it and
// answers the agent. A captured answer is read into an allocation of its
// own, which the record keeps (the walk's strings point into it; its prompt
// ids are stored as null) and the agent's response refers to when nothing
// is stripped; otherwise the answer is read into a pooled buffer and copied
// into the response.
func (s *Server) finishBody(ctx *fasthttp.RequestCtx, c *call, resp *fasthttp.Response) {
	buf := answerPool.Get()
	defer answerPool.Put(buf)
	in := buf
	if c.verdict.Capture {
		in = &bytebufferpool.ByteBuffer{}
	}
	err := readBody(in, resp)
	fasthttp.ReleaseResponse(resp)
	c.upstreamDone = time.Now()
	if err != nil {
		c.fail(err)
		e := errUnreachable
		switch {
		case errors.Is(err, errAnswerTooLarge):
			e = errUpstreamLarge
		case isTimeout(err):
			e = errTimeout
		}
		c.failEarly(ctx, e)
		return
	}
	s.m.bytesIn.Add(float64(len(in.B)))
	if p := planOf(ctx); p != nil && p.Sent() && c.httpStatus < 400 {
		if chatBody, err := p.ChatBody(in.B); err == nil {
			in.B = append(in.B[:0], chatBody...)
		} else {
			s.log.Warn("continuity: engine answer not converted", "call", c.id, "err", err)
		}
	}
	if c.httpStatus >= 400 {
		c.status, c.errMsg = capture.StatusUpstreamError, gjson.GetBytes(in.B, "error.message").String()
	}
	if c.verdict.Capture {
		c.respBody = in.B
		if c.httpStatus < 400 {
			c.acc.addBody(c.respBody)
			c.respNulls = promptIDSpans(c.acc.injected)
		}
	}
	out := c.reply.whole(ctx, c, in.B, &buf.B)
	if c.verdict.Capture && sameBytes(out, c.respBody) {
		ctx.Response.SetBodyRaw(out) // the record's bytes, never written again
	} else {
		ctx.Response.SetBody(out)
	}
	s.m.bytesOut.Add(float64(len(out)))
	c.done()
	if w := c.awaitDurable(); w != "" {
		ctx.Response.Header.Add(warningHeader, w)
	}
}

// answerPool holds the buffers engines' whole answers are read into. Its
// own pool: bytebufferpool calibrates a pool to the sizes it is given, and
// the shared default one, sized for small bodies, would drop them.
var answerPool bytebufferpool.Pool

// sameBytes reports whether a and b are the same slice of memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// readBody reads a streamed upstream body into buf, grown once to the
// announced Content-Length: bytebufferpool's ReadFrom would otherwise double
// a small pooled buffer from 64 bytes up, copying the body each time. An
// answer past maxAnswer is errAnswerTooLarge (the caller's release of resp
// then drops the connection, its body unread).
func readBody(buf *bytebufferpool.ByteBuffer, resp *fasthttp.Response) error {
	n := resp.Header.ContentLength()
	if int64(n) > maxAnswer {
		return errAnswerTooLarge
	}
	if n >= 0 && n < maxPresize && cap(buf.B)-len(buf.B) <= n {
		buf.B = append(buf.B, make([]byte, n+1)...)[:len(buf.B)] // one byte more: ReadFrom doubles a full buffer before it sees EOF
	}
	bs := resp.BodyStream()
	if bs == nil {
		return resp.BodyWriteTo(buf)
	}
	got, err := buf.ReadFrom(io.LimitReader(bs, maxAnswer+1))
	if err == nil && got > maxAnswer {
		err = errAnswerTooLarge
	}
	return err
}

// maxPresize bounds what an engine's Content-Length alone may allocate.
const maxPresize = 64 << 20

// maxAnswer bounds a whole (non-stream) answer hone reads: vLLM's largest,
// a long prompt's ids with top logprobs, are tens of MB. A variable for
// the tests.
var maxAnswer int64 = 256 << 20

var errAnswerTooLarge = errors.New("the engine's answer exceeds 256 MiB")

func isEventStream(resp *fasthttp.Response) bool {
	return bytes.HasPrefix(resp.Header.ContentType(), []byte("text/event-stream"))
}

// copyResponseHeaders copies an engine's response headers to the agent's
// response but for hop-by-hop ones, Server, Date, CORS headers (hone's own,
// cors.go: vLLM answers Access-Control-Allow-Origin: * by default) and the
// names in own, in any spelling: hone's own response headers (an engine, or
// another hone in front of it, may send them too; the agent must see
// hone's only).
func copyResponseHeaders(dst *fasthttp.ResponseHeader, src *fasthttp.ResponseHeader, own []string) {
	for k, v := range src.All() {
		if isHop(k) || bytes.EqualFold(k, []byte("Server")) || bytes.EqualFold(k, []byte("Date")) || anyFold(k, own) || isCORS(k) {
			continue
		}
		dst.AddBytesKV(k, v)
	}
	dst.SetContentTypeBytes(src.ContentType())
}

func isHop(k []byte) bool {
	for _, h := range hopHeaders {
		if bytes.EqualFold(k, []byte(h)) {
			return true
		}
	}
	return false
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// noRecorder captures nothing.
type noRecorder struct{}

func (noRecorder) Admit(a *capture.Admission) capture.Verdict {
	return capture.Verdict{Session: a.Hone.Session}
}
func (noRecorder) Abandon(callID, session, owner string) {}
func (noRecorder) Record(c *capture.Call) {
	if c.Durable != nil {
		c.Durable <- errors.New("nothing is captured")
	}
}
