package proxy

import (
	"errors"

	"github.com/valyala/fasthttp"
)

// roundTrip sends body to an engine serving model and returns the engine
// and its response (headers read, body streaming). reqID, when set, goes as
// the request's X-Request-Id unless the agent sent one (see
// buildUpstreamRequest). A call goes to another engine when the chosen one
// cannot be reached or answers 5xx, and only then: nothing has reached the
// agent yet. The caller owns resp and must decrement eng.outstanding when
// the call ends.
func (s *Server) roundTrip(ctx *fasthttp.RequestCtx, model, session, reqID string, body, uri []byte) (*engine, *fasthttp.Response, *apiError) {
	var tried []*engine
	var lastErr *apiError = errNoEngine
	for {
		e := s.pool.pick(model, session, tried)
		if e == nil {
			return nil, nil, lastErr
		}
		if len(tried) > 0 {
			s.m.retries.Inc()
		}
		tried = append(tried, e)
		req := fasthttp.AcquireRequest()
		b, u := body, uri
		if p := planOf(ctx); p != nil {
			b, u = p.Upstream(e.url, e.kind, body, uri) // continuity mode tokens: token ids for engines that passed the probe
		}
		s.buildUpstreamRequest(req, &ctx.Request, e, reqID, b, u)
		resp := fasthttp.AcquireResponse()
		e.outstanding.Add(1)
		err := e.hc.Do(req, resp)
		fasthttp.ReleaseRequest(req)
		if err != nil {
			e.outstanding.Add(-1)
			fasthttp.ReleaseResponse(resp)
			s.pool.passive(e, 0, err)
			s.log.Warn("upstream call failed", "engine", e.url, "err", err)
			if isTimeout(err) && !isDialError(err) {
				return nil, nil, errTimeout // the engine may be working on it: do not send it twice
			}
			lastErr = errUnreachable
			continue
		}
		status := resp.StatusCode()
		s.pool.passive(e, status, nil)
		if status >= 500 && s.pool.pick(model, session, tried) != nil {
			drop(resp)
			e.outstanding.Add(-1)
			continue
		}
		return e, resp, nil
	}
}

// buildUpstreamRequest copies the agent's request (headers minus hop-by-hop
// ones) with a new body and target. A call goes with its hone call id as
// X-Request-Id when the agent sent none, in any spelling: vLLM names its
// answer after it (chatcmpl-<call id>), which links the engine's logs to
// hone's calls and lets capture find the call by the response id the
// agent saw without an index entry (capture's ownResponseID).
func (s *Server) buildUpstreamRequest(req, in *fasthttp.Request, e *engine, reqID string, body, uri []byte) {
	in.Header.CopyTo(&req.Header)
	if named := connectionNamed(&in.Header); len(named) > 0 {
		delFold(&req.Header, named, "") // hop-by-hop too (RFC 9110 7.6.1)
	}
	agentsID := delFold(&req.Header, s.dropUp, requestIDHeader)
	if reqID != "" && !agentsID {
		req.Header.Set(requestIDHeader, reqID)
	}
	req.SetRequestURI(e.url + string(uri))
	req.Header.SetHost(e.host)
	if s.opts.Upstream.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.opts.Upstream.APIKey)
	}
	req.SetBody(body)
}

// drop discards a response whose body may still be streaming, closing its
// connection rather than reading an unbounded body.
func drop(resp *fasthttp.Response) {
	if bs, ok := resp.BodyStream().(fasthttp.ReadCloserWithError); ok {
		_ = bs.CloseWithError(errDiscarded)
		return // resp is left to the GC: releasing it would close the stream twice
	}
	fasthttp.ReleaseResponse(resp)
}

var errDiscarded = errors.New("response discarded by hone")
