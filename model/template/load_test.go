package template

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func render(t *testing.T, m *Model, tools string) string {
	t.Helper()
	in := Input{Messages: []byte(`[{"role":"user","content":"hi"}]`)}
	if tools != "" {
		in.Tools = []byte(tools)
	}
	out, err := m.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLoadForms(t *testing.T) {
	// tokenizer_config.json with a string template and AddedToken objects.
	m, err := Load(writeFiles(t, map[string]string{"tokenizer_config.json": `{"chat_template": "{{ bos_token }}[{{ messages[0].content }}]{{ eos_token }}",
		"bos_token": {"content": "<s>", "lstrip": false, "__type": "AddedToken"}, "eos_token": "</s>", "pad_token": null}`}))
	if err != nil {
		t.Fatal(err)
	}
	if got := render(t, m, ""); got != "<s>[hi]</s>" {
		t.Errorf("string form: %q", got)
	}
	if _, ok := m.Tokens["pad_token"]; ok {
		t.Error("a null token must not be passed")
	}

	// The list of named templates: tool_use with tools, default without.
	m, err = Load(writeFiles(t, map[string]string{"tokenizer_config.json": `{"chat_template": [
		{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T{{ tools|length }}"}]}`}))
	if err != nil {
		t.Fatal(err)
	}
	if got := render(t, m, ""); got != "D" {
		t.Errorf("named, no tools: %q", got)
	}
	if got := render(t, m, "[]"); got != "T0" {
		t.Errorf("named, tools []: %q", got)
	}
	if tpl, err := m.Select("tool_use", false); err != nil || tpl.Name != "tool_use" {
		t.Errorf("Select by name: %v", err)
	}
	if _, err := m.Select("nope", false); err == nil {
		t.Error("Select unknown name: want error")
	}

	// chat_template.jinja and additional_chat_templates win over the config.
	m, err = Load(writeFiles(t, map[string]string{
		"tokenizer_config.json":                    `{"chat_template": "config", "eos_token": "E"}`,
		"chat_template.jinja":                      "file{{ eos_token }}\n",
		"additional_chat_templates/tool_use.jinja": "tools",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := render(t, m, ""); got != "fileE" {
		t.Errorf("jinja file (trailing newline dropped as Jinja does): %q", got)
	}
	if got := render(t, m, `[{"type":"function"}]`); got != "tools" {
		t.Errorf("additional template: %q", got)
	}

	// Several templates and no default.
	m, err = Load(writeFiles(t, map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "a", "template": "A"}, {"name": "b", "template": "B"}]}`}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Render(Input{Messages: []byte(`[{"role":"user"}]`)}); err == nil || !strings.Contains(err.Error(), "no default") {
		t.Errorf("no default: %v", err)
	}

	for name, files := range map[string]map[string]string{
		"no template":     {"tokenizer_config.json": `{"eos_token": "x"}`},
		"bad config":      {"tokenizer_config.json": `{`},
		"bad list":        {"tokenizer_config.json": `{"chat_template": [{"name": "a"}]}`},
		"bad token":       {"tokenizer_config.json": `{"chat_template": "x", "eos_token": 3}`},
		"template syntax": {"chat_template.jinja": "{% if %}"},
	} {
		m, err := Load(writeFiles(t, files))
		if err == nil {
			_, err = m.Render(Input{Messages: []byte(`[{"role":"user"}]`)})
		}
		if err == nil {
			t.Errorf("%s: want error", name)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); err != nil {
		t.Logf("missing folder: %v", err)
	}
}

func TestRenderErrors(t *testing.T) {
	tpl, err := Compile(`{% if messages[0].role != 'user' %}{{ raise_exception('first must be user, got ' ~ messages[0].role) }}{% endif %}ok`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tpl.Render(Input{Messages: []byte(`[{"role":"system","content":"s"}]`)})
	if te, ok := err.(*Error); !ok || te.Message != "first must be user, got system" {
		t.Errorf("raise_exception: %v", err)
	}
	for _, in := range []Input{
		{},
		{Messages: []byte(`[]`)},
		{Messages: []byte(`{"role":"user"}`)},
		{Messages: []byte(`[{"role":"user"}]`), Tools: []byte(`{}`)},
		{Messages: []byte(`[{"role":"user","content":"x"}]`), ContinueFinalMessage: true, AddGenerationPrompt: true},
		{Messages: []byte(`[{"role":"user"}]`), Kwargs: map[string]any{"messages": "x"}},
	} {
		if _, err := tpl.Render(in); err == nil {
			t.Errorf("Render(%+v): want error", in)
		}
	}
	for _, src := range []string{`{% include "/etc/passwd" %}`, `{% extends "x" %}`, `{% import "x" as y %}`} {
		if tpl, err := Compile(src); err == nil {
			if _, err := tpl.Render(Input{Messages: []byte(`[{"role":"user"}]`)}); err == nil {
				t.Errorf("%s: file access must fail", src)
			}
		}
	}
	// Unbounded recursion is an error, not a crashed process.
	tpl, err = Compile(`{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpl.Render(Input{Messages: []byte(`[{"role":"user"}]`)}); err == nil || !strings.Contains(err.Error(), "recursion") {
		t.Errorf("recursion: %v", err)
	}
	tpl, err = Compile(`{{ range(100001)|length }}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpl.Render(Input{Messages: []byte(`[{"role":"user"}]`)}); err == nil {
		t.Error("range over MAX_RANGE: want error")
	}
}

func TestStrftime(t *testing.T) {
	now := time.Date(2025, 3, 7, 14, 5, 9, 0, time.UTC)
	tpl, err := Compile(`{{ strftime_now("%d %b %Y|%A %B %j %I%p %y-%m %H:%M:%S %%") }}`, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render(Input{Messages: []byte(`[{"role":"user"}]`)})
	if want := "07 Mar 2025|Friday March 066 02PM 25-03 14:05:09 %"; err != nil || got != want {
		t.Errorf("got %q %v, want %q", got, err, want)
	}
}
