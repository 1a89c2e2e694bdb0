package proxy

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
)

// Responses API tools as the engine can serve them. The engine speaks chat
// completions, whose only tool is a function, so:
//
//   - function tools pass as they are;
//   - namespace tools (a named group of function and custom tools, e.g.
//     Codex's multi_agent_v1 or its MCP servers) are flattened into function
//     tools named <namespace>__<name> (Codex's own flat spelling: trailing
//     underscores of the namespace and leading ones of the name trimmed), and
//     the engine's calls of those names come back as function_call (or
//     custom_tool_call) items with the namespace and name the client declared;
//   - custom (free-form) tools become a function taking one string argument,
//     "input" (the tool's grammar, when it has one, is told in the
//     description), and the engine's calls come back as custom_tool_call
//     items with that input;
//   - a tool_search tool the client runs (execution "client": Codex's
//     search over its deferred tools) becomes a function named tool_search,
//     its calls tool_search_call items; the tools a tool_search_output
//     loads are told to the engine in that output's tool message (their
//     function definitions), so the conversation only grows and stays one
//     trajectory, and the engine's calls of them map back like the others;
//   - tools that OpenAI's servers run (web search, file search, code
//     interpreter, image generation, remote MCP, server tool search) or whose calls
//     are items hone does not translate (computer use, local_shell, shell,
//     apply_patch) are left out of what the engine sees, and the answer says
//     so in X-Hone-Warning;
//   - a tool type hone does not know at all is refused (400 naming it).
//
// The flat names are a pure function of what the client declared, so the
// same tool has the same engine name on every turn, and a namespaced call in
// the input (function_call with namespace) maps to it without state. A flat
// name longer than 64 characters (the limit of OpenAI-style tool names that
// some engines and parsers enforce) is folded into its first 47 characters,
// "_" and a 16-digit hash, as Codex's own chat adapter does.

// respLeftOut are the Responses tool types the engine cannot serve: run by
// OpenAI (hosted) or answered with call items hone does not translate.
var respLeftOut = map[string]bool{
	"web_search": true, "web_search_2025_08_26": true, "web_search_preview": true,
	"web_search_preview_2025_03_11": true, "file_search": true, "code_interpreter": true,
	"image_generation": true, "mcp": true, "tool_search": true, "programmatic_tool_calling": true,
	"computer": true, "computer_use": true, "computer_use_preview": true, "local_shell": true,
	"shell": true, "apply_patch": true,
}

// respSkippedItems are input item types that belong to left-out tools (or
// to OpenAI's own server state): they are left out of the engine's
// conversation, with a warning, instead of failing the request.
var respSkippedItems = map[string]bool{
	"web_search_call": true, "file_search_call": true, "computer_call": true, "computer_call_output": true,
	"code_interpreter_call": true, "image_generation_call": true, "local_shell_call": true,
	"local_shell_call_output": true, "shell_call": true, "shell_call_output": true, "apply_patch_call": true,
	"apply_patch_call_output": true, "mcp_list_tools": true, "mcp_approval_request": true,
	"mcp_approval_response": true, "mcp_call": true,
	"compaction": true, "compaction_trigger": true, "program": true, "program_output": true,
	"configuration_update": true,
}

// clientTool is a tool as the client declared it.
type clientTool struct {
	namespace string // "" for a top-level tool
	name      string
	kind      string // function, custom (called with a string input) or tool_search
}

// callItem is the output item type of a call of the tool.
func (c clientTool) callItem() string {
	switch c.kind {
	case "custom":
		return "custom_tool_call"
	case "tool_search":
		return "tool_search_call"
	}
	return "function_call"
}

// maxToolName is the longest tool name OpenAI-style APIs take.
const maxToolName = 64

// flatToolName is the engine's name of a namespaced tool: Codex's
// canonical flat name, <namespace>__<name>, with the namespace's trailing
// and the name's leading underscores trimmed; folded when too long.
func flatToolName(namespace, name string) string {
	flat := name
	if namespace != "" {
		flat = strings.TrimRight(namespace, "_") + "__" + strings.TrimLeft(name, "_")
	}
	if len(flat) <= maxToolName {
		return flat
	}
	return flat[:maxToolName-17] + "_" + strconv.FormatUint(xxhash.Sum64String(flat)|1<<63, 16)
}

// engineTool is one function tool of the engine's request.
type engineTool struct {
	name string
	raw  json.RawMessage
}

// respToolSet is a request's tools as the engine sees them and the way back.
type respToolSet struct {
	chat     []engineTool
	byEngine map[string]clientTool // engine function name -> the client's tool
	leftOut  []string              // tool types left out, in request order
	loading  bool                  // adding the tools of a tool_search_output
	loaded   []json.RawMessage     // their function definitions
}

func newRespToolSet() *respToolSet {
	return &respToolSet{byEngine: map[string]clientTool{}}
}

// addList adds a list of tools (the request's tools, or an additional_tools
// item's). where names it in errors.
func (ts *respToolSet) addList(tools gjson.Result, where string) *apiError {
	if !tools.Exists() || tools.Type == gjson.Null {
		return nil
	}
	if !tools.IsArray() {
		return badResponses(where, where+" must be a list")
	}
	var err *apiError
	tools.ForEach(func(_, t gjson.Result) bool {
		err = ts.add(t, where)
		return err == nil
	})
	return err
}

func (ts *respToolSet) add(t gjson.Result, where string) *apiError {
	if !t.IsObject() {
		return badResponses(where, "every tool must be an object")
	}
	switch typ := t.Get("type").String(); {
	case typ == "function" || typ == "custom":
		return ts.addFunction(t, "")
	case typ == "tool_search" && t.Get("execution").String() == "client":
		return ts.addFunction(t, "")
	case typ == "namespace":
		ns := t.Get("name").String()
		if ns == "" {
			return badResponses(where, "a namespace tool needs a name")
		}
		children := t.Get("tools")
		if !children.IsArray() {
			return badResponses(where, "namespace tool '"+ns+"' needs a list of tools")
		}
		var err *apiError
		children.ForEach(func(_, c gjson.Result) bool {
			switch ct := c.Get("type").String(); ct {
			case "function", "custom":
				err = ts.addFunction(c, ns)
			default:
				err = badResponses(where, "namespace tool '"+ns+"' holds a tool of type '"+ct+
					"' (a namespace holds function and custom tools)")
			}
			return err == nil
		})
		return err
	case respLeftOut[typ]:
		ts.leftOut = append(ts.leftOut, typ)
		return nil
	default:
		return badResponses(where, "tool type '"+typ+"' is not supported by hone")
	}
}

// customParams is the engine's parameters of a custom tool.
var customParams = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string",` +
	`"description":"The tool's whole input, as free-form text."}},"required":["input"],"additionalProperties":false}`)

// addFunction adds a function or custom tool, in namespace ns or at the top.
func (ts *respToolSet) addFunction(t gjson.Result, ns string) *apiError {
	name := t.Get("name").String()
	if t.Get("type").String() == "tool_search" {
		name = "tool_search"
	}
	if name == "" {
		return badResponses("tools", "a "+t.Get("type").String()+" tool needs a name")
	}
	ct := clientTool{namespace: ns, name: name, kind: t.Get("type").String()}
	flat := flatToolName(ns, name)
	if prev, dup := ts.byEngine[flat]; dup {
		if prev == ct {
			return nil // the same tool again (loaded again, or given again in additional_tools)
		}
		return badResponses("tools", "tools '"+prev.display()+"' and '"+ct.display()+
			"' have the same function name '"+flat+"' for the engine")
	}
	fn := map[string]any{"name": flat}
	desc := ""
	if d := t.Get("description"); d.Type == gjson.String {
		desc = d.String()
	}
	if ct.kind == "custom" {
		fn["parameters"] = customParams
		if f := t.Get("format"); f.Get("type").String() == "grammar" && f.Get("definition").String() != "" {
			desc = strings.TrimSpace(desc + "\n\nThe input must follow this " + f.Get("syntax").String() +
				" grammar:\n" + f.Get("definition").String())
		}
	} else {
		fn["parameters"] = json.RawMessage(rawOr(t.Get("parameters"), "{}"))
		if p := t.Get("parameters"); p.Type == gjson.Null {
			fn["parameters"] = json.RawMessage("{}")
		}
	}
	if desc != "" {
		fn["description"] = desc
	}
	b, _ := json.Marshal(map[string]any{"type": "function", "function": fn})
	ts.byEngine[flat] = ct
	if ts.loading {
		ts.loaded = append(ts.loaded, b)
	} else {
		ts.chat = append(ts.chat, engineTool{name: flat, raw: b})
	}
	return nil
}

// load takes the tools a tool_search_output loaded: they map back like
// the request's tools, and their function definitions are returned for
// the output's tool message instead of joining the engine's tools.
func (ts *respToolSet) load(tools gjson.Result) (json.RawMessage, *apiError) {
	ts.loading, ts.loaded = true, nil
	defer func() { ts.loading = false }()
	if err := ts.addList(tools, "input"); err != nil {
		return nil, err
	}
	if len(ts.loaded) == 0 {
		return json.RawMessage("[]"), nil
	}
	b, _ := json.Marshal(ts.loaded)
	return b, nil
}

// display is the tool's name as the client knows it (namespace.name).
func (c clientTool) display() string {
	if c.namespace == "" {
		return c.name
	}
	return c.namespace + "." + c.name
}

// lookup is the client's tool of an engine function name; a name the
// client never declared comes back as a plain function of that name.
func (ts *respToolSet) lookup(engineName string) clientTool {
	if ts != nil {
		if ct, ok := ts.byEngine[engineName]; ok {
			return ct
		}
	}
	return clientTool{name: engineName}
}

// engineName finds the engine name of a function (custom: a custom tool)
// the client names in tool_choice: a top-level tool of that name, else the
// one namespaced tool of that name.
func (ts *respToolSet) engineName(name string, custom bool) (string, bool) {
	if ct, ok := ts.byEngine[name]; ok && (ct.kind == "custom") == custom {
		return name, true // the engine name itself (a top-level name, or namespace__name)
	}
	found := ""
	for flat, ct := range ts.byEngine {
		if ct.name == name && (ct.kind == "custom") == custom {
			if found != "" {
				return "", false // ambiguous
			}
			found = flat
		}
	}
	return found, found != ""
}

// choice maps tool_choice onto the engine's: auto, none, required, a named
// function or custom tool (its engine name), allowed_tools (the engine is
// offered only the allowed tools, with mode auto or required). A choice of
// a left-out tool falls back to auto with a warning. keep says which engine
// tools remain offered (nil: all).
func (ts *respToolSet) choice(tc gjson.Result) (v any, keep map[string]bool, warn string, err *apiError) {
	bad := badResponses("tool_choice", "tool_choice must be auto, none, required, a function, a custom tool "+
		"or allowed_tools")
	if tc.Type == gjson.String {
		switch tc.String() {
		case "auto", "none", "required":
			return tc.String(), nil, "", nil
		}
		return nil, nil, "", bad
	}
	if !tc.IsObject() {
		return nil, nil, "", bad
	}
	named := func(name string, custom bool) (any, map[string]bool, string, *apiError) {
		flat, ok := ts.engineName(name, custom)
		if !ok {
			return nil, nil, "", badResponses("tool_choice", "tool_choice names '"+name+"', which is not among the tools")
		}
		return map[string]any{"type": "function", "function": map[string]any{"name": flat}}, nil, "", nil
	}
	switch typ := tc.Get("type").String(); {
	case typ == "function" && tc.Get("name").String() != "":
		name := tc.Get("name").String()
		if ns := tc.Get("namespace").String(); ns != "" {
			name = flatToolName(ns, name)
		}
		return named(name, false)
	case typ == "custom" && tc.Get("name").String() != "":
		return named(tc.Get("name").String(), true)
	case typ == "allowed_tools":
		mode := tc.Get("mode").String()
		if mode != "auto" && mode != "required" {
			return nil, nil, "", badResponses("tool_choice", "allowed_tools mode must be auto or required")
		}
		keep = map[string]bool{}
		tc.Get("tools").ForEach(func(_, t gjson.Result) bool {
			name := t.Get("name").String()
			switch t.Get("type").String() {
			case "function", "custom":
				if flat, ok := ts.engineName(name, t.Get("type").String() == "custom"); ok {
					keep[flat] = true
				}
			case "namespace":
				for flat, ct := range ts.byEngine {
					if ct.namespace == name {
						keep[flat] = true
					}
				}
			}
			return true
		})
		return mode, keep, "", nil
	case respLeftOut[typ]:
		return "auto", nil, "tool_choice '" + typ + "' names a tool left out of the engine's tools; auto used", nil
	}
	return nil, nil, "", bad
}

// leftOutWarning is the X-Hone-Warning for the left-out tool types.
func leftOutWarning(types []string) string {
	if len(types) == 0 {
		return ""
	}
	seen := map[string]bool{}
	var uniq []string
	for _, t := range types {
		if !seen[t] {
			seen[t] = true
			uniq = append(uniq, t)
		}
	}
	return "tools left out (hone cannot offer them to the engine): " + strings.Join(uniq, ", ")
}

// skippedWarning is the X-Hone-Warning for input items left out, by type.
func skippedWarning(counts map[string]int) string {
	if len(counts) == 0 {
		return ""
	}
	types := make([]string, 0, len(counts))
	for t := range counts {
		types = append(types, t)
	}
	sort.Strings(types)
	return "input items left out (their tools are not the engine's): " + strings.Join(types, ", ")
}

// customInput is a custom tool call's input from the engine's arguments:
// the "input" string of the arguments object; arguments that are not such
// an object are the model's own text and pass as they are.
func customInput(args string) string {
	a := gjson.Parse(args)
	if in := a.Get("input"); a.IsObject() && in.Type == gjson.String {
		return in.String()
	}
	if a.Type == gjson.String && jsonwalk.Valid(args) {
		return a.String()
	}
	return args
}

// customArguments is the engine's arguments of a custom tool call with input.
func customArguments(input string) string {
	return string(marshalUnescaped(map[string]string{"input": input}))
}
