package proxy

import (
	"encoding/json"
	"strings"

	"github.com/hone-rl/hone/model/chat"
)

// A streamed forced tool call in tokens mode: the constrained output
// (after any reasoning) becomes tool-call deltas as vLLM 0.32's chat stream
// makes them on its JSON tool-call path (vllm/tool_parsers/streaming.py):
// for a named function, the first step after reasoning announces the call
// (id, type, name) with the text so far as arguments and later steps carry
// the new text; for required, the text is scanned as a partial JSON array
// of {"name", "parameters"} objects, a call is announced once its name is
// complete and its parameters started (id, type, name, the parameters
// text so far), and later steps carry the new parameters text. Unlike the
// non-streamed answer, the streamed arguments are the parameters as the
// model wrote them, not re-serialised.

// forcedStream is one choice's streamed forced call.
type forcedStream struct {
	f    *forced
	id   func() string
	text string // the constrained output so far
	sent bool   // named: the call was announced
}

// push adds a step's text and returns the tool-call deltas to send.
func (s *forcedStream) push(delta string) []chat.ToolCallDelta {
	prev := s.text
	s.text += delta
	if s.f.named != "" {
		if s.sent {
			if delta == "" {
				return nil
			}
			return []chat.ToolCallDelta{{Arguments: delta}}
		}
		s.sent = true
		return []chat.ToolCallDelta{{ID: s.id(), Type: "function", Name: s.f.named, Arguments: delta}}
	}
	var out []chat.ToolCallDelta
	for i, sp := range scanRequired(s.text) {
		if !sp.ready() {
			break // elements come in order: nothing later can be ready
		}
		end := sp.argsEnd
		if end < 0 {
			end = len(s.text)
		}
		if sp.readyAt(len(prev)) {
			if from := min(end, len(prev)); from < end {
				out = append(out, chat.ToolCallDelta{Index: i, Arguments: s.text[from:end]})
			}
			continue
		}
		args := "" // a repeated "parameters" key can start past the first one's end: Python's slice is empty
		if sp.argsStart < end {
			args = s.text[sp.argsStart:end]
		}
		out = append(out, chat.ToolCallDelta{Index: i, ID: s.id(), Type: "function", Name: sp.name, Arguments: args})
	}
	return out
}

// requiredSpan is where one element of a required call's JSON array sits
// in the text; offsets are prefix-stable (scanning a prefix gives the same
// spans, cut), so one scan tells what a shorter text had revealed.
type requiredSpan struct {
	name               string
	named              bool // the name's string closed and decoded
	nameEnd            int
	argsStart, argsEnd int // argsEnd -1 while the parameters are open
}

func (sp *requiredSpan) ready() bool { return sp.named && sp.argsStart >= 0 }

// readyAt reports whether the first n bytes already made the call
// streamable.
func (sp *requiredSpan) readyAt(n int) bool {
	return sp.named && sp.nameEnd <= n && sp.argsStart >= 0 && sp.argsStart < n
}

// States of the scan inside one array element.
const (
	expectKey = iota
	expectColon
	expectValue
	inStringValue
	inContainerValue
	inScalarValue
	afterValue
)

// scanRequired locates the calls of a (possibly partial) required-call
// array: one string- and nesting-aware pass that reads only the element
// level, as vLLM's _scan_required_tool_calls does. Text after the array
// is ignored.
func scanRequired(text string) []requiredSpan {
	var spans []requiredSpan
	depth, inString, escaped := 0, false, false
	stringStart, valueStart, expect := 0, 0, expectKey
	key := ""
	cur := -1 // index of the element being read
	endValue := func(pos int) {
		sp := &spans[cur]
		switch {
		case key == "parameters":
			sp.argsEnd = pos
		case key == "name" && expect == inStringValue:
			var name string
			if json.Unmarshal([]byte(text[valueStart:pos]), &name) == nil {
				sp.name, sp.named, sp.nameEnd = name, true, pos
			} else {
				sp.named = false // never ready, as the non-streamed path rejects the array
			}
		}
		expect = afterValue
	}
	startValue := func(pos, state int) {
		valueStart = pos
		if key == "parameters" {
			spans[cur].argsStart = pos
		}
		expect = state
	}
	for i := 0; i < len(text); i++ {
		ch := text[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
				if depth == 2 && cur >= 0 {
					if expect == expectKey {
						key, expect = text[stringStart+1:i], expectColon
					} else if expect == inStringValue {
						endValue(i + 1)
					}
				}
			}
			continue
		}
		switch {
		case ch == '"':
			inString, stringStart = true, i
			if depth == 2 && cur >= 0 && expect == expectValue {
				startValue(i, inStringValue)
			}
		case ch == '{' || ch == '[':
			switch {
			case depth == 0 && ch != '[', depth == 1 && ch != '{':
				return spans
			case depth == 1:
				spans = append(spans, requiredSpan{argsStart: -1, argsEnd: -1})
				cur, expect, key = len(spans)-1, expectKey, ""
			case depth == 2 && cur >= 0 && expect == expectValue:
				startValue(i, inContainerValue)
			}
			depth++
		case ch == '}' || ch == ']':
			if depth == 2 && cur >= 0 && expect == inScalarValue {
				endValue(i)
			}
			depth--
			switch {
			case depth == 2 && cur >= 0 && expect == inContainerValue:
				endValue(i + 1)
			case depth == 1:
				cur = -1
			case depth <= 0:
				return spans
			}
		case depth != 2 || cur < 0:
		case ch == ':':
			if expect == expectColon {
				expect = expectValue
			}
		case ch == ',':
			if expect == inScalarValue {
				endValue(i)
			}
			expect, key = expectKey, ""
		case strings.IndexByte(" \t\n\r\v\f", ch) >= 0:
			if expect == inScalarValue {
				endValue(i)
			}
		case expect == expectValue:
			startValue(i, inScalarValue)
		}
	}
	return spans
}
