package proxy

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/hone-rl/hone/model/chat"
	"github.com/tidwall/gjson"
)

// TestForcedStreamGolden replays vLLM 0.32's own streamed forced-call
// extraction (proxy/testdata/forced_stream.json, made by
// scripts/peers/forced_stream_golden.py): the same constrained outputs,
// split into the same steps, give the same deltas step by step (ids aside:
// random in both, present in the same places).
func TestForcedStreamGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/forced_stream.json")
	if err != nil {
		t.Fatal(err)
	}
	type delta struct {
		Index     int     `json:"index"`
		ID        bool    `json:"id"`
		Type      *string `json:"type"`
		Name      *string `json:"name"`
		Arguments *string `json:"arguments"`
	}
	var doc struct {
		Cases []struct {
			Kind, Split string
			Steps       []struct {
				Text   string
				Deltas []delta
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) < 30 {
		t.Fatalf("%d cases", len(doc.Cases))
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for n, c := range doc.Cases {
		f := &forced{}
		if c.Kind == "named" {
			f.named = "calc"
		}
		s := &forcedStream{f: f, id: chat.NewCallID}
		for i, step := range c.Steps {
			got := s.push(step.Text)
			want := make([]chat.ToolCallDelta, len(step.Deltas))
			for j, d := range step.Deltas {
				want[j] = chat.ToolCallDelta{Index: d.Index, Type: str(d.Type), Name: str(d.Name), Arguments: str(d.Arguments)}
				if d.ID {
					want[j].ID = "id"
				}
			}
			for j := range got {
				if got[j].ID != "" {
					got[j].ID = "id"
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("case %d (%s, %s) step %d %q: %+v, want %+v", n, c.Kind, c.Split, i, step.Text, got, want)
			}
		}
	}
}

// FuzzForcedStream: scanning any text never panics, and a well-formed
// array (valid JSON, no repeated keys: what the constrained decoding
// makes), split anywhere, streams the same calls: the concatenated deltas
// equal what the whole text gives at once.
func FuzzForcedStream(f *testing.F) {
	f.Add(`[{"name": "calc", "parameters": {"a": 6, "b": 7}}, {"name": "x", "parameters": {"s": "]}"}}]`, uint8(3))
	f.Add(`[{"parameters": 1, "name": "ca\"lc"}]`, uint8(1))
	f.Fuzz(func(t *testing.T, text string, step uint8) {
		n := int(step%16) + 1
		whole := (&forcedStream{f: &forced{}, id: chat.NewCallID}).push(text)
		s := &forcedStream{f: &forced{}, id: chat.NewCallID}
		var parts []chat.ToolCallDelta
		for i := 0; i < len(text); i += n {
			parts = append(parts, s.push(text[i:min(i+n, len(text))])...)
		}
		if !wellFormed(text) {
			return
		}
		joined := map[int]string{}
		names := map[int]string{}
		for _, d := range parts {
			joined[d.Index] += d.Arguments
			names[d.Index] += d.Name
		}
		for _, d := range whole {
			if joined[d.Index] != d.Arguments || names[d.Index] != d.Name {
				t.Fatalf("call %d: streamed %q %q, at once %q %q", d.Index, names[d.Index], joined[d.Index], d.Name, d.Arguments)
			}
		}
	})
}

// wellFormed reports whether text is a JSON array whose object elements
// repeat no key.
func wellFormed(text string) bool {
	v := gjson.Parse(text)
	if !gjson.Valid(text) || !v.IsArray() {
		return false
	}
	ok := true
	v.ForEach(func(_, e gjson.Result) bool {
		seen := map[string]bool{}
		e.ForEach(func(k, _ gjson.Result) bool {
			ok = ok && !seen[k.Str]
			seen[k.Str] = true
			return ok
		})
		return ok
	})
	return ok
}
