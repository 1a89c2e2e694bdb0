package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// Template is one compiled chat template. It is safe for concurrent use.
type Template struct {
	// Name is the template's name in its model folder ("default" for a
	// single template).
	Name string
	// Source is the Jinja text.
	Source string
	// Tokens are the special-token variables (bos_token, eos_token, ...)
	// from the model's tokenizer_config.json.
	Tokens map[string]string

	tpl *exec.Template
	now func() time.Time
}

// Input is what apply_chat_template gets besides the template.
type Input struct {
	// Messages is the JSON array of messages, each exactly as the template
	// sees it (transformers passes the dicts through unchanged).
	Messages json.RawMessage
	// Tools is a JSON array of tool schemas, or empty for none (the
	// template then sees tools = None).
	Tools json.RawMessage
	// Documents is a JSON array of documents (RAG templates), or empty.
	Documents json.RawMessage
	// AddGenerationPrompt is add_generation_prompt.
	AddGenerationPrompt bool
	// ContinueFinalMessage renders the last message open, so generation
	// continues it (transformers' continue_final_message).
	ContinueFinalMessage bool
	// Kwargs are further template variables (chat_template_kwargs such as
	// enable_thinking, date_string): a json.RawMessage or a string, bool,
	// int or float64. They override the special tokens.
	Kwargs map[string]any
}

// Error is an error the template raised itself with raise_exception; its
// message is the template's (transformers raises jinja2's TemplateError
// with it).
type Error struct{ Message string }

func (e *Error) Error() string { return e.Message }

// Option configures Compile.
type Option func(*Template)

// WithClock sets the clock strftime_now reads (default time.Now, the
// server's local time as in transformers).
func WithClock(now func() time.Time) Option { return func(t *Template) { t.now = now } }

// WithTokens sets the special-token variables.
func WithTokens(tokens map[string]string) Option {
	return func(t *Template) { t.Tokens = maps.Clone(tokens) }
}

// rootName is the template's name inside its loader.
const rootName = "/chat_template.jinja"

// Compile parses a chat template with the environment transformers uses:
// trim_blocks, lstrip_blocks, loop controls, no file access
// (include/import/extends are not available), transformers' tojson,
// raise_exception and strftime_now, and Python semantics for the filters
// and methods chat templates use.
func Compile(src string, opts ...Option) (*Template, error) {
	t := &Template{Name: "default", Source: src, now: time.Now}
	for _, o := range opts {
		o(t)
	}
	if err := checkBang(src); err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	loader, err := loaders.NewMemoryLoader(map[string]string{rootName: pythonNone(src)})
	if err != nil {
		return nil, err
	}
	tpl, err := newTemplate(loader)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	t.tpl = tpl
	return t, nil
}

// newTemplate parses the root template; a panic inside the parser (the
// engine has a few on malformed input) is returned as an error.
func newTemplate(loader loaders.Loader) (tpl *exec.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			tpl, err = nil, fmt.Errorf("parse: %v", r)
		}
	}()
	return exec.NewTemplate(rootName, engineConfig(), loader, environment())
}

// pythonNone rewrites the literal None to none. gonja parses None into a
// nil that it cannot tell from an undefined value, and looks the name none
// up like any variable: hone binds none to Python's None (see jsonNull), so
// after the rewrite both spellings are None and only missing values are
// Undefined, as in Jinja2. The rewrite uses gonja's own lexer, so only
// names inside tags change, never text or string literals.
func pythonNone(src string) (out string) {
	defer func() {
		if recover() != nil {
			out = src // the parser will report what the lexer choked on
		}
	}()
	var b []byte
	stream := tokens.LexAll(src, engineConfig())
	for !stream.End() {
		tok := stream.Next()
		if tok == nil {
			break
		}
		if tok.Type == tokens.Name && tok.Val == "None" && tok.Pos >= 0 && tok.Pos+4 <= len(src) && src[tok.Pos:tok.Pos+4] == "None" {
			if b == nil {
				b = []byte(src)
			}
			copy(b[tok.Pos:], "none")
		}
	}
	if b == nil {
		return src
	}
	return string(b)
}

// checkBang rejects a '!' not followed by '=' inside a tag, as Jinja2's
// lexer does ("unexpected char '!'"). gonja's lexer reports it but keeps
// scanning, which on some inputs never ends, so the template must not reach
// it.
func checkBang(src string) error {
	for i := 0; i+1 < len(src); i++ {
		if src[i] != '{' {
			continue
		}
		var end string
		switch src[i+1] {
		case '{':
			end = "}}"
		case '%':
			end = "%}"
		case '#':
			j := strings.Index(src[i+2:], "#}")
			if j < 0 {
				return nil
			}
			i += j + 3
			continue
		default:
			continue
		}
		j := i + 2
		var quote byte
		for ; j < len(src); j++ {
			c := src[j]
			switch {
			case quote != 0:
				if c == '\\' {
					j++
				} else if c == quote {
					quote = 0
				}
			case c == '\'' || c == '"':
				quote = c
			case c == '!' && (j+1 >= len(src) || src[j+1] != '='):
				return fmt.Errorf("unexpected char '!' at %d", j)
			case strings.HasPrefix(src[j:], end):
				j += len(end) - 1
				goto next
			}
		}
		return nil
	next:
		i = j
	}
	return nil
}

func engineConfig() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	c.KeepTrailingNewline = false
	c.AutoEscape = false
	return c
}

// reserved are the variables transformers sets itself.
var reserved = map[string]bool{"messages": true, "tools": true, "documents": true, "add_generation_prompt": true}

// continueTag is appended to the final message to find where it ends
// (transformers' continue_final_message).
const continueTag = "CONTINUE_FINAL_MESSAGE_TAG "

// Render renders the template as transformers' apply_chat_template
// (tokenize=False) does.
func (t *Template) Render(in Input) (string, error) {
	vars := make(map[string]any, 8+len(t.Tokens)+len(in.Kwargs))
	for k, v := range t.Tokens {
		vars[k] = v
	}
	for k, v := range in.Kwargs {
		if reserved[k] {
			return "", fmt.Errorf("chat template: %s cannot be passed as a template variable", k)
		}
		val, err := kwargValue(v)
		if err != nil {
			return "", fmt.Errorf("chat template: variable %s: %w", k, err)
		}
		vars[k] = val
	}
	msgs, err := decodeList(in.Messages, "messages", false)
	if err != nil {
		return "", err
	}
	if len(msgs) == 0 {
		return "", errors.New("chat template: no messages")
	}
	tools, err := decodeList(in.Tools, "tools", true)
	if err != nil {
		return "", err
	}
	docs, err := decodeList(in.Documents, "documents", true)
	if err != nil {
		return "", err
	}
	var final string
	if in.ContinueFinalMessage {
		if in.AddGenerationPrompt {
			return "", errors.New("chat template: continue_final_message and add_generation_prompt are not compatible")
		}
		if final, err = tagFinalMessage(msgs, t.Source); err != nil {
			return "", err
		}
	}
	vars["messages"] = msgs
	vars["tools"] = nilIfEmpty(tools)
	vars["documents"] = nilIfEmpty(docs)
	vars["add_generation_prompt"] = in.AddGenerationPrompt
	out, err := t.execute(vars)
	if err != nil {
		return "", err
	}
	if in.ContinueFinalMessage {
		return cutAtTag(out, final)
	}
	return out, nil
}

// nilIfEmpty makes a missing list None.
func nilIfEmpty(l pyList) any {
	if l == nil {
		return jsonNull
	}
	return l
}

// execute runs the template with vars plus the per-render globals.
func (t *Template) execute(vars map[string]any) (out string, err error) {
	var raised *Error
	vars[depthKey] = new(int)
	vars["raise_exception"] = func(_ *exec.Evaluator, va *exec.VarArgs) (any, error) {
		msg := ""
		if len(va.Args) > 0 {
			msg = pyStr(va.Args[0])
		}
		raised = &Error{Message: msg}
		return nil, raised
	}
	vars["strftime_now"] = func(_ *exec.Evaluator, va *exec.VarArgs) (any, error) {
		if len(va.Args) != 1 || !va.Args[0].IsString() {
			return nil, errors.New("strftime_now takes one format string")
		}
		return strftime(t.now(), va.Args[0].String()), nil
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chat template: render: %v", r)
		}
	}()
	out, err = t.tpl.ExecuteToString(exec.NewContext(vars))
	if raised != nil {
		return "", raised
	}
	if err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	return out, nil
}

// decodeList decodes a JSON array argument; empty input is nil when
// optional.
func decodeList(raw json.RawMessage, what string, optional bool) (pyList, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		if optional {
			return nil, nil
		}
		return nil, fmt.Errorf("chat template: %s missing", what)
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("chat template: %s: %w", what, err)
	}
	l, ok := v.(pyList)
	if !ok {
		return nil, fmt.Errorf("chat template: %s is not a JSON array", what)
	}
	return l, nil
}

// kwargValue converts a template variable given by the caller.
func kwargValue(v any) (any, error) {
	switch x := v.(type) {
	case json.RawMessage:
		return decodeJSON(x)
	case nil:
		return jsonNull, nil
	case string, bool, int, float64:
		return x, nil
	case int64:
		return int(x), nil
	case []string:
		l := make(pyList, len(x))
		for i, s := range x {
			l[i] = s
		}
		return l, nil
	default:
		raw, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		return decodeJSON(raw)
	}
}

// tagFinalMessage appends continueTag to the final message's content (or
// to its last text part) and returns the content it had.
func tagFinalMessage(msgs pyList, src string) (string, error) {
	if !strings.Contains(src, "content") {
		return "", errors.New(`chat template: continue_final_message is set to "content" but this is not an accepted field in the chat_template`)
	}
	last, ok := msgs[len(msgs)-1].(*exec.Dict)
	if !ok {
		return "", errors.New("chat template: the final message is not an object")
	}
	content := last.Get(exec.AsValue("content"))
	switch {
	case content.IsString():
		setKey(last, "content", content.String()+continueTag)
		return content.String(), nil
	case content.IsList():
		for i := content.Len() - 1; i >= 0; i-- {
			part := dictOf(content.Index(i))
			if part == nil {
				continue
			}
			if text := part.Get(exec.AsValue("text")); !text.IsNil() {
				setKey(part, "text", pyStr(text)+continueTag)
				return pyStr(text), nil
			}
		}
		return "", errors.New("chat template: continue_final_message is set but we could not find any text to continue in the final message")
	}
	return "", errors.New(`chat template: continue_final_message is set but the final message has no "content" to continue`)
}

// cutAtTag cuts the rendered prompt where the final message ended.
func cutAtTag(out, final string) (string, error) {
	tag := strings.TrimSpace(continueTag)
	if !strings.Contains(out, pyStrip(final)) || !strings.Contains(out, tag) {
		return "", errors.New("chat template: continue_final_message is set but the final message does not appear in the chat after applying the chat template")
	}
	at := strings.LastIndex(out, tag)
	if strings.HasPrefix(out[at:], continueTag) {
		return out[:at], nil
	}
	return strings.TrimRightFunc(out[:at], pyIsSpace), nil
}
