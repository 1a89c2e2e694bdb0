package proxy

import (
	"strings"
	"testing"

	"github.com/hone-rl/hone/proxy/internal/sse"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// codexRequest is the shape of the Codex CLI's first request (0.171.0,
// trimmed): developer messages and no instructions, function tools, a
// namespace tool, a custom (free-form, grammar) tool, a hosted tool, and the
// fields only OpenAI's servers act on.
const codexRequest = `{"model":"m","stream":true,
 "input":[
  {"type":"message","id":"msg_a","role":"developer","content":[{"type":"input_text","text":"You are Codex."}]},
  {"type":"message","id":"msg_b","role":"developer","content":[{"type":"input_text","text":"<permissions/>"}]},
  {"type":"message","id":"msg_c","role":"user","content":[{"type":"input_text","text":"<environment_context/>"}]},
  {"type":"message","id":"msg_d","role":"user","content":[{"type":"input_text","text":"make a file"}]}],
 "tools":[
  {"type":"function","name":"exec_command","description":"Runs a command.","strict":false,
   "parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}},
  {"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[
   {"type":"function","name":"spawn_agent","description":"Spawn one.","strict":false,
    "parameters":{"type":"object","properties":{"task":{"type":"string"}}}},
   {"type":"function","name":"close_agent","parameters":{"type":"object","properties":{}}}]},
  {"type":"namespace","name":"mcp__files__","description":"An MCP server.","tools":[
   {"type":"function","name":"read","parameters":null}]},
  {"type":"custom","name":"apply_patch","description":"Edit files.",
   "format":{"type":"grammar","syntax":"lark","definition":"start: patch"}},
  {"type":"web_search","external_web_access":true}],
 "tool_choice":"auto","parallel_tool_calls":true,"reasoning":{"effort":"medium","summary":"auto"},"store":false,
 "include":["reasoning.encrypted_content"],"prompt_cache_key":"k","client_metadata":{"turn_id":"t"},
 "service_tier":"auto","text":{"verbosity":"low"}}`

func translateResponses(t *testing.T, body string) *translation {
	t.Helper()
	tr, err := responsesSurface{}.translate(testServer(), "", []byte(body))
	if err != nil {
		t.Fatalf("translate: %+v", err)
	}
	return tr
}

func warningsOf(tr *translation) []string {
	if w, ok := tr.enc.(interface{ warnings() []string }); ok {
		return w.warnings()
	}
	return nil
}

// TestResponsesCodexTools: Codex's tools reach the engine as function
// tools (namespaced ones flattened, the custom one taking an input string,
// its grammar in the description), the hosted one is left out with a
// warning, and the leading developer messages are one system message.
func TestResponsesCodexTools(t *testing.T) {
	tr := translateResponses(t, codexRequest)
	chat := gjson.ParseBytes(tr.body)
	var names []string
	chat.Get("tools").ForEach(func(_, tl gjson.Result) bool {
		if tl.Get("type").String() != "function" {
			t.Errorf("engine tool %s is not a function", tl.Raw)
		}
		names = append(names, tl.Get("function.name").String())
		return true
	})
	if got := strings.Join(names, ","); got != "exec_command,multi_agent_v1__spawn_agent,multi_agent_v1__close_agent,mcp__files__read,apply_patch" {
		t.Fatalf("engine tools %s", got)
	}
	patch := chat.Get(`tools.#(function.name=="apply_patch").function`)
	if patch.Get("parameters.properties.input.type").String() != "string" ||
		patch.Get("parameters.required.0").String() != "input" ||
		!strings.Contains(patch.Get("description").String(), "lark grammar:\nstart: patch") {
		t.Errorf("custom tool as the engine sees it: %s", patch.Raw)
	}
	if p := chat.Get(`tools.#(function.name=="mcp__files__read").function.parameters`); p.Raw != "{}" {
		t.Errorf("null parameters sent as %s", p.Raw)
	}
	if chat.Get("tool_choice").String() != "auto" || !chat.Get("parallel_tool_calls").Bool() {
		t.Errorf("tool_choice %s parallel_tool_calls %s", chat.Get("tool_choice").Raw, chat.Get("parallel_tool_calls").Raw)
	}
	for _, k := range []string{"include", "prompt_cache_key", "client_metadata", "service_tier", "store", "reasoning", "text"} {
		if chat.Get(k).Exists() {
			t.Errorf("%s sent to the engine", k)
		}
	}
	msgs := chat.Get("messages").Array()
	if len(msgs) != 3 || msgs[0].Get("role").String() != "system" ||
		msgs[0].Get("content").String() != "You are Codex.\n\n<permissions/>" || msgs[1].Get("role").String() != "user" {
		t.Errorf("messages %s", chat.Get("messages").Raw)
	}
	if w := warningsOf(tr); len(w) != 1 || w[0] != "tools left out (hone cannot offer them to the engine): web_search" {
		t.Errorf("warnings %q", w)
	}
}

// engineToolAnswer is a chat completion calling a namespaced tool and the
// custom tool (whole), and the same as a vLLM stream.
const engineToolAnswer = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,
 "message":{"role":"assistant","content":null,"tool_calls":[
  {"id":"call_1","type":"function","function":{"name":"multi_agent_v1__spawn_agent","arguments":"{\"task\": \"x\"}"}},
  {"id":"call_2","type":"function","function":{"name":"apply_patch","arguments":"{\"input\": \"*** Begin Patch\\n*** End Patch\"}"}},
  {"id":"call_3","type":"function","function":{"name":"mcp__files__read","arguments":"{}"}}]},
 "finish_reason":"tool_calls"}],
 "usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":4}}}`

var engineToolStream = strings.Join([]string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"multi_agent_v1__spawn_agent","arguments":""}}]},"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"task\": \"x\"}"}}]},"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"apply_patch","arguments":"{\"input\": \"*** Begin"}}]},"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":" Patch\\n*** End Patch\"}"}}]},"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"call_3","type":"function","function":{"name":"mcp__files__read","arguments":"{}"}}]},"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`,
	`[DONE]`}, "\n\n")

func sseOf(chunks string) []byte {
	var b strings.Builder
	for _, c := range strings.Split(chunks, "\n\n") {
		b.WriteString("data: " + c + "\n\n")
	}
	return []byte(b.String())
}

// checkToolItems: the namespaced call is a function_call under its
// namespace, the custom call a custom_tool_call with the input string.
func checkToolItems(t *testing.T, output gjson.Result) {
	t.Helper()
	items := output.Array()
	if len(items) != 3 {
		t.Fatalf("output %s", output.Raw)
	}
	fc, cc, mcp := items[0], items[1], items[2]
	if fc.Get("type").String() != "function_call" || fc.Get("namespace").String() != "multi_agent_v1" ||
		fc.Get("name").String() != "spawn_agent" || fc.Get("call_id").String() != "call_1" ||
		fc.Get("arguments").String() != `{"task": "x"}` || fc.Get("status").String() != "completed" {
		t.Errorf("namespaced call %s", fc.Raw)
	}
	if cc.Get("type").String() != "custom_tool_call" || cc.Get("name").String() != "apply_patch" ||
		cc.Get("input").String() != "*** Begin Patch\n*** End Patch" || cc.Get("call_id").String() != "call_2" ||
		cc.Get("namespace").Exists() || cc.Get("arguments").Exists() {
		t.Errorf("custom call %s", cc.Raw)
	}
	if mcp.Get("namespace").String() != "mcp__files__" || mcp.Get("name").String() != "read" {
		t.Errorf("MCP call %s", mcp.Raw)
	}
}

func TestResponsesNamespaceAndCustomCalls(t *testing.T) {
	tr := translateResponses(t, strings.Replace(codexRequest, `"stream":true,`, "", 1))
	resp := gjson.ParseBytes(tr.enc.body([]byte(engineToolAnswer), 200))
	checkToolItems(t, resp.Get("output"))
	if resp.Get("usage.input_tokens_details.cached_tokens").Int() != 4 || resp.Get("reasoning.effort").String() != "medium" {
		t.Errorf("usage %s reasoning %s", resp.Get("usage").Raw, resp.Get("reasoning").Raw)
	}

	tr = translateResponses(t, codexRequest)
	out := encodeStream(t, tr.enc, sseOf(engineToolStream))
	var done []string
	var customDeltas []string
	types := map[string]int{}
	for _, ev := range splitEvents(out) {
		data, _ := sse.Data(ev)
		d := gjson.ParseBytes(data)
		types[d.Get("type").String()]++
		switch d.Get("type").String() {
		case "response.output_item.done":
			done = append(done, d.Get("item").Raw)
		case "response.custom_tool_call_input.delta":
			customDeltas = append(customDeltas, d.Get("delta").String())
		case "response.custom_tool_call_input.done":
			if d.Get("input").String() != "*** Begin Patch\n*** End Patch" {
				t.Errorf("custom input done %s", data)
			}
		case "response.function_call_arguments.done":
			if n := d.Get("name").String(); n != "spawn_agent" && n != "read" {
				t.Errorf("arguments done names %q", n)
			}
		case "response.output_item.added":
			if it := d.Get("item"); it.Get("type").String() == "custom_tool_call" && it.Get("input").String() != "" {
				t.Errorf("custom item added with input %s", it.Raw)
			}
		case "response.completed":
			checkToolItems(t, d.Get("response.output"))
		}
	}
	checkToolItems(t, gjson.Parse("["+strings.Join(done, ",")+"]"))
	if strings.Join(customDeltas, "") != "*** Begin Patch\n*** End Patch" || types["response.function_call_arguments.delta"] != 2 {
		t.Errorf("custom deltas %q, %d function argument deltas", customDeltas, types["response.function_call_arguments.delta"])
	}
}

// TestResponsesCodexSecondTurn: the next request carries the calls back
// (function_call with namespace, custom_tool_call, reasoning with
// encrypted content) and their outputs; the engine sees its own calls again
// under the names it called and with the arguments it wrote, so the turn
// extends the first in the capture store.
func TestResponsesCodexSecondTurn(t *testing.T) {
	second := strings.Replace(codexRequest, `{"type":"message","id":"msg_d","role":"user","content":[{"type":"input_text","text":"make a file"}]}]`,
		`{"type":"message","id":"msg_d","role":"user","content":[{"type":"input_text","text":"make a file"}]},
  {"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"thinking"}],"encrypted_content":"gAAAA-opaque"},
  {"type":"function_call","id":"fc_1","call_id":"call_1","namespace":"multi_agent_v1","name":"spawn_agent","arguments":"{\"task\": \"x\"}"},
  {"type":"custom_tool_call","id":"ctc_1","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch\n*** End Patch"},
  {"type":"function_call","call_id":"call_3","namespace":"mcp__files__","name":"read","arguments":"{}"},
  {"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q"}},
  {"type":"function_call_output","call_id":"call_1","output":"agent-7"},
  {"type":"custom_tool_call_output","call_id":"call_2","output":[{"type":"input_text","text":"Done!"}]},
  {"type":"function_call_output","call_id":"call_3","output":"contents"},
  {"type":"message","role":"assistant","phase":"commentary","content":[{"type":"output_text","text":"ok"}]}]`, 1)
	tr := translateResponses(t, second)
	msgs := gjson.GetBytes(tr.body, "messages").Array()
	if len(msgs) != 8 {
		t.Fatalf("messages %s", gjson.GetBytes(tr.body, "messages").Raw)
	}
	a := msgs[3]
	if a.Get("role").String() != "assistant" || a.Get("reasoning_content").String() != "thinking" ||
		a.Get("tool_calls.#").Int() != 3 || a.Get("tool_calls.0.function.name").String() != "multi_agent_v1__spawn_agent" ||
		a.Get("tool_calls.1.function.name").String() != "apply_patch" ||
		a.Get("tool_calls.2.function.name").String() != "mcp__files__read" ||
		customInput(a.Get("tool_calls.1.function.arguments").String()) != "*** Begin Patch\n*** End Patch" {
		t.Fatalf("assistant turn %s", a.Raw)
	}
	if strings.Contains(string(tr.body), "gAAAA") || strings.Contains(string(tr.body), "web_search") {
		t.Errorf("encrypted reasoning or a hosted call reached the engine: %s", tr.body)
	}
	if msgs[5].Get("role").String() != "tool" || msgs[5].Get("tool_call_id").String() != "call_2" ||
		msgs[5].Get("content").String() != "Done!" || msgs[7].Get("content").String() != "ok" {
		t.Errorf("tool results %s %s", msgs[5].Raw, msgs[7].Raw)
	}
	// the engine's own calls, as the capture store compares them
	first := gjson.Parse(engineToolAnswer).Get("choices.0.message.tool_calls").Array()
	for i, tc := range a.Get("tool_calls").Array() {
		if tc.Get("function.name").String() != first[i].Get("function.name").String() ||
			canonJSON(tc.Get("function.arguments").String()) != canonJSON(first[i].Get("function.arguments").String()) {
			t.Errorf("call %d sent back as %s, the engine wrote %s", i, tc.Raw, first[i].Raw)
		}
	}
	w := warningsOf(tr)
	if len(w) != 2 || w[1] != "input items left out (their tools are not the engine's): web_search_call" {
		t.Errorf("warnings %q", w)
	}
}

// TestResponsesToolChoices maps each tool_choice form.
func TestResponsesToolChoices(t *testing.T) {
	base := strings.Replace(codexRequest, `"tool_choice":"auto"`, `"tool_choice":%s`, 1)
	for _, tc := range []struct{ choice, want, tools, warn string }{
		{`"required"`, `"required"`, "", ""},
		{`"none"`, `"none"`, "", ""},
		{`{"type":"function","name":"exec_command"}`, `{"function":{"name":"exec_command"},"type":"function"}`, "", ""},
		{`{"type":"function","name":"spawn_agent"}`, `{"function":{"name":"multi_agent_v1__spawn_agent"},"type":"function"}`, "", ""},
		{`{"type":"function","namespace":"multi_agent_v1","name":"close_agent"}`, `{"function":{"name":"multi_agent_v1__close_agent"},"type":"function"}`, "", ""},
		{`{"type":"custom","name":"apply_patch"}`, `{"function":{"name":"apply_patch"},"type":"function"}`, "", ""},
		{`{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"exec_command"},{"type":"namespace","name":"multi_agent_v1"},{"type":"web_search"}]}`,
			`"required"`, "exec_command,multi_agent_v1__spawn_agent,multi_agent_v1__close_agent", ""},
		{`{"type":"web_search_preview"}`, `"auto"`, "", "tool_choice 'web_search_preview' names a tool left out of the engine's tools; auto used"},
	} {
		tr := translateResponses(t, strings.Replace(base, "%s", tc.choice, 1))
		chat := gjson.ParseBytes(tr.body)
		if got := chat.Get("tool_choice").Raw; got != tc.want {
			t.Errorf("%s: engine tool_choice %s, want %s", tc.choice, got, tc.want)
		}
		if tc.tools != "" {
			var names []string
			for _, n := range chat.Get("tools.#.function.name").Array() {
				names = append(names, n.String())
			}
			if strings.Join(names, ",") != tc.tools {
				t.Errorf("%s: engine tools %v", tc.choice, names)
			}
		}
		if w := warningsOf(tr); tc.warn != "" && (len(w) != 2 || w[1] != tc.warn) {
			t.Errorf("%s: warnings %q", tc.choice, w)
		}
	}
	// only hosted tools: the engine gets no tools and no tool_choice
	tr := translateResponses(t, `{"model":"m","input":"hi","tools":[{"type":"file_search","vector_store_ids":["v"]}],"tool_choice":"required"}`)
	if c := gjson.ParseBytes(tr.body); c.Get("tools").Exists() || c.Get("tool_choice").Exists() {
		t.Errorf("engine request without tools %s", tr.body)
	}
}

// TestResponsesToolsRefused: only what hone cannot place is refused, and
// the error names it.
func TestResponsesToolsRefused(t *testing.T) {
	s := testServer()
	for body, want := range map[string]string{
		`{"model":"m","input":"hi","tools":[{"type":"teleport"}]}`:                                                                                        "tool type 'teleport'",
		`{"model":"m","input":"hi","tools":[{"type":"namespace","name":"n","tools":[{"type":"web_search"}]}]}`:                                            "type 'web_search'",
		`{"model":"m","input":"hi","tools":[{"type":"function","name":"a__b"},{"type":"namespace","name":"a","tools":[{"type":"function","name":"b"}]}]}`: "same function name 'a__b'",
		`{"model":"m","input":"hi","tools":[{"type":"custom"}]}`:                                                                                          "needs a name",
		`{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`:                                "'g', which is not among the tools",
		`{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"allowed_tools","mode":"maybe"}}`:                       "mode must be auto or required",
		`{"model":"m","input":[{"type":"teleport_call","id":"x"}]}`:                                                                                       "input item type 'teleport_call'",
	} {
		_, err := responsesSurface{}.translate(s, "", []byte(body))
		if err == nil || err.status != 400 || !strings.Contains(err.msg, want) {
			t.Errorf("%s: %+v, want a 400 saying %q", body, err, want)
		}
	}
}

// TestResponsesAdditionalTools: tools given in an additional_tools input
// item (Codex's code mode) are offered to the engine too.
func TestResponsesAdditionalTools(t *testing.T) {
	tr := translateResponses(t, `{"model":"m","input":[{"type":"additional_tools","role":"developer","tools":[
	 {"type":"custom","name":"exec"},{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f"}]},{"type":"image_generation"}]},
	 {"role":"user","content":"hi"}],"tools":[{"type":"function","name":"wait"}]}`)
	names := gjson.GetBytes(tr.body, "tools.#.function.name").Raw
	if names != `["wait","exec","ns__f"]` || gjson.GetBytes(tr.body, "messages.#").Int() != 1 {
		t.Errorf("engine tools %s, messages %s", names, gjson.GetBytes(tr.body, "messages").Raw)
	}
	if w := warningsOf(tr); len(w) != 1 || !strings.HasSuffix(w[0], "image_generation") {
		t.Errorf("warnings %q", w)
	}
}

// TestResponsesWarningHeader: what a translation left out is told to the
// agent in X-Hone-Warning, on the answer the engine served.
func TestResponsesWarningHeader(t *testing.T) {
	stub := newStub(t)
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBodyString(engineToolAnswer)
	}
	h := startHone(t, nil, stub)
	r := post(t, h.url, "/v1/responses", []byte(strings.Replace(codexRequest, `"stream":true,`, "", 1)), nil)
	if r.status != 200 {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	checkToolItems(t, gjson.GetBytes(r.body, "output"))
	got := r.header.Values(warningHeader)
	if len(got) == 0 {
		t.Fatal("no X-Hone-Warning for the tools left out")
	}
	if len(got) != 1 || got[0] != "tools left out (hone cannot offer them to the engine): web_search" {
		t.Fatalf("X-Hone-Warning %q", got)
	}
}

// TestResponsesToolSearch: Codex's client-run tool_search is a function;
// its call comes back as a tool_search_call item; the tools its output
// loads are told in the output's tool message (the engine's tools stay as
// they were, so the conversation only grows) and their calls map back.
func TestResponsesToolSearch(t *testing.T) {
	req := `{"model":"m","input":[{"role":"user","content":"spawn a helper"}%s],"tools":[
	 {"type":"function","name":"exec_command","parameters":{"type":"object"}},
	 {"type":"tool_search","execution":"client","description":"Search deferred tools.",
	  "parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}},
	 {"type":"tool_search"}]}`
	tr := translateResponses(t, strings.Replace(req, "%s", "", 1))
	if names := gjson.GetBytes(tr.body, "tools.#.function.name").Raw; names != `["exec_command","tool_search"]` {
		t.Fatalf("engine tools %s", names)
	}
	if w := warningsOf(tr); len(w) != 1 || !strings.HasSuffix(w[0], ": tool_search") {
		t.Errorf("warnings %q (the server-run tool_search is left out)", w)
	}
	answer := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant",
	 "content":null,"tool_calls":[{"id":"call_s","type":"function","function":{"name":"tool_search","arguments":"{\"query\": \"agents\"}"}}]},
	 "finish_reason":"tool_calls"}]}`
	item := gjson.GetBytes(tr.enc.body([]byte(answer), 200), "output.0")
	if item.Get("type").String() != "tool_search_call" || item.Get("execution").String() != "client" ||
		item.Get("call_id").String() != "call_s" || item.Get("arguments.query").String() != "agents" {
		t.Fatalf("tool search call %s", item.Raw)
	}
	tr = translateResponses(t, strings.Replace(req, "%s", `,
	 {"type":"tool_search_call","call_id":"call_s","execution":"client","arguments":{"query": "agents"},"status":"completed"},
	 {"type":"tool_search_output","call_id":"call_s","execution":"client","status":"completed","tools":[
	  {"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[
	   {"type":"function","name":"spawn_agent","parameters":{"type":"object","properties":{"task":{"type":"string"}}}}]}]}`, 1))
	chat := gjson.ParseBytes(tr.body)
	if names := chat.Get("tools.#.function.name").Raw; names != `["exec_command","tool_search"]` {
		t.Errorf("engine tools %s after a search", names)
	}
	call, out := chat.Get("messages.1"), chat.Get("messages.2")
	if call.Get("tool_calls.0.function.name").String() != "tool_search" ||
		canonJSON(call.Get("tool_calls.0.function.arguments").String()) != `{"query":"agents"}` ||
		out.Get("role").String() != "tool" || out.Get("tool_call_id").String() != "call_s" ||
		gjson.Get(out.Get("content").String(), "0.function.name").String() != "multi_agent_v1__spawn_agent" {
		t.Fatalf("search turn %s %s", call.Raw, out.Raw)
	}
	spawn := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant",
	 "content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"multi_agent_v1__spawn_agent","arguments":"{}"}}]},
	 "finish_reason":"tool_calls"}]}`
	item = gjson.GetBytes(tr.enc.body([]byte(spawn), 200), "output.0")
	if item.Get("namespace").String() != "multi_agent_v1" || item.Get("name").String() != "spawn_agent" {
		t.Fatalf("call of a loaded tool %s", item.Raw)
	}
}

// TestResponsesLongToolNames: a flat name over 64 characters is folded,
// the same way every time, and its calls map back.
func TestResponsesLongToolNames(t *testing.T) {
	ns := "mcp__" + strings.Repeat("very_long_server_name_", 3)
	tr := translateResponses(t, `{"model":"m","input":"hi","tools":[{"type":"namespace","name":"`+ns+`","tools":[
	 {"type":"function","name":"read_resource"}]}]}`)
	flat := gjson.GetBytes(tr.body, "tools.0.function.name").String()
	if len(flat) != 64 || !strings.HasPrefix(flat, "mcp__very_long") || flat != flatToolName(ns, "read_resource") {
		t.Fatalf("flat name %q", flat)
	}
	answer := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant",
	 "content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"` + flat + `","arguments":"{}"}}]},
	 "finish_reason":"tool_calls"}]}`
	item := gjson.GetBytes(tr.enc.body([]byte(answer), 200), "output.0")
	if item.Get("namespace").String() != ns || item.Get("name").String() != "read_resource" {
		t.Fatalf("call %s", item.Raw)
	}
}
