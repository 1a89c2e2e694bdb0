// Package template renders Hugging Face chat templates (the Jinja
// chat_template of a model folder) byte for byte as transformers'
// apply_chat_template(tokenize=False) does, for any model family.
//
// It runs the templates on gonja (github.com/nikolalohinski/gonja/v2), a Go
// implementation of Jinja, configured as transformers configures Python's
// Jinja2 (trim_blocks, lstrip_blocks, loop controls, no file access) and
// extended through gonja's filter, method, control-structure and global
// sets where chat templates need Python's behaviour: tojson as
// json.dumps(ensure_ascii=False), ordered dicts, Python's str()/repr of
// lists and dicts, raise_exception, strftime_now, range as the sandbox's,
// {% generation %}. Parity is pinned by goldens that transformers rendered
// (testdata/golden, made by scripts/js/golden_templates.py).
package template
