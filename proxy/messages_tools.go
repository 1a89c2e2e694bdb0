package proxy

import (
	"encoding/json"
	lru "github.com/hashicorp/golang-lru/v2"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Anthropic Messages API tools as the engine can serve them:
//
//   - custom tools (type "custom" or absent) are function tools, as they are;
//   - Anthropic-defined tools that the client runs (bash, text_editor,
//     computer, memory, any version) are function tools under the name the
//     client gave them, with the input schema Anthropic documents for them
//     (Anthropic's API holds those schemas; an engine needs them spelled
//     out); the model's calls come back as tool_use blocks of that name, as
//     from Anthropic;
//   - server tools that Anthropic runs (web_search, web_fetch,
//     code_execution, tool search, advisor, MCP toolsets) and toolsets whose
//     member schemas hone does not know (browser_toolset, computer_toolset)
//     are left out of what the engine sees, with an X-Hone-Warning; their
//     server_tool_use and *_tool_result blocks in the history are left out
//     too;
//   - a tool type hone does not know at all is refused (400 naming it).

// anthVersion strips a tool type's version date: bash_20250124 -> bash.
var anthVersion = regexp.MustCompile(`_\d{8}$`)

// anthServerTools are the tool families Anthropic's servers run, or whose
// schemas hone does not know.
var anthServerTools = map[string]bool{
	"web_search": true, "web_fetch": true, "code_execution": true, "tool_search_tool_regex": true,
	"tool_search_tool_bm25": true, "advisor": true, "mcp_toolset": true, "browser_toolset": true,
	"computer_toolset": true,
}

// anthServerBlocks are content blocks of server tools (their calls and
// results), left out of the engine's conversation.
var anthServerBlocks = map[string]bool{
	"server_tool_use": true, "web_search_tool_result": true, "web_fetch_tool_result": true,
	"code_execution_tool_result": true, "bash_code_execution_tool_result": true,
	"text_editor_code_execution_tool_result": true, "tool_search_tool_result": true, "mcp_tool_use": true,
	"mcp_tool_result": true, "container_upload": true, "advisor_tool_result": true,
}

// anthClientTool is an Anthropic-defined tool the client runs: its default
// name, description and input schema.
type anthClientTool struct {
	name, desc string
	schema     func(t gjson.Result, version string) string
}

var anthClientTools = map[string]anthClientTool{
	"bash": {"bash", "Run a command in a persistent bash shell. Set restart to restart the shell.",
		func(gjson.Result, string) string {
			return `{"type":"object","properties":{"command":{"type":"string","description":"The bash command to run."},` +
				`"restart":{"type":"boolean","description":"Restart the bash session."}}}`
		}},
	"text_editor": {"str_replace_based_edit_tool",
		"View, create and edit text files: view a file or directory, create a file, replace a unique string, " +
			"insert text after a line.",
		func(_ gjson.Result, version string) string {
			cmds := `"view","create","str_replace","insert"`
			if version < "20250429" {
				cmds += `,"undo_edit"`
			}
			return `{"type":"object","properties":{"command":{"type":"string","enum":[` + cmds + `]},` +
				`"path":{"type":"string","description":"Absolute path of the file or directory."},` +
				`"file_text":{"type":"string","description":"create: the file's content."},` +
				`"old_str":{"type":"string","description":"str_replace: the text to replace, unique in the file."},` +
				`"new_str":{"type":"string","description":"str_replace: the new text; insert: the text to insert."},` +
				`"insert_line":{"type":"integer","description":"insert: the line after which to insert."},` +
				`"insert_text":{"type":"string","description":"insert: the text to insert."},` +
				`"view_range":{"type":"array","items":{"type":"integer"},"description":"view: [first, last] line."}},` +
				`"required":["command","path"]}`
		}},
	"computer": {"computer", "Use a mouse and keyboard to interact with a computer, and take screenshots.",
		func(gjson.Result, string) string {
			return `{"type":"object","properties":{"action":{"type":"string","enum":["key","type","mouse_move",` +
				`"left_click","left_click_drag","right_click","middle_click","double_click","triple_click",` +
				`"left_mouse_down","left_mouse_up","scroll","hold_key","wait","screenshot","cursor_position","zoom"]},` +
				`"coordinate":{"type":"array","items":{"type":"integer"},"description":"[x, y] in pixels."},` +
				`"start_coordinate":{"type":"array","items":{"type":"integer"}},` +
				`"text":{"type":"string","description":"Text to type, or keys to press."},` +
				`"scroll_direction":{"type":"string","enum":["up","down","left","right"]},` +
				`"scroll_amount":{"type":"integer"},"duration":{"type":"number","description":"Seconds."},` +
				`"region":{"type":"array","items":{"type":"integer"},"description":"zoom: [x1, y1, x2, y2]."}},` +
				`"required":["action"]}`
		}},
	"memory": {"memory", "Keep notes across conversations in a /memories directory: view, create, edit, " +
		"delete and rename files.",
		func(gjson.Result, string) string {
			return `{"type":"object","properties":{"command":{"type":"string","enum":["view","create","str_replace",` +
				`"insert","delete","rename"]},"path":{"type":"string"},"file_text":{"type":"string"},` +
				`"old_str":{"type":"string"},"new_str":{"type":"string"},"insert_line":{"type":"integer"},` +
				`"insert_text":{"type":"string"},"view_range":{"type":"array","items":{"type":"integer"}},` +
				`"old_path":{"type":"string"},"new_path":{"type":"string"}},"required":["command"]}`
		}},
}

// anthToolSet is a request's tools as the engine sees them.
type anthToolSet struct {
	chat    []json.RawMessage
	json    marshaled       // chat as json.Marshal writes it
	leftOut []string        // tool types left out, in request order
	names   map[string]bool // names of the tools left out
}

// anthTools turns the request's tools into function tools.
func anthTools(tools gjson.Result) (*anthToolSet, *apiError) {
	ts := &anthToolSet{names: map[string]bool{}}
	if !tools.Exists() || tools.Type == gjson.Null {
		return ts, nil
	}
	if !tools.IsArray() {
		return nil, badMessages("tools: Input should be a list")
	}
	var err *apiError
	i := 0
	tools.ForEach(func(_, t gjson.Result) bool {
		at := "tools." + strconv.Itoa(i)
		i++
		typ := t.Get("type").String()
		family := anthVersion.ReplaceAllString(typ, "")
		fn := map[string]any{}
		switch ct, client := anthClientTools[family]; {
		case typ == "" || typ == "custom":
			if t.Get("name").String() == "" {
				err = badMessages(at + ".name: Field required")
				return false
			}
			fn["name"] = t.Get("name").String()
			fn["parameters"] = rawOr(t.Get("input_schema"), `{"type":"object","properties":{}}`)
			if d := t.Get("description"); d.Exists() && d.Type != gjson.Null {
				fn["description"] = d.String()
			}
		case client:
			name := t.Get("name").String()
			if name == "" {
				name = ct.name
			}
			desc := ct.desc
			if family == "computer" {
				if w, h := t.Get("display_width_px").Int(), t.Get("display_height_px").Int(); w > 0 && h > 0 {
					desc += " The display is " + strconv.FormatInt(w, 10) + "x" + strconv.FormatInt(h, 10) + " pixels."
				}
			}
			fn["name"], fn["description"] = name, desc
			fn["parameters"] = json.RawMessage(ct.schema(t, strings.TrimPrefix(typ, family+"_")))
		case anthServerTools[family]:
			ts.leftOut = append(ts.leftOut, strings.Clone(typ)) // toolsMemo keeps no view of a request
			if n := t.Get("name").String(); n != "" {
				ts.names[strings.Clone(n)] = true
			}
			return true
		default:
			err = badMessages(at + ": tool type '" + typ + "' is not supported by hone")
			return false
		}
		b, _ := json.Marshal(map[string]any{"type": "function", "function": fn})
		ts.chat = append(ts.chat, b)
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(ts.chat) > 0 {
		ts.json, _ = json.Marshal(ts.chat) // each element is json.Marshal's
	}
	return ts, nil
}

// anthToolsOf is anthTools, from toolsMemo when the same owner sent the
// same tools before: a coding agent sends its tools, tens of KB of
// descriptions and schemas, with every call.
func anthToolsOf(tools gjson.Result, owner string) (*anthToolSet, *apiError) {
	if tools.Type != gjson.JSON || len(tools.Raw) > maxMemoTools {
		return anthTools(tools)
	}
	k := toolsKey{owner, tools.Raw}
	if ts, ok := toolsMemo.Get(k); ok {
		return ts, nil
	}
	ts, err := anthTools(tools)
	if err == nil {
		k.raw = strings.Clone(k.raw) // a view of the request
		toolsMemo.Add(k, ts)
	}
	return ts, err
}

// toolsMemo maps a tools list as an owner wrote it to its tool set, which
// is never changed once made. Keys are whole texts, not hashes, so no list
// can stand for another; and the owner's, so a hit (sooner) tells no
// client what another sent.
var toolsMemo, _ = lru.New[toolsKey, *anthToolSet](16)

type toolsKey struct{ owner, raw string }

// maxMemoTools bounds the lists toolsMemo keeps (16 of them, with their
// tool sets: a few MiB at most).
const maxMemoTools = 128 << 10
