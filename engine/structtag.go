package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hone-rl/hone/engine/internal/grammar"
)

// A structural tag (vLLM's structured_outputs.structural_tag, in xgrammar's
// format) is what hone's proxy sends with a forced tool call in token
// continuity mode: the output is one or more tagged blocks, each a literal
// begin, a JSON value held to a schema, a literal end. This engine takes the
// "tags_with_separator" format, the one vLLM's hermes tool parser builds
// for tool_choice required or a named function; "triggered_tags" (free text
// until a trigger, tool_choice auto) is refused.

// structTag is the subset of xgrammar's structural tag this engine compiles.
type structTag struct {
	Type   string `json:"type"`
	Format struct {
		Type           string    `json:"type"`
		Tags           []tagSpec `json:"tags"`
		Separator      string    `json:"separator"`
		AtLeastOne     bool      `json:"at_least_one"`
		StopAfterFirst bool      `json:"stop_after_first"`
	} `json:"format"`
}

// tagSpec is one tag: begin, a JSON value per the schema, end.
type tagSpec struct {
	Type    string `json:"type"`
	Begin   string `json:"begin"`
	Content struct {
		Type       string          `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
		Style      string          `json:"style"`
		Excludes   []string        `json:"excludes"`
	} `json:"content"`
	End string `json:"end"`
}

// parseStructTag reads a structural tag given as a JSON object or, as vLLM
// takes it, as a string holding one, and checks it is a kind this engine
// compiles. It returns the tag and the substring no JSON string of it may
// contain ("" for none).
func parseStructTag(raw json.RawMessage) (*structTag, string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = []byte(s)
	}
	var t structTag
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&t); err != nil {
		return nil, "", fmt.Errorf("structural_tag: %w", err)
	}
	if t.Type != "structural_tag" {
		return nil, "", fmt.Errorf("structural_tag: type %q is not supported by this engine (\"structural_tag\" with a format is)", t.Type)
	}
	if t.Format.Type != "tags_with_separator" {
		return nil, "", fmt.Errorf("structural_tag: format %q is not supported by this engine (tags_with_separator is)", t.Format.Type)
	}
	if len(t.Format.Tags) == 0 {
		return nil, "", fmt.Errorf("structural_tag: tags_with_separator has no tags")
	}
	forbid := ""
	for i, tag := range t.Format.Tags {
		c := tag.Content
		switch {
		case tag.Type != "tag":
			return nil, "", fmt.Errorf("structural_tag: tag %d: type %q is not supported (tag is)", i, tag.Type)
		case c.Type != "json_schema" || (c.Style != "" && c.Style != "json"):
			return nil, "", fmt.Errorf("structural_tag: tag %d: content %q (style %q) is not supported (json_schema in the json style is)", i, c.Type, c.Style)
		case len(c.Excludes) > 1 || (i > 0 && strings.Join(c.Excludes, "") != forbid):
			// one grammar-wide Forbid: every tag must exclude the same
			return nil, "", fmt.Errorf("structural_tag: tag %d: at most one excluded string, the same for every tag, is supported", i)
		case len(c.Excludes) == 1 && !plainForbid(c.Excludes[0]):
			return nil, "", fmt.Errorf("structural_tag: tag %d: an excluded string must be printable ASCII without '\"' or '\\'", i)
		case len(c.Excludes) == 1:
			forbid = c.Excludes[0]
		}
	}
	return &t, forbid, nil
}

// build compiles the tag: one or more (at least one when AtLeastOne) of
// its tags joined by the separator, a single one when StopAfterFirst.
func (t *structTag) build(b *grammar.Builder) (grammar.Frag, error) {
	one := func() (grammar.Frag, error) {
		alts := make([]grammar.Frag, 0, len(t.Format.Tags))
		for i, tag := range t.Format.Tags {
			v, err := tagValue(b, tag.Content.JSONSchema)
			if err != nil {
				return grammar.Frag{}, fmt.Errorf("structural_tag: tag %d: %w", i, err)
			}
			alts = append(alts, b.Seq(b.Lit(tag.Begin), v, b.Lit(tag.End)))
		}
		return b.Alt(alts...), nil
	}
	min, max := 0, -1
	if t.Format.AtLeastOne {
		min = 1
	}
	if t.Format.StopAfterFirst {
		max = 1
	}
	return b.List("", t.Format.Separator, "", min, max, one)
}

// tagValue is a tag's JSON value: any value for the schema true (or none),
// else the schema's language.
func tagValue(b *grammar.Builder, schema json.RawMessage) (grammar.Frag, error) {
	switch s := string(bytes.TrimSpace(schema)); s {
	case "", "null", "true", "{}":
		return b.AnyValue(), nil
	}
	return b.Schema(schema)
}

// plainForbid reports whether s can be grammar.Options.Forbid: printable
// ASCII without a quote or a backslash, so it is the same in a JSON
// string's raw text as in the decoded one.
func plainForbid(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return s != ""
}
