package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"
)

// needsTokenize reports whether a finished call lacks prompt token ids that
// the engine's /tokenize can supply (engines without return_token_ids).
func (s *Server) needsTokenize(rec *capture.Call) bool {
	if s.opts.Upstream.TokenIDs != "auto" && s.opts.Upstream.TokenIDs != "tokenize" || rec.HTTPStatus != 200 {
		return false
	}
	if rec.Route == capture.RouteChat {
		return len(rec.PromptIDs) == 0
	}
	return len(rec.Choices) > 0 && len(rec.Choices[0].PromptIDs) == 0
}

// maxTokenizing bounds the /tokenize fallbacks in flight.
const maxTokenizing = 64

// tokenizeLater runs the /tokenize fallback of a finished call in the
// background, bounded and owned by the server (Shutdown waits for it). When
// maxTokenizing are already running, the call is recorded without prompt
// ids rather than queueing without bound.
func (s *Server) tokenizeLater(e *engine, rec *capture.Call) {
	select {
	case s.tokenizing <- struct{}{}:
	default:
		s.log.Warn("too many tokenize fallbacks in flight; call recorded without prompt ids", "call", rec.ID)
		s.rec.Record(rec)
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer func() { <-s.tokenizing }()
		s.tokenizeThenRecord(s.ctx, e, rec)
	}()
}

// tokenizeThenRecord asks the engine to tokenize the call's prompt the way
// it rendered it, fills in the prompt ids and hands the call over. It runs
// after the agent has its response.
func (s *Server) tokenizeThenRecord(ctx context.Context, e *engine, rec *capture.Call) {
	ids, err := s.tokenize(ctx, e, rec)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		s.log.Warn("tokenize fallback failed; call recorded without prompt ids", "call", rec.ID, "err", err)
	} else if rec.Route == capture.RouteChat {
		rec.PromptIDs = ids
	} else {
		for i := range rec.Choices {
			rec.Choices[i].PromptIDs = ids
		}
	}
	s.rec.Record(rec)
}

// tokenizeBody builds a vLLM /tokenize request equivalent to the call.
func tokenizeBody(rec *capture.Call) ([]byte, error) {
	out := []byte(`{}`)
	var err error
	set := func(path string, raw string) {
		if err == nil {
			out, err = sjson.SetRawBytes(out, path, []byte(raw))
		}
	}
	model, _ := json.Marshal(rec.Upstream)
	set("model", string(model))
	req := gjson.ParseBytes(rec.Request)
	if rec.Route == capture.RouteCompletions {
		p := req.Get("prompt")
		if p.Type != gjson.String {
			return nil, fmt.Errorf("prompt is not a single string")
		}
		set("prompt", p.Raw)
		return out, err
	}
	set("messages", req.Get("messages").Raw)
	set("add_generation_prompt", "true")
	for _, k := range []string{"tools", "chat_template_kwargs", "add_generation_prompt", "continue_final_message",
		"chat_template", "add_special_tokens"} {
		if v := req.Get(k); v.Exists() {
			set(k, v.Raw)
		}
	}
	return out, err
}

func (s *Server) tokenize(ctx context.Context, e *engine, rec *capture.Call) ([]int32, error) {
	body, err := tokenizeBody(rec)
	if err != nil {
		return nil, err
	}
	status, reply, err := s.postTokenize(ctx, e, body)
	if err == nil && status != 200 {
		err = fmt.Errorf("status %d", status)
	}
	var ids []int32
	if err == nil {
		ids, err = parseTokenizeReply(reply)
	}
	if err != nil {
		return nil, fmt.Errorf("POST %s/tokenize: %w", e.url, err)
	}
	return ids, nil
}

// postTokenize sends body to an engine's /tokenize (with hone's engine key)
// and returns the status and reply, within 30 s or ctx's deadline.
func (s *Server) postTokenize(ctx context.Context, e *engine, body []byte) (int, []byte, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(e.url + "/tokenize")
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	if s.opts.Upstream.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.opts.Upstream.APIKey)
	}
	req.SetBody(body)
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := controlClient.DoDeadline(req, resp, deadline); err != nil {
		return 0, nil, err
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...), nil
}

// parseTokenizeReply reads the token ids of a /tokenize reply (vLLM's and
// SGLang's: a JSON object whose "tokens" is a list of ids). Anything else is
// an error, so a call is recorded without prompt ids rather than with wrong
// ones: garbage, truncated JSON, a key given twice, ids that are not
// non-negative 32-bit integers.
func parseTokenizeReply(body []byte) ([]int32, error) {
	if !json.Valid(body) {
		return nil, errors.New("reply is not JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("reply is not a JSON object")
	}
	var tokens []json.Number
	seen := 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read reply: %w", err)
		}
		if key != "tokens" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, fmt.Errorf("read reply: %w", err)
			}
			continue
		}
		seen++
		if err := dec.Decode(&tokens); err != nil || tokens == nil {
			return nil, errors.New(`"tokens" is not a list of numbers`)
		}
	}
	if seen != 1 {
		return nil, fmt.Errorf(`reply has %d "tokens" lists, want 1`, seen)
	}
	ids := make([]int32, 0, len(tokens))
	for _, t := range tokens {
		v, err := strconv.ParseInt(t.String(), 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("token %q is not a token id", t.String())
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}
