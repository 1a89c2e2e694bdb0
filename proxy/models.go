package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"
)

// handleModels answers GET /v1/models with the models of every healthy
// engine (deduplicated by id) plus hone's policy aliases. The adapters of
// trained versions are hone's internals: agents call the alias, so they are
// not listed.
func (s *Server) handleModels(ctx *fasthttp.RequestCtx) {
	seen := map[string]bool{}
	var data []json.RawMessage
	maxLen := map[string]int64{}
	for _, e := range s.pool.engines {
		if !e.healthy.Load() {
			continue
		}
		status, body, err := s.pool.get(ctx, e, "/v1/models")
		if err != nil || status != 200 {
			continue
		}
		gjson.GetBytes(body, "data").ForEach(func(_, m gjson.Result) bool {
			id := m.Get("id").String()
			if !seen[id] && !s.trainedTarget(id) {
				seen[id] = true
				data = append(data, s.annotateModel(id, m.Raw))
				maxLen[id] = m.Get("max_model_len").Int()
			}
			return true
		})
	}
	now := time.Now().Unix()
	for _, p := range s.aliases.List() {
		if seen[p.Alias] {
			continue
		}
		entry := map[string]any{"id": p.Alias, "object": "model", "created": now, "owned_by": "hone",
			"root": p.Target, "parent": nil, "permission": []any{}, "hone_policy": p}
		if l := maxLen[p.Target]; l > 0 {
			entry["max_model_len"] = l
		}
		b, _ := json.Marshal(entry)
		data = append(data, b)
	}
	if data == nil {
		data = []json.RawMessage{}
	}
	out, _ := json.Marshal(map[string]any{"object": "list", "data": data})
	ctx.SetContentType("application/json")
	ctx.SetBody(out)
	s.m.requests.WithLabelValues("models", "200").Inc()
}

// annotateModel adds "hone_policy" (alias, target, version) to an engine's
// model entry whose id is a policy name, so clients see which names follow a
// trained policy; other entries are passed as the engine sent them.
func (s *Server) annotateModel(id, raw string) json.RawMessage {
	p, ok := s.aliases.Lookup(id)
	if !ok {
		return json.RawMessage(raw)
	}
	b, err := sjson.SetBytes([]byte(raw), "hone_policy", p)
	if err != nil {
		return json.RawMessage(raw)
	}
	return b
}

// passthrough forwards an inference route of proxy.inference_routes
// uncaptured: unchanged but for a policy alias's target and, on the pooling
// routes, the client key's cache_salt (saltedRoute).
func (s *Server) passthrough(ctx *fasthttp.RequestCtx) {
	model := gjson.GetBytes(ctx.PostBody(), "model").String()
	c := &call{s: s, api: nativeSurface{passthroughDialect}, reply: native{}, dialect: passthroughDialect, start: time.Now(), sentAt: time.Now()}
	target := ""
	if p, release, ok := s.aliases.acquire(model); ok {
		c.policy, c.release, target = p, release, p.Target
	} else if p, release, ok := s.acquirePinned(model); ok {
		c.policy, c.release = p, release
	}
	salt := ""
	if owner, _ := ctx.UserValue(ownerKey{}).(string); s.salts != nil && saltedRoute(string(ctx.Path())) {
		salt = s.salts[owner]
	}
	if target != "" || salt != "" {
		if !rewritePassthrough(ctx, model, target, salt) && salt != "" {
			// unsalted, the call would share the engine's cache with no key's
			c.failEarly(ctx, &apiError{400, "invalid_request_error", "invalid_json", "the request body is not a JSON object", ""})
			return
		}
	}
	eng, resp, aerr := s.roundTrip(ctx, model, "", "", ctx.PostBody(), ctx.Request.URI().RequestURI())
	if aerr != nil {
		c.failEarly(ctx, aerr)
		return
	}
	c.eng, c.httpStatus = eng, resp.StatusCode()
	copyResponseHeaders(&ctx.Response.Header, &resp.Header, s.ownDown)
	ctx.SetStatusCode(c.httpStatus)
	if isEventStream(resp) {
		s.m.openStreams.Inc()
		c.streaming = true
		ctx.Response.ImmediateHeaderFlush = true
		ctx.SetBodyStream(newStreamBody(c, resp), -1)
		return
	}
	buf := bytebufferpool.Get()
	defer bytebufferpool.Put(buf)
	err := readBody(buf, resp)
	fasthttp.ReleaseResponse(resp)
	c.upstreamDone = time.Now()
	if err != nil {
		c.failEarly(ctx, errUnreachable)
		return
	}
	ctx.SetBody(buf.B)
	c.done()
}

// rewritePassthrough sets a forwarded body's model to target and its
// cache_salt to salt (either may be empty) as rewriteRequest does for the
// APIs hone serves, duplicate keys included. It reports false, leaving the
// body as it is, when the body is not a JSON object.
func rewritePassthrough(ctx *fasthttp.RequestCtx, model, target, salt string) bool {
	body := ctx.PostBody()
	a, _, ok := inspect(body, passthroughDialect)
	if !ok {
		return false
	}
	up, err := rewriteRequest(body, passthroughDialect, a, model, "off", target, false, salt)
	if err != nil {
		return false
	}
	ctx.Request.SetBody(up)
	return true
}

// BaseModels returns the base models the engines serve: the ids of
// /v1/models entries that are neither LoRA adapters (vLLM sets "parent") nor
// hone's own aliases, deduplicated over the engines that answered.
func (s *Server) BaseModels(ctx context.Context) ([]string, error) {
	var out []string
	var errs []error
	for _, e := range s.pool.engines {
		status, body, err := s.pool.get(ctx, e, "/v1/models")
		if err == nil && status != 200 {
			err = fmt.Errorf("status %d", status)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s/v1/models: %w", e.url, err))
			continue
		}
		gjson.GetBytes(body, "data").ForEach(func(_, m gjson.Result) bool {
			id := m.Get("id").String()
			if p := m.Get("parent"); (p.Exists() && p.Type != gjson.Null) || id == "" || slices.Contains(out, id) {
				return true
			}
			if pol, ok := s.aliases.Lookup(id); ok && pol.Alias == id {
				return true
			}
			out = append(out, id)
			return true
		})
	}
	if len(out) == 0 {
		return nil, errors.Join(append(errs, errors.New("no engine lists a base model"))...)
	}
	return out, nil
}
