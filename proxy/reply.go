package proxy

import (
	"bytes"
	"encoding/json"

	"github.com/valyala/fasthttp"
)

// reply is how an engine's answer reaches the agent, one type per kind of
// agent API: native (the engine's own API: its answer as sent, less what
// hone injected) and translated (re-encoded into the agent's API by the
// surface's encoder). Every call holds one; the handlers never ask which.
type reply interface {
	// whole returns the agent's body of a whole answer: body is the
	// engine's (already accumulated when captured), which it leaves as it
	// is; scratch is a buffer it may build the answer in.
	whole(ctx *fasthttp.RequestCtx, c *call, body []byte, scratch *[]byte) []byte
	// event returns the agent's bytes for one SSE event of a stream (ev
	// whole, data its data field when isData), nil to send nothing.
	event(b *streamBody, ev, data []byte, isData bool) []byte
	// done returns the agent's bytes for the engine's data: [DONE].
	done(b *streamBody, ev []byte) []byte
	// broken returns the API's error event for a stream the engine broke;
	// nil cuts the stream after the events already sent.
	broken(msg string) []byte
	// namesModel reports whether the reply names the agent's model itself,
	// so an alias's engine model needs no renaming in the answer.
	namesModel() bool
	// warnings are the reply's X-Hone-Warning messages.
	warnings() []string
	// admitted says whether capture keeps the call's session, once the
	// call is admitted; what the reply keeps of the answer follows it.
	admitted(captured bool)
	// named gives the reply the call's id, once made, and returns the id
	// of the agent's answer when the reply makes its own ("" when the
	// engine's passes through): made from the call's, so that capture
	// finds the call by the id the agent saw (Trinity msg_ids).
	named(callID string) string
}

// native passes the engine's own API through.
type native struct{}

func (native) whole(_ *fasthttp.RequestCtx, c *call, body []byte, scratch *[]byte) []byte {
	if c.httpStatus < 400 && c.verdict.Capture && stripping(c.acc.injected, c.asked) {
		*scratch = stripInto((*scratch)[:0], body, c.acc.injected, c.asked)
		return *scratch
	}
	return body
}

func (native) event(b *streamBody, ev, data []byte, isData bool) []byte {
	c := b.c
	if !isData && len(b.held) > 0 && !b.sawDone {
		b.held = append(b.held, ev...) // a comment (a keep-alive ping) keeps its place behind the held chunks
		return nil
	}
	if !c.verdict.Capture || !isData || b.sawDone {
		return b.release(nil, ev)
	}
	c.acc.addChunk(data)
	if !c.asked.usage && c.acc.usageOnly {
		return b.release(data, nil) // the usage chunk hone asked for is dropped
	}
	out := ev
	if !c.asked.logprobs && !c.asked.tokenIDs && c.dialect.silentChunk(&c.acc) {
		out = nil // only what hone asked for: the agent would not have got it
	} else if stripping(c.acc.injected, c.asked) {
		b.out = stripInto(append(b.out[:0], "data: "...), data, c.acc.injected, c.asked)
		out = append(b.out, "\n\n"...)
	}
	if !c.asked.usage && (c.acc.finished || len(b.held) > 0) {
		b.held = append(b.held, out...)
		return nil
	}
	return b.release(nil, out)
}

func (native) done(b *streamBody, ev []byte) []byte { return b.release(nil, ev) }
func (native) broken(string) []byte                 { return nil }
func (native) namesModel() bool                     { return false }
func (native) warnings() []string                   { return nil }
func (native) admitted(bool)                        {}
func (native) named(string) string                  { return "" }

// translated re-encodes the engine's chat completions answer into the
// agent's API. What hone injected never reaches the agent: the encoder reads
// only what its API carries, so nothing is stripped first.
type translated struct{ enc encoder }

func (t translated) whole(ctx *fasthttp.RequestCtx, c *call, body []byte, _ *[]byte) []byte {
	ctx.SetContentType("application/json")
	return t.enc.body(body, c.httpStatus)
}

func (t translated) event(b *streamBody, _, data []byte, isData bool) []byte {
	if !isData || b.sawDone {
		return nil
	}
	if b.c.verdict.Capture {
		b.c.acc.addChunk(data)
	}
	return t.enc.event(data)
}

func (t translated) done(*streamBody, []byte) []byte { return t.enc.end() }
func (t translated) broken(msg string) []byte        { return t.enc.fail(msg) }
func (translated) namesModel() bool                  { return true }

func (t translated) admitted(captured bool) {
	if a, ok := t.enc.(interface{ admitted(bool) }); ok { // Responses: where its conversation is kept
		a.admitted(captured)
	}
}

func (t translated) named(callID string) string { return t.enc.named(callID) }

func (t translated) warnings() []string {
	if w, ok := t.enc.(interface{ warnings() []string }); ok { // tools the engine cannot run, left out
		return w.warnings()
	}
	return nil
}

// marshalUnescaped encodes v as the providers and Python's json write JSON:
// <, > and & raw, not escaped as Go's json.Marshal does for HTML. Answers to
// the agent use it (code and markup stay as the model wrote them), and so
// does text hone writes into a prompt, where an escape would reach the model
// as six characters.
func marshalUnescaped(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("{}") // only values hone builds reach here, all encodable; an object keeps callers' slicing safe
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
