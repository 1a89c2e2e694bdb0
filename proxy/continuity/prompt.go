package continuity

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/model/chat"
	"github.com/hone-rl/hone/model/template"
	"github.com/tidwall/gjson"
)

// Plan is one chat call in continuity mode tokens: the prompt ids hone
// rendered (with the sampled ids of a served turn put back) and what is
// needed to send them to an engine and to turn its completion back into
// the chat completion the agent asked for.
type Plan struct {
	k         *Continuity
	session   string
	prefix    prefixHash // the request's messages, by meaning: a reply's turn chains onto it
	ids       []int32    // prompt ids
	thinkOpen bool       // the prompt leaves <think> open
	thinking  bool       // chat_template_kwargs.enable_thinking is not false
	tools     bool       // parse hermes tool calls
	spliced   bool       // a served turn's sampled ids were put back
	up        []byte     // the chat body as rewritten for the engine (sampling fields)
	topN      int        // top_logprobs the client asked for
	asIDs     bool       // the client asked return_tokens_as_token_ids
	sent      bool       // the engine took the token-id prompt; false: the chat body went
	kind      string     // the kind of engine the prompt went to (engine.kind)
	force     *forced    // a forced tool call (continuity_forced.go), sampled and parsed as hermes calls; nil: none
	single    bool       // parallel_tool_calls false: the client gets the first tool call only, as from vLLM
	vllmTag   []byte     // the structural tag vLLM's chat would constrain the call with (structuralTag); nil: none
	embTag    []byte     // the tag equal to the embedded engine's chat constraint (embeddedTag); nil: none
	tag       []byte     // the tag sent to the engine the call goes to: vllmTag or embTag
}

// errNotCovered marks requests tokens mode leaves to the engine's chat
// endpoint (forced tool calls, structured output, prefills, ...).
var errNotCovered = errors.New("not covered by continuity mode tokens")

// chatOnly are chat request fields with no /v1/completions counterpart;
// they are dropped from the token-id request (their effect is in the
// prompt or in the conversion of the answer).
var chatOnly = map[string]bool{
	"messages": true, "tools": true, "tool_choice": true, "parallel_tool_calls": true, "response_format": true,
	"chat_template_kwargs": true, "add_generation_prompt": true, "continue_final_message": true, "documents": true,
	"logprobs": true, "top_logprobs": true, "max_completion_tokens": true, "max_tokens": true,
	"return_token_ids": true, "return_tokens_as_token_ids": true, "add_special_tokens": true, "modalities": true,
	"audio": true, "prediction": true, "store": true, "metadata": true, "service_tier": true,
	"web_search_options": true, "mm_processor_kwargs": true, "media_io_kwargs": true, "include_reasoning": true,
	"functions": true, "function_call": true, "echo": true, "prompt": true, "structured_outputs": true,
}

// Plan renders a captured chat call's prompt in tokens mode. body is the
// chat request (the agent's, or a translated API's), up the same rewritten
// for the engine, session the call's. The plan is kept under callID until
// Remember sees the call recorded. The error says why the call is observed
// (counted so).
func (k *Continuity) Plan(callID, session string, body, up []byte) (*Plan, error) {
	p, err := k.plan(session, body, up)
	if err != nil {
		k.calls.WithLabelValues("observe").Inc()
		return nil, err
	}
	k.plans.Add(callID, p)
	return p, nil
}

func (k *Continuity) plan(session string, body, up []byte) (*Plan, error) {
	doc := gjson.ParseBytes(withoutMessages(body))
	if err := covered(doc); err != nil {
		return nil, err
	}
	force, _ := forcedCall(doc) // covered checked it
	if force != nil && !k.parse.Tools {
		return nil, errors.New("a forced tool call with a chat template that writes no hermes calls: " + errNotCovered.Error())
	}
	req, err := template.ParseRequest(body)
	if err != nil {
		return nil, err
	}
	cv, err := k.conversation(session, req)
	if err != nil {
		return nil, err
	}
	p := &Plan{k: k, session: session, prefix: cv.hashes[len(cv.hashes)-1], up: up,
		topN: int(doc.Get("top_logprobs").Int()), asIDs: doc.Get("return_tokens_as_token_ids").Bool(),
		thinking: doc.Get("chat_template_kwargs.enable_thinking").Type != gjson.False, force: force,
		single: doc.Get("parallel_tool_calls").Type == gjson.False, vllmTag: structuralTag(doc)}
	if force != nil {
		p.embTag = embeddedTag(doc)
	}
	tc := strings.TrimSpace(doc.Get("tool_choice").Raw)
	p.tools = k.parse.Tools && len(req.Tools) > 0 && string(req.Tools) != "[]" && tc != `"none"` && force == nil
	for j := len(cv.msgs) - 1; j >= 0 && p.session != ""; j-- {
		if cv.msgs[j].Role != "assistant" {
			continue
		}
		turn, ok := k.turns.Get(turnKey(p.session, cv.hashes[j]))
		if !ok {
			continue
		}
		if tail, eos, ok := k.spliceTail(req.Input, cv, j, turn); ok {
			p.ids, p.spliced = k.splice(turn, tail, eos), true
			p.thinkOpen = chat.PromptOpensThink(tail)
			return p, nil
		}
		break
	}
	in := req.Input
	in.Messages = template.JoinMessages(cv.norm)
	text, err := k.tmpl.Render(in)
	if err != nil {
		return nil, err
	}
	p.thinkOpen = chat.PromptOpensThink(text)
	p.ids = k.tok.Encode(text)
	return p, nil
}

// withoutMessages is a chat body with an empty messages array, for reading
// the other fields without scanning the conversation each time.
func withoutMessages(body []byte) []byte {
	m := gjson.GetBytes(body, "messages")
	if m.Index <= 0 || m.Index+len(m.Raw) > len(body) {
		return body
	}
	out := make([]byte, 0, len(body)-len(m.Raw)+2)
	out = append(out, body[:m.Index]...)
	out = append(out, "[]"...)
	return append(out, body[m.Index+len(m.Raw):]...)
}

func turnKey(session string, h prefixHash) string { return session + "\x00" + string(h[:]) }

// splice builds the prompt of a conversation whose message hit is an
// assistant turn hone served: the token path of that call (its prompt and
// the sampled completion) followed by the template's rendering of what
// comes after the turn (tail, from spliceTail). eos is the end-of-turn
// token the template closes the turn with: put back when generation
// stopped without one (max_tokens or a stop string).
func (k *Continuity) splice(turn *servedTurn, tail string, eos eosToken) []int32 {
	tailIDs := k.tok.Encode(tail)
	ids := make([]int32, 0, len(turn.ids)+1+len(tailIDs))
	ids = append(ids, turn.ids...)
	if !turn.ended {
		ids = append(ids, eos.id)
	}
	return append(ids, tailIDs...)
}

// nthEOS returns where the n-th end-of-turn token of text ends, and which
// token it is; -1 when text has fewer.
func (k *Continuity) nthEOS(text string, n int) (int, eosToken) {
	pos := 0
	for c := 0; c < n; c++ {
		at, tok := -1, eosToken{}
		for _, t := range k.eos {
			if i := strings.Index(text[pos:], t.text); i >= 0 && (at < 0 || i < at) {
				at, tok = i, t
			}
		}
		if at < 0 {
			return -1, eosToken{}
		}
		pos += at + len(tok.text)
		if c == n-1 {
			return pos, tok
		}
	}
	return -1, eosToken{}
}

// Remember stores the turns a finished chat call served, keyed by the
// conversation they complete, for the session's later calls.
func (k *Continuity) Remember(c *capture.Call) {
	p, _ := k.plans.Get(c.ID)
	if p != nil {
		k.plans.Remove(c.ID)
	}
	if c.Route != capture.RouteChat || c.Status != capture.StatusOK || c.Session == "" || len(c.PromptIDs) == 0 {
		return
	}
	var prefix prefixHash
	if p != nil {
		prefix = p.prefix
	} else {
		in, err := template.RequestInput(c.Request)
		if err != nil {
			return
		}
		msgs, err := parseMessages(in)
		if err != nil || len(msgs) == 0 {
			return
		}
		hs := prefixHashes(seedHash(in), msgs)
		prefix = hs[len(hs)-1]
	}
	for i := range c.Choices {
		k.rememberTurn(c.Session, prefix, c.PromptIDs, &c.Choices[i])
	}
}

// rememberTurn stores one served choice: the conversation prefix plus the
// reply, by meaning, maps to the prompt and sampled ids.
func (k *Continuity) rememberTurn(session string, prefix prefixHash, prompt []int32, ch *capture.Choice) {
	if len(ch.TokenIDs) == 0 || ch.FinishReason == "" || session == "" || len(prompt) == 0 {
		return
	}
	ids := make([]int32, 0, len(prompt)+len(ch.TokenIDs))
	ids = append(append(ids, prompt...), ch.TokenIDs...)
	k.turns.Add(turnKey(session, prefix.chain(replyCanon(nil, ch))),
		&servedTurn{ids: ids, ended: k.isEOS(ch.TokenIDs[len(ch.TokenIDs)-1])})
}

func (k *Continuity) isEOS(id int32) bool {
	for _, t := range k.eos {
		if t.id == id {
			return true
		}
	}
	return false
}

// Upstream returns the body and route to send the engine at url (of the
// given kind, as in engine.kind): the token-id completions request when the
// engine passed the probe, else the chat body and route as they were.
func (p *Plan) Upstream(url, kind string, body, uri []byte) ([]byte, []byte) {
	p.sent, p.kind = false, kind
	st := p.k.State(url)
	if st == nil || !st.Tokens {
		return body, uri
	}
	p.tag = p.vllmTag
	if kind == "embedded" {
		p.tag = p.embTag
	}
	if p.force != nil && p.tag == nil {
		return body, uri // no tag to force the call with
	}
	// vLLM's qwen3 reasoning parser (and its hermes tool parser, for
	// tool-calling requests) keep special tokens in a chat's output
	// (skip_special_tokens false): the same text comes back here
	b, err := p.completionsBody(st.MaxModelLen, kind != "embedded" && (p.tools || p.force != nil || p.k.parse.Reasoning))
	if err != nil {
		p.k.log.Debug("continuity: chat body kept", "engine", url, "err", err)
		return body, uri
	}
	p.sent = true
	return b, []byte("/v1/completions")
}

// completionsBody is the /v1/completions request for the plan: the chat
// request's sampling fields, the prompt ids, max_tokens (vLLM's chat
// default, the context left, when the client set none: completions would
// default to 16), logprobs in the completions form, token ids, and
// skip_special_tokens false when keepSpecial.
func (p *Plan) completionsBody(maxModelLen int, keepSpecial bool) ([]byte, error) {
	doc := gjson.ParseBytes(p.up)
	out := make([]byte, 0, len(p.up)/4+len(p.ids)*7+256)
	out = append(out, '{')
	maxTok := ""
	doc.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "max_tokens", "max_completion_tokens":
			if v.Type == gjson.Number && (maxTok == "" || k.Str == "max_completion_tokens") {
				maxTok = v.Raw
			}
		}
		if chatOnly[k.Str] || (keepSpecial && k.Str == "skip_special_tokens") {
			return true
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, k.Raw...)
		out = append(out, ':')
		out = append(out, v.Raw...)
		return true
	})
	if maxTok == "" {
		if maxModelLen <= len(p.ids) {
			return nil, errors.New("no max_tokens and the engine's max_model_len is unknown or used up")
		}
		maxTok = strconv.Itoa(maxModelLen - len(p.ids))
	}
	if len(out) > 1 {
		out = append(out, ',')
	}
	out = append(out, `"prompt":[`...)
	for i, id := range p.ids {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, int64(id), 10)
	}
	out = append(out, `],"max_tokens":`...)
	out = append(out, maxTok...)
	out = append(out, `,"logprobs":`...)
	out = strconv.AppendInt(out, int64(p.topN), 10)
	out = append(out, `,"return_token_ids":true,"return_tokens_as_token_ids":true`...)
	if p.tag != nil {
		tag, _ := json.Marshal(string(p.tag)) // vLLM takes the tag as a JSON string
		out = append(out, `,"structured_outputs":{"structural_tag":`...)
		out = append(out, tag...)
		out = append(out, '}')
	}
	if keepSpecial {
		out = append(out, `,"skip_special_tokens":false`...)
	}
	out = append(out, '}')
	return out, nil
}

// Sent reports whether the engine got the token-id prompt (the answer is
// then a completions answer, for ChatBody or ChatStream).
func (p *Plan) Sent() bool { return p.sent }

// Count records how a planned call went upstream.
func (p *Plan) Count() {
	switch {
	case !p.sent:
		p.k.calls.WithLabelValues("observe").Inc()
	case p.spliced:
		p.k.calls.WithLabelValues("spliced").Inc()
		p.k.spliced.Inc()
	default:
		p.k.calls.WithLabelValues("rendered").Inc()
	}
}
