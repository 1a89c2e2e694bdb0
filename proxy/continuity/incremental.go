package continuity

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/hone-rl/hone/model/template"
	"github.com/prometheus/client_golang/prometheus"
)

// Incremental rendering. A session's call repeats its earlier messages and
// adds a few; the served turn it extends already holds the token path up to
// that turn. So hone keeps each session's latest messages normalised and
// hashed (convo: a call normalises and hashes only the messages it adds),
// and renders only a short conversation around what follows the served
// turn: the system message, the last user message up to the turn, the turn
// and everything after it. The text after the turn's end-of-turn token is
// the same as in the whole conversation's rendering for templates that
// render a message from its neighbours and the last user query (Qwen3,
// Qwen2.5, Llama 3.x, ...). That is checked, not assumed: on a built-in
// conversation when the template loads, on the first calls and then on one
// call in checkEvery against a full rendering; any difference turns
// incremental rendering off for the process (logged, counted).

// checkFirst and checkEvery say which incremental renderings are checked
// against a full one: the first checkFirst, then one in checkEvery.
const (
	checkFirst = 16
	checkEvery = 64
)

// convo is a session's conversation as its latest planned call sent it.
type convo struct {
	seed   prefixHash
	sums   []uint64          // each message as sent, hashed (maphash)
	norm   []json.RawMessage // each message normalised (template.NormalizeMessage)
	msgs   []normMsg
	hashes []prefixHash // the conversation by meaning up to each message
	size   int64
}

func (c *convo) bytes() int64 { return c.size }

// msgSeed hashes messages as sent within this process.
var msgSeed = maphash.MakeSeed()

// conversation normalises and hashes req's messages, reusing the session's
// previous call for the messages it sent unchanged, and keeps the result
// for the session's next call.
func (k *Continuity) conversation(session string, req template.Request) (*convo, error) {
	seed := seedHash(req.Input)
	var prev *convo
	if session != "" {
		if p, ok := k.convos.Get(session); ok && p.seed == seed {
			prev = p
		}
	}
	n := len(req.Raw)
	c := &convo{seed: seed, sums: make([]uint64, n), norm: make([]json.RawMessage, n), msgs: make([]normMsg, n),
		hashes: make([]prefixHash, n)}
	h, same := seed, prev != nil
	var buf []byte
	for i, raw := range req.Raw {
		c.sums[i] = maphash.Bytes(msgSeed, raw)
		same = same && i < len(prev.sums) && prev.sums[i] == c.sums[i]
		if same {
			c.norm[i], c.msgs[i], c.hashes[i] = prev.norm[i], prev.msgs[i], prev.hashes[i]
		} else {
			norm, err := template.NormalizeMessage(raw)
			if err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
			c.norm[i] = norm
			if err := json.Unmarshal(norm, &c.msgs[i]); err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
			c.msgs[i].Raw = norm
			buf = c.msgs[i].canon(buf[:0])
			c.hashes[i] = h.chain(buf)
		}
		h = c.hashes[i]
		c.size += int64(len(c.norm[i]) + len(c.msgs[i].Content) + 64)
	}
	if session != "" {
		k.convos.Add(session, c)
	}
	return c, nil
}

// incremental is the state of incremental rendering.
type incremental struct {
	off     atomic.Bool             // a check found a difference (or the template failed the self-check)
	renders atomic.Int64            // incremental renderings so far
	heads   *lru.Cache[string, int] // seed + shape -> end-of-turn tokens up to the served turn (headEOS)
	checks  *prometheus.CounterVec
}

func (inc *incremental) init(k *Continuity) {
	inc.heads, _ = lru.New[string, int](4096) // errors only for a size <= 0
	inc.checks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hone_continuity_incremental_checks_total",
		Help: "Incremental renderings checked against a full rendering: equal, or different (incremental rendering " +
			"is then off for the process)."}, []string{"result"})
	if err := k.selfCheck(); err != nil {
		inc.off.Store(true)
		k.log.Warn("continuity: incremental rendering off, every call renders the whole conversation", "err", err)
	}
}

// spliceTail is the prompt text after the served turn msgs[hit] (the
// template's rendering from just after the turn's end-of-turn token) and
// that token, rendered incrementally when that is on (and checked when due),
// else from the whole conversation. ok is false when the rendering does
// not close the turn where the path says.
func (k *Continuity) spliceTail(in template.Input, c *convo, hit int, turn *servedTurn) (string, eosToken, bool) {
	if !k.inc.off.Load() {
		tail, eos, err := k.tailIncremental(in, c, hit)
		if err == nil {
			if n := k.inc.renders.Add(1); n <= checkFirst || n%checkEvery == 0 {
				full, feos, ok := k.tailFull(in, c.norm, turn)
				if !ok || full != tail || feos != eos {
					k.incrementalMismatch(full, tail)
					return full, feos, ok
				}
				k.inc.checks.WithLabelValues("equal").Inc()
			}
			return tail, eos, true
		}
		k.log.Debug("continuity: incremental rendering failed, rendering in full", "err", err)
	}
	return k.tailFull(in, c.norm, turn)
}

func (k *Continuity) incrementalMismatch(full, tail string) {
	k.inc.checks.WithLabelValues("different").Inc()
	if k.inc.off.Swap(true) {
		return
	}
	at := 0
	for at < len(full) && at < len(tail) && full[at] == tail[at] {
		at++
	}
	k.log.Warn("continuity: incremental rendering differs from the full rendering; off from now on",
		"at", at, "full", excerpt(full, at), "incremental", excerpt(tail, at))
}

func excerpt(s string, at int) string {
	lo, hi := max(0, at-40), min(len(s), at+40)
	return s[lo:hi]
}

// tailFull renders the whole conversation and cuts it after the served
// turn: at the end-of-turn token that closes it (one per turn the path
// closed, plus the turn's own; see splice).
func (k *Continuity) tailFull(in template.Input, norm []json.RawMessage, turn *servedTurn) (string, eosToken, bool) {
	in.Messages = template.JoinMessages(norm)
	text, err := k.tmpl.Render(in)
	if err != nil {
		return "", eosToken{}, false
	}
	n := 0
	for _, id := range turn.ids {
		if k.isEOS(id) {
			n++
		}
	}
	if !turn.ended {
		n++
	}
	end, eos := k.nthEOS(text, n)
	if end < 0 {
		return "", eosToken{}, false
	}
	return text[end:], eos, true
}

// tailIncremental renders the short conversation (system message, the last
// user message up to the turn, the turn and what follows) and cuts it
// after the turn, whose end-of-turn token is the last of the short
// conversation's rendering up to the turn.
func (k *Continuity) tailIncremental(in template.Input, c *convo, hit int) (string, eosToken, error) {
	norm, msgs := c.norm, c.msgs
	u := hit
	for u > 0 && msgs[u].Role != "user" {
		u--
	}
	short := make([]json.RawMessage, 0, len(norm)-u+1)
	if u > 0 && msgs[0].Role == "system" {
		short = append(short, norm[0])
	}
	short = append(short, norm[u:]...)
	at := len(short) - (len(norm) - hit) // the turn in short

	n, err := k.headEOS(in, c.seed, short[:at+1], shape(msgs, u, hit))
	if err != nil {
		return "", eosToken{}, err
	}
	in.Messages = template.JoinMessages(short)
	text, err := k.tmpl.Render(in)
	if err != nil {
		return "", eosToken{}, fmt.Errorf("render from the turn: %w", err)
	}
	end, eos := k.nthEOS(text, n)
	if n == 0 || end < 0 {
		return "", eosToken{}, fmt.Errorf("the short rendering closes %d turns up to the served one, the whole has fewer", n)
	}
	return text[end:], eos, nil
}

// headEOS is the number of end-of-turn tokens in the rendering of head
// (the short conversation up to the served turn, no generation prompt). A
// template closes turns by the kind of each message, not by its text, so
// the count is kept per shape (roles and which parts are empty) and head is
// rendered once per shape.
func (k *Continuity) headEOS(in template.Input, seed prefixHash, head []json.RawMessage, shape string) (int, error) {
	key := string(seed[:]) + shape
	if n, ok := k.inc.heads.Get(key); ok {
		return n, nil
	}
	in.Messages, in.AddGenerationPrompt, in.ContinueFinalMessage = template.JoinMessages(head), false, false
	text, err := k.tmpl.Render(in)
	if err != nil {
		return 0, fmt.Errorf("render up to the turn: %w", err)
	}
	n := k.countEOS(text)
	k.inc.heads.Add(key, n)
	return n, nil
}

// shape describes the short conversation up to the turn msgs[hit] (from
// msgs[u], after the system message if there is one) by what decides how
// a template closes turns: each message's role, name and which of
// content, reasoning and tool calls it has.
func shape(msgs []normMsg, u, hit int) string {
	b := make([]byte, 0, 16*(hit-u+2))
	add := func(m *normMsg) {
		b = append(b, m.Role...)
		b = append(b, 0)
		if m.Name != nil {
			b = append(b, *m.Name...)
		}
		b = append(b, 0, flag(m.Content != ""), flag(len(m.ToolCalls) > 0), flag(len(m.Reasoning) > 0 && string(m.Reasoning) != "null"), byte(len(m.ToolCalls)))
	}
	if u > 0 && msgs[0].Role == "system" {
		add(&msgs[0])
	}
	for i := u; i <= hit; i++ {
		add(&msgs[i])
	}
	return string(b)
}

func flag(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// countEOS counts the end-of-turn tokens in text.
func (k *Continuity) countEOS(text string) int {
	n := 0
	for end, _ := k.nthEOS(text, 1); end >= 0; end, _ = k.nthEOS(text, 1) {
		n++
		text = text[end:]
	}
	return n
}

// selfCheck renders tool-using conversations with reasoning both ways for
// every assistant turn and reports the first difference. A conversation
// the template refuses as a whole (Llama 3.x raises on parallel tool
// calls) is skipped; at least one must render.
func (k *Continuity) selfCheck() error {
	checked := 0
	for _, conv := range selfCheckConversations {
		var raws []json.RawMessage
		if err := json.Unmarshal([]byte(conv), &raws); err != nil {
			return err
		}
		req := template.Request{Input: template.Input{AddGenerationPrompt: true, Tools: json.RawMessage(selfCheckTools)}, Raw: raws}
		c, err := k.conversation("", req)
		if err != nil {
			return err
		}
		full := req.Input
		full.Messages = template.JoinMessages(c.norm)
		if _, err := k.tmpl.Render(full); err != nil {
			continue
		}
		checked++
		if err := k.selfCheckConversation(req.Input, c); err != nil {
			return err
		}
	}
	if checked == 0 {
		return errors.New("self-check: the template renders none of the conversations")
	}
	return nil
}

func (k *Continuity) selfCheckConversation(in template.Input, c *convo) error {
	for hit, m := range c.msgs {
		if m.Role != "assistant" {
			continue
		}
		upTo := in
		upTo.Messages, upTo.AddGenerationPrompt = template.JoinMessages(c.norm[:hit+1]), false
		head, err := k.tmpl.Render(upTo)
		if err != nil {
			return fmt.Errorf("self-check: %w", err)
		}
		// the path up to the turn closes as many turns as the rendering up to it
		turn := &servedTurn{ids: make([]int32, k.countEOS(head)), ended: true}
		for i := range turn.ids {
			turn.ids[i] = k.eos[0].id
		}
		full, _, ok := k.tailFull(in, c.norm, turn)
		tail, _, err := k.tailIncremental(in, c, hit)
		switch {
		case err != nil:
			return fmt.Errorf("self-check, turn %d: %w", hit, err)
		case !ok || full != tail:
			return fmt.Errorf("self-check, turn %d: incremental %q, full %q", hit, trimTo(tail, 200), trimTo(full, 200))
		}
	}
	return nil
}

func trimTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// The self-check's conversations: a system prompt, tool calls and results
// (parallel calls with two results in a row, or one call at a time, ending
// in a tool loop), reasoning before and after the last user query; tool
// call ids of 9 characters (Mistral's templates require them).
const selfCheckTools = `[{"type":"function","function":{"name":"calculator","description":"Evaluates an expression.","parameters":{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}}}]`

var selfCheckConversations = []string{`[
{"role":"system","content":"You are a calculator agent."},
{"role":"user","content":"What is 17 * 23?"},
{"role":"assistant","content":"","reasoning_content":"Use the tool.","tool_calls":[{"id":"call0000a","type":"function","function":{"name":"calculator","arguments":"{\"expression\": \"17 * 23\"}"}}]},
{"role":"tool","tool_call_id":"call0000a","content":"391"},
{"role":"assistant","content":"It is 391.","reasoning_content":"The tool said 391."},
{"role":"user","content":"And 391 + 9, then doubled?"},
{"role":"assistant","content":"Two steps.","tool_calls":[{"id":"call0000b","type":"function","function":{"name":"calculator","arguments":"{\"expression\": \"391 + 9\"}"}},{"id":"call0000c","type":"function","function":{"name":"calculator","arguments":"{\"expression\": \"400 * 2\"}"}}]},
{"role":"tool","tool_call_id":"call0000b","content":"400"},
{"role":"tool","tool_call_id":"call0000c","content":"800"},
{"role":"assistant","content":"<think>Both done.</think>400, then 800."},
{"role":"user","content":"Thanks."}
]`, `[
{"role":"system","content":"You are a calculator agent."},
{"role":"user","content":"What is 17 * 23?"},
{"role":"assistant","content":"","reasoning_content":"Use the tool.","tool_calls":[{"id":"call0000a","type":"function","function":{"name":"calculator","arguments":"{\"expression\": \"17 * 23\"}"}}]},
{"role":"tool","tool_call_id":"call0000a","content":"391"},
{"role":"assistant","content":"It is 391.","reasoning_content":"The tool said 391."},
{"role":"user","content":"And 391 + 9?"},
{"role":"assistant","content":"","tool_calls":[{"id":"call0000b","type":"function","function":{"name":"calculator","arguments":"{\"expression\": \"391 + 9\"}"}}]},
{"role":"tool","tool_call_id":"call0000b","content":"400"},
{"role":"assistant","content":"","reasoning_content":"Now double it.","tool_calls":[{"id":"call0000c","type":"function","function":{"name":"calculator","arguments":"{\"expression\": \"400 * 2\"}"}}]},
{"role":"tool","tool_call_id":"call0000c","content":"800"}
]`}
