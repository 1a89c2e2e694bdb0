package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Model is the chat templates and special tokens of a Hugging Face model
// folder.
type Model struct {
	// Templates by name. A model with one template has it as "default".
	Templates map[string]string
	// Tokens are the named special tokens transformers passes to the
	// template (bos_token, eos_token, unk_token, sep_token, pad_token,
	// cls_token, mask_token), those that are set.
	Tokens map[string]string

	opts     []Option
	mu       sync.Mutex
	compiled map[string]*Template
}

// specialTokens are transformers' SPECIAL_TOKENS_ATTRIBUTES.
var specialTokens = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

// Load reads the chat templates of the model folder dir as transformers'
// AutoTokenizer.from_pretrained does: chat_template.jinja (the "default"
// template) and additional_chat_templates/<name>.jinja, which take priority
// over tokenizer_config.json's chat_template (a string, or a list of
// {"name", "template"} objects); and the special tokens from
// tokenizer_config.json (a token is a string or an {"content": ...}
// object).
func Load(dir string, opts ...Option) (*Model, error) {
	cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	files := map[string]string{}
	if b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		files["default"] = string(b)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	extra, err := filepath.Glob(filepath.Join(dir, "additional_chat_templates", "*.jinja"))
	if err != nil {
		return nil, err
	}
	for _, p := range extra {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		files[strings.TrimSuffix(filepath.Base(p), ".jinja")] = string(b)
	}
	m, err := Parse(cfg, files, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return m, nil
}

// Parse builds a Model from the bytes of tokenizer_config.json (may be
// empty) and template files by name (chat_template.jinja as "default",
// additional_chat_templates/<name>.jinja as <name>).
func Parse(tokenizerConfig []byte, files map[string]string, opts ...Option) (*Model, error) {
	var cfg map[string]json.RawMessage
	if len(tokenizerConfig) > 0 {
		if err := json.Unmarshal(tokenizerConfig, &cfg); err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: %w", err)
		}
	}
	m := &Model{Templates: map[string]string{}, Tokens: map[string]string{}, opts: opts, compiled: map[string]*Template{}}
	for _, name := range specialTokens {
		tok, err := tokenText(cfg[name])
		if err != nil {
			return nil, fmt.Errorf("tokenizer_config.json %s: %w", name, err)
		}
		if tok != nil {
			m.Tokens[name] = *tok
		}
	}
	if len(files) > 0 {
		for name, src := range files {
			m.Templates[name] = src
		}
		return m, nil
	}
	raw := cfg["chat_template"]
	if len(raw) == 0 || string(raw) == "null" {
		return m, nil
	}
	var single string
	if json.Unmarshal(raw, &single) == nil {
		m.Templates["default"] = single
		return m, nil
	}
	var named []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return nil, fmt.Errorf("tokenizer_config.json chat_template is neither a string nor a list of named templates: %w", err)
	}
	for i, t := range named {
		if t.Name == nil || t.Template == nil {
			return nil, fmt.Errorf("tokenizer_config.json chat_template[%d] lacks name or template", i)
		}
		m.Templates[*t.Name] = *t.Template
	}
	return m, nil
}

// tokenText reads a special token: a string, null, or an AddedToken
// object with "content".
func tokenText(raw json.RawMessage) (*string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return &s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return nil, errors.New("neither a string nor an object with content")
	}
	return obj.Content, nil
}

// Names lists the template names, sorted.
func (m *Model) Names() []string {
	names := make([]string, 0, len(m.Templates))
	for n := range m.Templates {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Select picks a template as transformers' get_chat_template does: the
// named one if name is given; else "tool_use" when tools are passed and it
// exists, otherwise "default".
func (m *Model) Select(name string, tools bool) (*Template, error) {
	if len(m.Templates) == 0 {
		return nil, errors.New("the model has no chat template (tokenizer_config.json chat_template or chat_template.jinja)")
	}
	switch {
	case name != "":
		if _, ok := m.Templates[name]; !ok {
			return nil, fmt.Errorf("no chat template named %q (have %s)", name, strings.Join(m.Names(), ", "))
		}
	case tools && m.Templates["tool_use"] != "":
		name = "tool_use"
	case m.Templates["default"] != "":
		name = "default"
	default:
		return nil, fmt.Errorf("the model has several chat templates and no default: pass one of %s", strings.Join(m.Names(), ", "))
	}
	return m.compile(name)
}

// compile compiles (once) the named template with the model's tokens.
func (m *Model) compile(name string) (*Template, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.compiled[name]; ok {
		return t, nil
	}
	t, err := Compile(m.Templates[name], append([]Option{WithTokens(m.Tokens)}, m.opts...)...)
	if err != nil {
		return nil, fmt.Errorf("chat template %q: %w", name, err)
	}
	t.Name = name
	m.compiled[name] = t
	return t, nil
}

// Render selects the template (tool_use when in.Tools is given) and
// renders in with it.
func (m *Model) Render(in Input) (string, error) {
	t, err := m.Select("", hasTools(in.Tools))
	if err != nil {
		return "", err
	}
	return t.Render(in)
}

// hasTools reports whether tools were passed (transformers: tools is not
// None; an empty list counts).
func hasTools(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null"
}
