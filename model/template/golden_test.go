package template

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// goldenFile is one testdata/golden/<family>.json, written by
// scripts/js/golden_templates.py from transformers' apply_chat_template.
type goldenFile struct {
	Family    string       `json:"family"`
	Reference string       `json:"reference"`
	Now       string       `json:"now"`
	Cases     []goldenCase `json:"cases"`
}

type goldenCase struct {
	Name                string                     `json:"name"`
	Messages            json.RawMessage            `json:"messages"`
	Tools               json.RawMessage            `json:"tools"`
	AddGenerationPrompt bool                       `json:"add_generation_prompt"`
	ContinueFinal       bool                       `json:"continue_final_message"`
	Kwargs              map[string]json.RawMessage `json:"kwargs"`
	Prompt              *string                    `json:"prompt"`
	Error               string                     `json:"error"`
	ErrorType           string                     `json:"error_type"`
}

func (c goldenCase) input() Input {
	in := Input{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt,
		ContinueFinalMessage: c.ContinueFinal}
	if len(c.Kwargs) > 0 {
		in.Kwargs = map[string]any{}
		for k, v := range c.Kwargs {
			in.Kwargs[k] = v
		}
	}
	return in
}

func loadGolden(t testing.TB, family string) (*goldenFile, *Model) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata/golden", family+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	now, err := time.ParseInLocation("2006-01-02T15:04:05", g.Now, time.Local)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(filepath.Join("testdata/models", family), WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	return &g, m
}

func goldenFamilies(t testing.TB) []string {
	files, err := filepath.Glob("testdata/golden/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no goldens: %v", err)
	}
	var out []string
	for _, f := range files {
		out = append(out, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	return out
}

// lenient reports whether transformers' error is one hone does not
// reproduce: Python's TypeError where a template concatenates or searches
// a None or a list as a string (gonja's + and in have no type errors; see
// the package README).
func lenient(c goldenCase) bool {
	return c.ErrorType == "TypeError" && (strings.HasPrefix(c.Error, "can only concatenate str (not ") ||
		c.Error == "argument of type 'NoneType' is not iterable")
}

// TestGoldenParity renders every golden case and compares with
// transformers byte for byte; where transformers raised, hone must fail
// too, with the template's own message when the template raised it
// (except the lenient TypeErrors, counted).
func TestGoldenParity(t *testing.T) {
	for _, family := range goldenFamilies(t) {
		t.Run(family, func(t *testing.T) {
			g, m := loadGolden(t, family)
			rendered, raised, lenientN := 0, 0, 0
			for _, c := range g.Cases {
				got, err := m.Render(c.input())
				if c.Prompt != nil {
					rendered++
				} else {
					raised++
				}
				switch {
				case c.Prompt == nil && err == nil && lenient(c):
					lenientN++
				case c.Prompt != nil && err != nil:
					t.Errorf("%s: %v", c.Name, err)
				case c.Prompt != nil && got != *c.Prompt:
					at := diffAt(got, *c.Prompt)
					t.Errorf("%s: prompt differs at byte %d\n got: %q\nwant: %q", c.Name, at, around(got, at), around(*c.Prompt, at))
				case c.Prompt == nil && err == nil:
					t.Errorf("%s: transformers raised %s(%q), hone rendered %q", c.Name, c.ErrorType, c.Error, got)
				case c.Prompt == nil && c.ErrorType == "TemplateError":
					var te *Error
					if !errors.As(err, &te) || te.Message != c.Error {
						t.Errorf("%s: error %v, want the template's %q", c.Name, err, c.Error)
					}
				}
			}
			t.Logf("%s: %d cases rendered by transformers, %d raised (%d of them rendered leniently by hone)",
				family, rendered, raised, lenientN)
		})
	}
}

func diffAt(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// around is the text near byte at.
func around(s string, at int) string {
	return s[max(0, at-80):min(len(s), at+120)]
}
