package capture

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/tidwall/gjson"
)

func exportRows(t *testing.T, s *Store, f ExportFilter) []Row {
	t.Helper()
	var rows []Row
	err := s.Export(context.Background(), f, func(r *Row) error { rows = append(rows, *r); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestExportRows(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	calls := runSession(t, s, newVocab(), "ex")
	if _, err := s.Feedback(ctx, FeedbackReq{Session: "ex", Reward: ptr(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "ex"); err != nil {
		t.Fatal(err)
	}
	rows := exportRows(t, s, ExportFilter{Trajectories: true, Steps: true})
	if len(rows) != 4 {
		t.Fatalf("rows %d, want 1 trajectory + 3 steps", len(rows))
	}
	tr := rows[0]
	exps, _ := s.Experiences(ctx, 0, 1)
	e := exps[0]
	if tr.Kind != KindTrajectory || !equalIDs(tr.InputIDs, e.Tokens) || tr.Rewards != 1 {
		t.Fatalf("trajectory row differs from the experience")
	}
	if len(tr.PromptIDs) != len(calls[0].PromptIDs) || len(tr.ResponseMask) != len(tr.Responses) {
		t.Fatalf("prompt %d (want %d), response mask %d vs responses %d", len(tr.PromptIDs), len(calls[0].PromptIDs), len(tr.ResponseMask), len(tr.Responses))
	}
	if len(tr.Prompt) != 2 || tr.Prompt[0].Role == "" || len(tr.Response) == 0 || tr.Response[0].Role != "assistant" {
		t.Fatalf("prompt messages %+v, response %+v", tr.Prompt, tr.Response)
	}
	for i, c := range calls {
		st := rows[1+i]
		if st.Kind != KindStep || st.Call != c.ID || !equalIDs(st.PromptIDs, c.PromptIDs) || !equalIDs(st.Responses, c.Choices[0].TokenIDs) {
			t.Fatalf("step row %d does not match call %s", i, c.ID)
		}
		for _, m := range st.ResponseMask {
			if m != 1 {
				t.Fatalf("step %d response mask has 0", i)
			}
		}
	}
	if got := exportRows(t, s, ExportFilter{Task: "other", Trajectories: true}); len(got) != 0 {
		t.Fatalf("task filter: %d rows", len(got))
	}
	if got := exportRows(t, s, ExportFilter{States: []State{StateReady}, Trajectories: true}); len(got) != 1 {
		t.Fatalf("state filter ready: %d rows", len(got))
	}
	if got := exportRows(t, s, ExportFilter{States: []State{StateOpen}, Trajectories: true}); len(got) != 0 {
		t.Fatalf("state filter: %d rows", len(got))
	}

	// JSONL and Parquet carry the same rows.
	var jb, pb bytes.Buffer
	for _, format := range []string{"jsonl", "parquet"} {
		buf := &jb
		if format == "parquet" {
			buf = &pb
		}
		w, err := NewRowWriter(buf, format)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			if err := w.Write(&rows[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var fromJSON []Row
	sc := bufio.NewScanner(&jb)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		fromJSON = append(fromJSON, r)
	}
	pr := parquet.NewGenericReader[Row](bytes.NewReader(pb.Bytes()))
	fromParquet := make([]Row, pr.NumRows())
	if n, _ := pr.Read(fromParquet); n != len(rows) {
		t.Fatalf("parquet rows %d, want %d", n, len(rows))
	}
	for i := range rows {
		if !reflect.DeepEqual(fromJSON[i].InputIDs, fromParquet[i].InputIDs) || !sameMessages(fromJSON[i].Prompt, fromParquet[i].Prompt) ||
			!sameMessages(fromJSON[i].Response, fromParquet[i].Response) || !sameMessages(rows[i].Response, fromParquet[i].Response) ||
			!reflect.DeepEqual(fromJSON[i].OldLogProbs, fromParquet[i].OldLogProbs) ||
			fromJSON[i].Created.Sub(fromParquet[i].Created).Abs() > time.Millisecond {
			t.Fatalf("row %d differs between jsonl and parquet", i)
		}
	}
	if _, err := NewRowWriter(&jb, "csv"); err == nil {
		t.Fatal("csv accepted")
	}
}

// sameMessages compares message lists, an empty tool-call list equal to
// none (Parquet has no nil list).
func sameMessages(a, b []Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if len(x.ToolCalls) == 0 && len(y.ToolCalls) == 0 {
			x.ToolCalls, y.ToolCalls = nil, nil
		}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

func TestExportMessages(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		want      Message
	}{
		{"text", `{"role":"user","content":"hi","name":"bob"}`, Message{Role: "user", Content: "hi", Name: "bob"}},
		{"parts joined as vLLM does", `{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]}`,
			Message{Role: "user", Content: "a\nb"}},
		{"null content and tool calls", `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"add","arguments":"{\"a\": 1}"}}]}`,
			Message{Role: "assistant", ToolCalls: []MessageToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "add", Arguments: `{"a": 1}`}}}}},
		{"object arguments stay JSON text", `{"role":"assistant","content":"","tool_calls":[{"id":"c2","function":{"name":"f","arguments":{"x":[1,2]}}}]}`,
			Message{Role: "assistant", ToolCalls: []MessageToolCall{{ID: "c2", Type: "function", Function: FunctionCall{Name: "f", Arguments: `{"x":[1,2]}`}}}}},
		{"tool result", `{"role":"tool","tool_call_id":"c1","content":"2"}`, Message{Role: "tool", Content: "2", ToolCallID: "c1"}},
		{"reasoning", `{"role":"assistant","content":"4","reasoning":"2+2"}`, Message{Role: "assistant", Content: "4", ReasoningContent: "2+2"}},
		{"reasoning_content first", `{"role":"assistant","content":"4","reasoning_content":"r","reasoning":"x"}`, Message{Role: "assistant", Content: "4", ReasoningContent: "r"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseMessage(gjson.Parse(tc.raw))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestExportParquetNulls: absent message fields are Parquet nulls (None in
// pyarrow and in verl's rows), present ones keep their values.
func TestExportParquetNulls(t *testing.T) {
	row := Row{Kind: KindStep, Prompt: []Message{{Role: "user", Content: "q"}},
		Response: []Message{{Role: "assistant", ReasoningContent: "r", ToolCalls: []MessageToolCall{{ID: "c", Type: "function", Function: FunctionCall{Name: "f", Arguments: "{}"}}}}}}
	var b bytes.Buffer
	w, err := NewRowWriter(&b, "parquet")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&row); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range [][]string{{"prompt", "list", "element", "name"}, {"prompt", "list", "element", "reasoning_content"}} {
		col, ok := f.Schema().Lookup(path...)
		if !ok || !col.Node.Optional() {
			t.Fatalf("column %v: found %v, optional %v", path, ok, ok && col.Node.Optional())
		}
	}
	pr := parquet.NewGenericReader[Row](bytes.NewReader(b.Bytes()))
	got := make([]Row, 1)
	if n, _ := pr.Read(got); n != 1 || !sameMessages(got[0].Prompt, row.Prompt) || !sameMessages(got[0].Response, row.Response) {
		t.Fatalf("read back %+v", got)
	}
}

func TestExportEngineTools(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"vLLM's order", `[{"function":{"strict":true,"parameters":{"type":"object"},"name":"add","x":1},"type":"function","extra":2}]`,
			`[{"type":"function","function":{"name":"add","parameters":{"type":"object"},"strict":true,"x":1},"extra":2}]`},
		{"description kept in place", `[{"type":"function","function":{"description":"d","name":"f"}}]`,
			`[{"type":"function","function":{"name":"f","description":"d"}}]`},
		{"no type", `[{"function":{"name":"f"}}]`, `[{"type":"function","function":{"name":"f"}}]`},
		{"repeated keys: the last, where the first came", `[{"type":"x","function":{"name":"f","parameters":{"a":1},"strict":true,"parameters":{"b":2},"strict":false,"name":"g"},"type":"function"}]`,
			`[{"type":"function","function":{"name":"g","parameters":{"b":2},"strict":false}}]`},
		{"not tools", `{"a":1}`, `{"a":1}`},
		{"none", ``, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := engineTools([]byte(tc.in)); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestExportRepeatedKeys: a key repeated inside a message, a tool call or a
// content part is exported as the engine read it, its last member (the
// first was exported before; session inference already read the last).
func TestExportRepeatedKeys(t *testing.T) {
	c := &Call{Request: []byte(`{"messages":[` +
		`{"role":"system","role":"user","content":"first","cont\u0065nt":"second","name":"a","name":"b"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"x","id":"y","type":"function","function":{"name":"f","arguments":"{}","name":"g","arguments":"{\"a\":1}"}}]},` +
		`{"role":"tool","tool_call_id":"x","tool_call_id":"y","content":[{"type":"image","type":"text","text":"p1","text":"p2"}]}]}`),
		Choices: []Choice{{Content: "ok"}}}
	got := callMessages(c, 0)
	want := []Message{
		{Role: "user", Content: "second", Name: "b"},
		{Role: "assistant", ToolCalls: []MessageToolCall{{ID: "y", Type: "function", Function: FunctionCall{Name: "g", Arguments: `{"a":1}`}}}},
		{Role: "tool", Content: "p2", ToolCallID: "y"},
		{Role: "assistant", Content: "ok"},
	}
	if !sameMessages(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if m := msgFromJSON(gjson.Parse(`{"role":"user","content":"a","content":"b","tool_calls":[{"function":{"name":"f","name":"g"}}]}`)); m.text != "b" || len(m.calls) != 1 || m.calls[0].name != "g" {
		t.Fatalf("drift's reading: %+v", m)
	}
}
