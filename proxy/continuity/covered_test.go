package continuity

import (
	"encoding/json"
	"log/slog"
	"os"
	"reflect"
	"testing"

	"github.com/tidwall/gjson"
)

// TestStructuralTagGolden: the structural tags hone sends vLLM engines are
// the ones vLLM 0.32's own chat endpoint builds for the same requests
// (proxy/continuity/testdata/structural_tag.json, made by vLLM's
// Parser._apply_structural_tag through scripts/peers/structural_tag_golden.py),
// compared as JSON values; none where vLLM builds none.
func TestStructuralTagGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/structural_tag.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []struct {
			Request       json.RawMessage `json:"request"`
			StructuralTag json.RawMessage `json:"structural_tag"`
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	tags := 0
	for i, c := range doc.Cases {
		got := structuralTag(gjson.ParseBytes(c.Request))
		want := string(c.StructuralTag)
		if want == "null" {
			if got != nil {
				t.Errorf("case %d %s: tag %s, vLLM builds none", i, c.Request, got)
			}
			continue
		}
		tags++
		if !jsonEqual(string(got), want) {
			t.Errorf("case %d %s:\n got %s\nwant %s", i, c.Request, got, want)
		}
	}
	if tags < 5 {
		t.Errorf("only %d cases with a tag", tags)
	}
	k := &Continuity{log: slog.New(slog.DiscardHandler)}
	p := &Plan{k: k, ids: []int32{1}, tag: structuralTag(gjson.Parse(`{"tools":[{"type":"function","function":{"name":"a"}}],"parallel_tool_calls":false}`))}
	body, err := p.completionsBody(64, false)
	if err != nil {
		t.Fatal(err)
	}
	if s := gjson.GetBytes(body, "structured_outputs.structural_tag"); s.Type != gjson.String || !jsonEqual(s.Str, string(p.tag)) {
		t.Errorf("completions body %s", body)
	}
}

// jsonEqual compares two JSON texts as values ("" equals "").
func jsonEqual(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
