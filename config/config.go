// Package config loads hone's configuration: defaults, then a YAML file,
// then HONE_* environment variables, then command-line flags. Unknown keys
// and invalid values fail with a message naming the key.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/engine"
	"github.com/hone-rl/hone/proxy"
	"github.com/hone-rl/hone/rollout"
	"github.com/hone-rl/hone/trainer"
	"gopkg.in/yaml.v3"
)

// Config is the whole of hone's configuration; config.example.yaml
// documents every key with its default.
type Config struct {
	// Data is the data folder: Badger at <data>/capture, adapters at
	// <data>/checkpoints unless trainer.checkpoint_dir is set.
	Data string `yaml:"data"`
	// Model is the model folder of the embedded engine, started when
	// engine.engines is empty. Empty: the shipped tiny model.
	Model    string          `yaml:"model"`
	Log      LogOptions      `yaml:"log"`
	Proxy    proxy.Options   `yaml:"proxy"`
	Engine   proxy.Upstream  `yaml:"engine"`
	Embedded engine.Options  `yaml:"engine_embedded"`
	Capture  capture.Options `yaml:",inline"` // capture:, session:, selection:, reward:, retention:
	Trainer  trainer.Options `yaml:"trainer"`
	Rollout  rollout.Options `yaml:"rollout"`
	Runtime  RuntimeOptions  `yaml:"runtime"`

	src sources // where each key was set (file, environment, flag), for errors
}

// LogOptions configure log/slog.
type LogOptions struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // text or json
}

// Default returns the configuration with every default set.
func Default() Config {
	p := proxy.DefaultOptions()
	return Config{
		Data:     "./data",
		Log:      LogOptions{Level: "info", Format: "text"},
		Proxy:    p,
		Engine:   p.Upstream,
		Embedded: engine.DefaultOptions(),
		Capture:  capture.DefaultOptions(),
		Runtime:  DefaultRuntime(),
		Trainer:  trainer.DefaultOptions(),
		Rollout:  rollout.DefaultOptions(),
	}
}

// Load returns the defaults overlaid with the YAML file at path (if not
// empty) and the HONE_* variables of env.
func Load(path string, env []string) (Config, error) {
	c := Default()
	c.src = sources{}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("read config: %w", err)
		}
		if err := decodeYAML(b, &c); err != nil {
			return c, fmt.Errorf("config %s: %w", path, err)
		}
		c.src.fromYAML(path, b)
	}
	if err := applyEnv(&c, env); err != nil {
		return c, err
	}
	return c, nil
}

func decodeYAML(b []byte, c *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return friendlyYAMLError(nameKeys(err, b))
	}
	return nil
}

// unmarshalRef matches one of yaml.v3's "line N: cannot unmarshal !!tag
// `value` into type" errors; value is absent for collections.
var unmarshalRef = regexp.MustCompile("line (\\d+): (?:cannot unmarshal (!![a-z]+)(?: `([^`]*)`)?)?")

// nameKeys adds the key each "line N:" of a YAML error is about, so type
// errors name the key and not only the value. The key is looked up in the
// document's node tree (flow mappings, "? key" entries and values on a line
// of their own included), falling back to the line's text.
func nameKeys(err error, src []byte) error {
	var doc yaml.Node
	parsed := yaml.Unmarshal(src, &doc) == nil
	lines := strings.Split(string(src), "\n")
	msg := unmarshalRef.ReplaceAllStringFunc(err.Error(), func(m string) string {
		sub := unmarshalRef.FindStringSubmatch(m)
		n, _ := strconv.Atoi(sub[1])
		key, ok := "", false
		if parsed {
			key, ok = keyOnLine(&doc, n, sub[2], sub[3])
		}
		if !ok && n >= 1 && n <= len(lines) {
			key, ok = keyAt(lines, n-1)
			key = keyName(strings.TrimPrefix(key, "- "))
		}
		if !ok {
			return m
		}
		return fmt.Sprintf("line %d (key %s): ", n, key) + strings.TrimPrefix(m, fmt.Sprintf("line %d: ", n))
	})
	return errors.New(msg)
}

// keyOnLine names the mapping key on line n whose key or value node is the
// one a type error describes (its tag and, for a scalar, its value); without
// such a node, the first key on line n, else the first key whose value starts
// there ("proxy:\n  0"). A key that is itself a collection ("? [a]: 1") is
// named by its flow-style text.
func keyOnLine(root *yaml.Node, n int, tag, value string) (string, bool) {
	var exact, onLine, valueOnLine *yaml.Node
	var walk func(*yaml.Node)
	walk = func(x *yaml.Node) {
		for i := 0; x.Kind == yaml.MappingNode && i+1 < len(x.Content); i += 2 {
			k, v := x.Content[i], x.Content[i+1]
			switch {
			case exact == nil && tag != "" && (nodeIs(k, n, tag, value) || nodeIs(v, n, tag, value)):
				exact = k
			case onLine == nil && k.Line == n:
				onLine = k
			case valueOnLine == nil && v.Line == n:
				valueOnLine = k
			}
		}
		for _, c := range x.Content {
			walk(c)
		}
	}
	walk(root)
	if exact == nil {
		exact = onLine
	}
	if exact == nil {
		exact = valueOnLine
	}
	if exact == nil {
		return "", false
	}
	if exact.Kind == yaml.ScalarNode {
		return keyName(exact.Value), true
	}
	flow := *exact
	flow.Style = yaml.FlowStyle
	b, err := yaml.Marshal(&flow)
	if err != nil {
		return "", false
	}
	return strconv.Quote(strings.TrimSpace(string(b))), true
}

// nodeIs reports whether x starts on line n with the given tag and, for a
// scalar, value.
func nodeIs(x *yaml.Node, n int, tag, value string) bool {
	return x.Line == n && x.ShortTag() == tag && (x.Kind != yaml.ScalarNode || x.Value == value)
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// keyName is a key as an error names it: bare when it is a plain name
// ("proxy.lisen"), Go-quoted otherwise, so a key holding spaces, brackets or
// nothing at all still reads as one key.
func keyName(key string) string {
	if plainKey.MatchString(key) {
		return key
	}
	return strconv.Quote(key)
}

// keyAt is the key of line i, or for a value on a line of its own (a key's
// value under it, "proxy:\n  0") the nearest key above it indented less.
func keyAt(lines []string, i int) (string, bool) {
	if key, _, ok := strings.Cut(strings.TrimSpace(lines[i]), ":"); ok {
		return key, true
	}
	indent := func(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }
	in := indent(lines[i])
	for j := i - 1; j >= 0; j-- {
		t := strings.TrimSpace(lines[j])
		if t == "" || strings.HasPrefix(t, "#") || indent(lines[j]) >= in {
			continue
		}
		key, _, ok := strings.Cut(t, ":")
		return key, ok
	}
	return "", false
}

// unknownField matches yaml.v3's "field x not found in type y".
var unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)

// Finish derives the dependent settings and validates everything. An error
// names the key, its value and what is wanted, and where the key was set.
func (c *Config) Finish() error {
	return c.src.explain(c.finish())
}

func (c *Config) finish() error {
	c.Proxy.Upstream = c.Engine
	c.Proxy.Continuity = c.Capture.Queue.Continuity
	if err := checkFinite(reflect.ValueOf(c).Elem(), ""); err != nil {
		return err
	}
	if c.Trainer.CheckpointDir == "" {
		c.Trainer.CheckpointDir = filepath.Join(c.Data, "checkpoints")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log.level: %q is not one of debug, info, warn, error", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		return fmt.Errorf("log.format: %q is not text or json", c.Log.Format)
	}
	if err := c.Proxy.Validate(); err != nil {
		return err
	}
	if err := c.Capture.Validate(); err != nil {
		return err
	}
	if err := c.Rollout.Validate(); err != nil {
		return err
	}
	if err := c.Runtime.validate(); err != nil {
		return err
	}
	// Checked even with the trainer off: a misspelt backend in the file or
	// in HONE_TRAINER_BACKEND should not wait for --train to show.
	if err := c.Trainer.ValidateBackend(); err != nil {
		return fmt.Errorf("trainer.backend: %q is not one of cpu, cuda, auto (cuda needs hone built with -tags cuda and a GPU; "+
			"auto uses cuda when both are there, else cpu)", c.Trainer.Backend)
	}
	if b := c.Embedded.Backend; b != "cpu" && b != "cuda" && b != "auto" {
		return fmt.Errorf("engine_embedded.backend: %q is not one of cpu, cuda, auto", b)
	}
	if w := c.Embedded.WeightDType; w != "auto" && w != "float32" && w != "bfloat16" {
		return fmt.Errorf("engine_embedded.weight_dtype: %q is not one of auto, float32, bfloat16", w)
	}
	if a := c.Embedded.Autocast; a != "auto" && a != "on" && a != "off" {
		return fmt.Errorf("engine_embedded.autocast: %q is not one of auto, on, off", a)
	}
	if c.Trainer.Enabled {
		if err := c.Trainer.Validate(); err != nil {
			return fmt.Errorf("trainer.%w", err)
		}
	}
	return nil
}
