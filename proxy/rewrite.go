package proxy

import (
	"bytes"
	"encoding/json"
	"math/bits"
	"strconv"
	"strings"
	"unicode"
	"unsafe"

	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// asked is what the client asked for itself, so the response strip removes
// only what hone injected.
type asked struct {
	stream      bool
	logprobs    bool   // chat: logprobs true; completions: logprobs set to a number
	tokenIDs    bool   // return_token_ids
	usage       bool   // stream_options.include_usage
	tokensAsIDs bool   // return_tokens_as_token_ids
	cacheSalt   string // the agent's cache_salt, its raw JSON value
	has         present
	// dups has the bit (takenBit) of each key take reads that the body
	// holds more than once: take kept the last value, as vLLM's parser does.
	dups uint8
	// repeats: some top-level key (any, in the same spelling) appears more
	// than once. The engine reads the last; gjson, and so capture's and
	// the translations' readers, the first: handleCall keeps only the last
	// (lastOfEach) before anything reads the body.
	repeats bool
	// renamed is the model name the agent sent, as a JSON string, when hone
	// sent the engine another (a policy alias's adapter): the answer's
	// "model" says the agent's name again. Empty: nothing renamed.
	renamed []byte
}

// present notes which of the keys hone may set the request has at all (with
// any value), so that absent ones are appended instead of searched for.
type present struct {
	logprobs, tokenIDs, streamOptions, tokensAsIDs, cacheSalt bool
	model                                                     gjson.Result // the model value in the body (Index, Raw); valid in the handler only
}

// inspect reads, in one walk over a request body, the model and what the
// client asked for itself, and validates the body as it goes: ok is false
// unless it is valid JSON (as gjson.Valid has it) whose value is an object.
// The values it keeps are the few top-level ones below; the conversation is
// only walked over, once.
func inspect(body []byte, d dialect) (a asked, model string, ok bool) {
	if len(body) == 0 {
		return a, "", false
	}
	w := jsonwalk.New(unsafe.String(&body[0], len(body)))
	if w.At() != '{' {
		return a, "", false
	}
	var in inspection
	for key := range w.Members {
		if key = in.key(key); key == "" {
			w.Skip()
			continue
		}
		raw, at := w.Value()
		in.value(key, raw, at, d)
	}
	if w.Bad() || !w.End() {
		return asked{}, "", false
	}
	return in.a, in.model, true
}

// inspection is inspect's reading of a body, built member by member: by
// inspect's walk, or by marshalRequest as it writes a request (hone's
// translations), which so needs no walk of its own.
type inspection struct {
	a     asked
	model string
	seen  uint8 // takenBit of the keys read
	keys  keySet
}

// key notes a top-level member's key and returns the key of takenKeys it
// stands for ("": a value inspect skips).
func (in *inspection) key(key string) string {
	in.a.repeats = in.keys.add(key) || in.a.repeats
	bit := takenBit(key)
	if bit == 0 {
		if bit = foldedBit(key); bit == 0 {
			return ""
		}
		in.a.dups |= bit // another spelling, as Go's encoding/json matches it: normalised by lastOnly
		key = takenKeys[bits.TrailingZeros8(bit)]
	}
	if in.seen&bit != 0 {
		in.a.dups |= bit
	}
	in.seen |= bit
	return key
}

// value takes the value of a key of takenKeys: raw, at offset at in the
// body.
func (in *inspection) value(key, raw string, at int, d dialect) {
	v := gjson.Parse(raw)
	v.Index = at
	if key == "model" {
		in.model = v.String()
	}
	in.a.take(key, v, d)
}

// takenKeys are the top-level keys take reads, in the order of their
// takenBit.
var takenKeys = [...]string{"model", "stream", "logprobs", "return_token_ids", "stream_options", "return_tokens_as_token_ids", "cache_salt"}

// takenBit is the bit of a key take reads, 0 for any other.
func takenBit(key string) uint8 {
	switch key {
	case "model":
		return 1 << 0
	case "stream":
		return 1 << 1
	case "logprobs":
		return 1 << 2
	case "return_token_ids":
		return 1 << 3
	case "stream_options":
		return 1 << 4
	case "return_tokens_as_token_ids":
		return 1 << 5
	case "cache_salt":
		return 1 << 6
	}
	return 0
}

// take notes a top-level request field the call needs (a key of takenKeys).
func (a *asked) take(key string, v gjson.Result, d dialect) {
	switch key {
	case "model":
		a.has.model = v
	case "stream":
		a.stream = v.Bool()
	case "logprobs":
		a.has.logprobs, a.logprobs = true, d.askedLogprobs(v)
	case "return_token_ids":
		a.tokenIDs, a.has.tokenIDs = v.Bool(), true
	case "stream_options":
		a.usage, a.has.streamOptions = v.Get("include_usage").Bool(), true
	case "return_tokens_as_token_ids":
		a.tokensAsIDs, a.has.tokensAsIDs = v.Bool(), true
	case "cache_salt":
		a.cacheSalt, a.has.cacheSalt = v.Raw, true
	}
}

// rewriteRequest returns the body to send upstream for a captured call: the
// model replaced by the policy target, and logprobs, token ids and the usage
// chunk requested; with salt (the client key's, cachesalt.go) cache_salt is
// set to it, or to it hashed with the agent's own. The client's own values
// (top_logprobs, ...) are kept.
// The common case is one copy of the body: the model value is replaced where
// inspect found it and the fields the request lacks are appended before its
// closing brace; sjson, which walks the whole body (agent requests carry long
// histories) for every field, only replaces values that are already there.
func rewriteRequest(body []byte, d dialect, a asked, model, tokenMode, target string, capture bool, salt string) ([]byte, error) {
	if a.dups != 0 {
		// a key hone reads appears twice or spelled another way: sjson
		// would set the first, exact spelling, and the engine would read
		// the last (the agent's) value
		body = lastOnly(body, a.dups)
		fresh, _, _ := inspect(body, d)
		a.has = fresh.has // the values are the same; their positions moved
	}
	var add []string // absent top-level fields, as raw JSON members
	var set []field  // present ones with another value
	if capture {
		add, set = captureFields(a, d, tokenMode)
	}
	switch {
	case salt == "":
	case a.has.cacheSalt:
		set = append(set, field{"cache_salt", agentSalt(salt, a.cacheSalt)})
	default:
		add = append(add, `"cache_salt":"`+salt+`"`) // hex digits: nothing to escape
	}
	newModel, old := "", a.has.model
	if target != "" && model != target {
		newModel = target
	}
	if newModel != "" && !(old.Index > 0 && old.Index+len(old.Raw) <= len(body) && string(body[old.Index:old.Index+len(old.Raw)]) == old.Raw) {
		set = append(set, field{"model", newModel}) // not located by inspect (or absent): sjson finds or adds it
		newModel = ""
	}
	out := body
	if newModel != "" || len(add) > 0 {
		out = spliceRequest(body, old, newModel, add)
	}
	var err error
	for _, f := range set {
		if out, err = sjson.SetBytes(out, f.path, f.v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// captureFields lists what a captured call asks for that the client did not:
// absent fields as raw members to append, present ones as values to set.
func captureFields(a asked, d dialect, tokenMode string) (add []string, set []field) {
	put := func(has bool, key string, v any, raw string) {
		if has {
			set = append(set, field{key, v})
		} else {
			add = append(add, raw)
		}
	}
	if !a.logprobs {
		v, raw := d.logprobsField()
		put(a.has.logprobs, "logprobs", v, raw)
	}
	switch tokenMode {
	case "auto", "native":
		if !a.tokenIDs {
			put(a.has.tokenIDs, "return_token_ids", true, `"return_token_ids":true`)
		}
	case "tokenize":
		if !a.logprobs && !a.tokensAsIDs {
			put(a.has.tokensAsIDs, "return_tokens_as_token_ids", true, `"return_tokens_as_token_ids":true`)
		}
	}
	if a.stream && !a.usage {
		put(a.has.streamOptions, "stream_options.include_usage", true, `"stream_options":{"include_usage":true}`)
	}
	return add, set
}

// foldedBit is the bit of a key take reads spelled another way that Go's
// encoding/json (hone's embedded engine) still takes for it ("CACHE_SALT",
// "Model"), 0 for any other key.
func foldedBit(key string) uint8 {
	plain := true
	for i := 0; i < len(key); i++ {
		if c := key[i]; c >= 0x80 || 'A' <= c && c <= 'Z' {
			plain = false
			break
		}
	}
	if plain { // lower-case ASCII folds only to itself
		return 0
	}
	for i, k := range takenKeys {
		if strings.EqualFold(key, k) {
			return 1 << i
		}
	}
	return 0
}

// lastOnly returns a copy of the object body without the earlier members of
// each key in dups (takenBit bits), in any spelling encoding/json matches:
// the last, the one engines read, stays, under the key's own name.
func lastOnly(body []byte, dups uint8) []byte {
	return lastMembers(body, func(key string) string {
		b := takenBit(key)
		if b == 0 {
			b = foldedBit(key)
		}
		if b&dups == 0 {
			return key
		}
		return takenKeys[bits.TrailingZeros8(b&dups)]
	})
}

// lastOfEach returns a copy of the object body with only the last member of
// each key it repeats: the one vLLM (Python's json) and Go's encoding/json
// keep.
func lastOfEach(body []byte) []byte {
	return lastMembers(body, func(key string) string { return key })
}

// lastMembers copies the object body keeping, of the members whose keys
// name maps to the same name, only the last, under that name.
func lastMembers(body []byte, name func(key string) string) []byte {
	doc := gjson.ParseBytes(body)
	last := map[string]int{} // each name's last member
	i := 0
	doc.ForEach(func(k, _ gjson.Result) bool {
		last[name(k.Str)] = i
		i++
		return true
	})
	out := make([]byte, 0, len(body))
	out = append(out, '{')
	i = 0
	doc.ForEach(func(k, v gjson.Result) bool {
		n := name(k.Str)
		if last[n] == i {
			if len(out) > 1 {
				out = append(out, ',')
			}
			if n == k.Str {
				out = append(out, k.Raw...)
			} else {
				out = strconv.AppendQuote(out, n)
			}
			out = append(out, ':')
			out = append(out, v.Raw...)
		}
		i++
		return true
	})
	return append(out, '}')
}

// keySet finds a repeated top-level key: an agent's object has a handful,
// compared in place; past len(few) a map takes them.
type keySet struct {
	few  [16]string
	n    int
	many map[string]struct{}
}

// add notes key and reports whether it was there already.
func (k *keySet) add(key string) bool {
	if k.many == nil {
		for _, s := range k.few[:k.n] {
			if s == key {
				return true
			}
		}
		if k.n < len(k.few) {
			k.few[k.n] = key
			k.n++
			return false
		}
		k.many = make(map[string]struct{}, 2*len(k.few))
		for _, s := range k.few {
			k.many[s] = struct{}{}
		}
	}
	if _, ok := k.many[key]; ok {
		return true
	}
	k.many[key] = struct{}{}
	return false
}

type field struct {
	path string
	v    any
}

// spliceRequest copies body once, with the model value where inspect found
// it (old) replaced by newModel when that is not empty, and members appended
// before the closing brace.
func spliceRequest(body []byte, old gjson.Result, newModel string, members []string) []byte {
	out := make([]byte, 0, len(body)+len(newModel)+64)
	rest := body
	if newModel != "" {
		quoted, _ := json.Marshal(newModel)
		out = append(out, body[:old.Index]...)
		out = append(out, quoted...)
		rest = body[old.Index+len(old.Raw):]
	}
	if len(members) == 0 {
		return append(out, rest...)
	}
	return appendMembers(out, rest, members)
}

// appendMembers appends to out the tail of a JSON object with raw members
// added before its closing brace; out holds what came before tail (the
// object's opening brace is in out or tail). The object must be valid
// (handleCall checked it).
func appendMembers(out, tail []byte, members []string) []byte {
	end := bytes.LastIndexByte(tail, '}')
	out = append(out, tail[:end]...)
	prev := bytes.LastIndexFunc(out, func(r rune) bool { return !unicode.IsSpace(r) })
	for i, m := range members {
		if i > 0 || out[prev] != '{' {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	return append(out, tail[end:]...)
}
