package proxy

import (
	"encoding/json"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"
)

// handleModels answers GET /v1/models with the models of every healthy
// engine (deduplicated by id) plus hone's policy aliases.
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
			if !seen[id] {
				seen[id] = true
				data = append(data, json.RawMessage(m.Raw))
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
			"root": p.Target, "parent": nil, "permission": []any{}}
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

// routePassthrough labels calls to other /v1/... routes: not captured, and
// their streams (e.g. /v1/responses) need not end with data: [DONE].
const routePassthrough = "passthrough"

// passthrough forwards any other /v1/... call unchanged and uncaptured.
func (s *Server) passthrough(ctx *fasthttp.RequestCtx) {
	model := gjson.GetBytes(ctx.PostBody(), "model").String()
	if p, ok := s.aliases.Lookup(model); ok {
		if body, err := rewriteRequest(ctx.PostBody(), "", asked{}, model, "off", p.Target, false); err == nil {
			ctx.Request.SetBody(body)
		}
	}
	c := &call{s: s, route: routePassthrough, start: time.Now(), sentAt: time.Now()}
	eng, resp, aerr := s.roundTrip(ctx, model, "", ctx.PostBody(), ctx.Request.URI().RequestURI())
	if aerr != nil {
		s.fail(ctx, c.route, aerr)
		return
	}
	c.eng, c.httpStatus = eng, resp.StatusCode()
	copyResponseHeaders(&ctx.Response.Header, &resp.Header)
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
	err := resp.BodyWriteTo(buf)
	fasthttp.ReleaseResponse(resp)
	c.upstreamDone = time.Now()
	if err != nil {
		c.failEarly(ctx, errUnreachable)
		return
	}
	ctx.SetBody(buf.B)
	c.done()
}
