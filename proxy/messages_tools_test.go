package proxy

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/tidwall/gjson"
)

func translateMessages(t *testing.T, body string) (*translation, []string) {
	t.Helper()
	tr, err := messagesSurface{}.translate(nil, "", []byte(body))
	if err != nil {
		t.Fatalf("translate: %+v", err)
	}
	return tr, tr.enc.(*messagesEncoder).warnings()
}

// TestMessagesToolTypes: custom tools (typed or not) and the
// Anthropic-defined tools a client runs reach the engine as function tools
// under the client's names, with schemas; server tools are left out with a
// warning, and so are their blocks in the history; a forced server tool
// falls back to auto.
func TestMessagesToolTypes(t *testing.T) {
	tr, warns := translateMessages(t, `{"model":"m","max_tokens":50,
	 "tools":[
	  {"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},
	  {"type":"custom","name":"lookup","description":"Look up.","input_schema":{"type":"object"}},
	  {"type":"bash_20250124","name":"bash"},
	  {"type":"text_editor_20250728","name":"str_replace_based_edit_tool","max_characters":1000},
	  {"type":"text_editor_20250124","name":"str_replace_editor"},
	  {"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768},
	  {"type":"memory_20250818","name":"memory"},
	  {"type":"web_search_20250305","name":"web_search","max_uses":3},
	  {"type":"code_execution_20250825","name":"code_execution"},
	  {"type":"tool_search_tool_bm25","name":"tool_search_tool_bm25"}],
	 "tool_choice":{"type":"tool","name":"web_search"},
	 "messages":[
	  {"role":"user","content":"Find it."},
	  {"role":"assistant","content":[{"type":"text","text":"Searching."},
	   {"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}},
	   {"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},
	   {"type":"tool_use","id":"toolu_1","name":"bash","input":{"command":"ls"}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.txt"}]}]}`)
	chat := gjson.ParseBytes(tr.body)
	var names []string
	for _, n := range chat.Get("tools.#.function.name").Array() {
		names = append(names, n.String())
	}
	if got := strings.Join(names, ","); got != "get_weather,lookup,bash,str_replace_based_edit_tool,str_replace_editor,computer,memory" {
		t.Fatalf("engine tools %s", got)
	}
	fn := func(name string) gjson.Result { return chat.Get(`tools.#(function.name=="` + name + `").function`) }
	if fn("bash").Get("parameters.properties.command.type").String() != "string" ||
		fn("computer").Get("parameters.required.0").String() != "action" ||
		!strings.Contains(fn("computer").Get("description").String(), "1024x768") ||
		strings.Contains(fn("str_replace_based_edit_tool").Get("parameters.properties.command.enum").Raw, "undo_edit") ||
		!strings.Contains(fn("str_replace_editor").Get("parameters.properties.command.enum").Raw, "undo_edit") ||
		fn("memory").Get("parameters.properties.command.enum.#").Int() != 6 {
		t.Errorf("client tools as the engine sees them: %s", chat.Get("tools").Raw)
	}
	if chat.Get("tool_choice").String() != "auto" {
		t.Errorf("tool_choice %s", chat.Get("tool_choice").Raw)
	}
	a := chat.Get(`messages.#(role=="assistant")`)
	if a.Get("content").String() != "Searching." || a.Get("tool_calls.#").Int() != 1 ||
		strings.Contains(string(tr.body), "srvtoolu_1") {
		t.Errorf("assistant turn %s", a.Raw)
	}
	want := []string{
		"tools left out (hone cannot offer them to the engine): web_search_20250305, code_execution_20250825, tool_search_tool_bm25",
		"tool_choice names 'web_search', a tool left out of the engine's tools; auto used",
		"content blocks left out (their tools are not the engine's): server_tool_use, web_search_tool_result",
	}
	if strings.Join(warns, "|") != strings.Join(want, "|") {
		t.Errorf("warnings %q", warns)
	}
	// only server tools: no tools and no tool_choice for the engine
	tr, _ = translateMessages(t, `{"model":"m","max_tokens":5,"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}],
	 "tool_choice":{"type":"any"},"messages":[{"role":"user","content":"hi"}]}`)
	if c := gjson.ParseBytes(tr.body); c.Get("tools").Exists() || c.Get("tool_choice").Exists() {
		t.Errorf("engine request %s", tr.body)
	}
	// plain requests carry no warnings
	if _, w := translateMessages(t, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`); len(w) != 0 {
		t.Errorf("warnings %q", w)
	}
}

// TestMessagesUnknownToolType: a type hone does not know is a 400 naming it.
func TestMessagesUnknownToolType(t *testing.T) {
	_, err := messagesSurface{}.translate(nil, "", []byte(`{"model":"m","max_tokens":5,
	 "messages":[{"role":"user","content":"hi"}],"tools":[{"type":"hologram_20990101","name":"h"}]}`))
	if err == nil || err.status != 400 || !strings.Contains(err.msg, "tool type 'hologram_20990101'") {
		t.Fatalf("%+v", err)
	}
}

// TestToolsMemo: a tools list an owner sent before gives the same tool set
// without being read again, another owner's the same list reads it anew,
// and what the memo keeps is no view of the request's buffer.
func TestToolsMemo(t *testing.T) {
	buf := []byte(`[{"name":"f","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"search"}]`)
	orig := string(buf)
	view := gjson.Parse(unsafe.String(&buf[0], len(buf)))
	a, err := anthToolsOf(view, "owner-a")
	if err != nil || len(a.chat) != 1 || !a.names["search"] || len(a.leftOut) != 1 {
		t.Fatalf("tools %+v, %v", a, err)
	}
	copy(buf, bytes.Repeat([]byte{' '}, len(buf))) // fasthttp reuses the buffer
	again, _ := anthToolsOf(gjson.Parse(orig), "owner-a")
	other, _ := anthToolsOf(gjson.Parse(orig), "owner-b")
	if again != a || other == a {
		t.Fatalf("memo: same owner %p/%p, other owner %p", again, a, other)
	}
	fresh, _ := anthTools(gjson.Parse(orig))
	if !bytes.Equal(again.json, fresh.json) || !reflect.DeepEqual(again.names, fresh.names) || !reflect.DeepEqual(again.leftOut, fresh.leftOut) {
		t.Fatalf("memoised %s %v %v, read anew %s %v %v", again.json, again.names, again.leftOut, fresh.json, fresh.names, fresh.leftOut)
	}
}
