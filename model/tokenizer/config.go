package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Config is what tokenizer_config.json (and generation_config.json, when
// present) say about special tokens and chat formatting.
type Config struct {
	// ChatTemplate is the Jinja chat template source ("" when absent).
	ChatTemplate string
	// EOSToken is tokenizer_config's eos_token ("" when absent).
	EOSToken string
	// EOSIDs are the ids that end generation: eos_token first, then any
	// extra eos_token_id of generation_config.json.
	EOSIDs []int32
	// PadToken and PadID: the padding token, PadID -1 when none.
	PadToken string
	PadID    int32
	// BOSToken and BOSID: the beginning-of-sequence token, BOSID -1 when none.
	BOSToken string
	BOSID    int32
}

// configSpec is the subset of tokenizer_config.json hone reads. Token fields
// are either strings or AddedToken objects with a "content" key.
type configSpec struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	EOSToken     json.RawMessage `json:"eos_token"`
	PadToken     json.RawMessage `json:"pad_token"`
	BOSToken     json.RawMessage `json:"bos_token"`
}

// parseConfig reads tokenizer_config.json bytes (nil: empty config).
func parseConfig(raw []byte, ids func(string) (int32, bool)) (Config, error) {
	c := Config{PadID: -1, BOSID: -1}
	if raw == nil {
		return c, nil
	}
	var s configSpec
	if err := json.Unmarshal(raw, &s); err != nil {
		return c, fmt.Errorf("parse tokenizer_config.json: %w", err)
	}
	tmpl, err := chatTemplate(s.ChatTemplate)
	if err != nil {
		return c, err
	}
	c.ChatTemplate = tmpl
	c.EOSToken = tokenField(s.EOSToken)
	c.PadToken = tokenField(s.PadToken)
	c.BOSToken = tokenField(s.BOSToken)
	if id, ok := ids(c.EOSToken); ok && c.EOSToken != "" {
		c.EOSIDs = []int32{id}
	}
	if id, ok := ids(c.PadToken); ok && c.PadToken != "" {
		c.PadID = id
	}
	if id, ok := ids(c.BOSToken); ok && c.BOSToken != "" {
		c.BOSID = id
	}
	return c, nil
}

// chatTemplate accepts a template string or HF's list of named templates
// (the one named "default" wins).
func chatTemplate(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct{ Name, Template string }
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("parse chat_template: %w", err)
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", nil
}

// tokenField reads a token given as a string or as {"content": ...}.
func tokenField(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct{ Content string }
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Content
	}
	return ""
}

// addGenerationEOS appends eos_token_id values of generation_config.json.
func (c *Config) addGenerationEOS(path string) error {
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	var g struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		return fmt.Errorf("parse %s: %w", filepath.Base(path), err)
	}
	var ids []int32
	var one int32
	var list []*int32 // a null in the list is refused, not read as id 0
	switch {
	case len(g.EOS) == 0 || string(g.EOS) == "null": // absent: none (a null would leave one at 0)
	case json.Unmarshal(g.EOS, &one) == nil:
		ids = []int32{one}
	default:
		if err := json.Unmarshal(g.EOS, &list); err != nil {
			return fmt.Errorf("parse %s: eos_token_id: %w", filepath.Base(path), err)
		}
		for _, id := range list {
			if id == nil {
				return fmt.Errorf("parse %s: eos_token_id: null in the list", filepath.Base(path))
			}
			ids = append(ids, *id)
		}
	}
	for _, id := range ids {
		if !containsID(c.EOSIDs, id) {
			c.EOSIDs = append(c.EOSIDs, id)
		}
	}
	return nil
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
