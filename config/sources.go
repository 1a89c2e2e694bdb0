package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// sources records where each key was set, so a validation error can say
// "set by --train-batch" or "config.yaml line 3": the value a person must
// change is not always in the file they are looking at.
type sources map[string]string

func (s sources) set(path, where string) {
	if s != nil {
		s[path] = where
	}
}

// fromYAML records the keys a YAML document sets, with their lines.
func (s sources) fromYAML(file string, src []byte) {
	var doc yaml.Node
	if yaml.Unmarshal(src, &doc) != nil || len(doc.Content) == 0 {
		return
	}
	var visit func(n *yaml.Node, path string)
	visit = func(n *yaml.Node, path string) {
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := strings.TrimPrefix(path+"."+k.Value, ".")
			s.set(p, fmt.Sprintf("%s line %d", file, k.Line))
			visit(v, p)
		}
	}
	visit(doc.Content[0], "")
}

// explain adds to err where the key it names was set. Validation errors
// start with the key's path ("proxy.listen: ...", "selection.sample_rate 2:
// ..."); the longest recorded path that starts the message wins.
func (s sources) explain(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	best := ""
	for p := range s {
		if len(p) > len(best) && strings.HasPrefix(msg, p) && len(msg) > len(p) && (msg[len(p)] == ':' || msg[len(p)] == ' ') {
			best = p
		}
	}
	if best == "" {
		return err
	}
	return fmt.Errorf("%w (set by %s)", err, s[best])
}

// configPaths lists the YAML path of every configuration key (leaves and
// sections), for suggestions.
func configPaths() []string {
	c := Default()
	seen := map[string]bool{}
	_ = walk(reflect.ValueOf(&c).Elem(), "HONE", "", func(_, path string, _ reflect.Value) error {
		for p := path; p != ""; {
			seen[p] = true
			i := strings.LastIndexByte(p, '.')
			if i < 0 {
				break
			}
			p = p[:i]
		}
		return nil
	})
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// suggestKey names the keys whose last part is nearest to an unknown key
// (a typo: listn → proxy.listen), at most three.
func suggestKey(unknown string) string {
	best, bestD := []string(nil), -1
	for _, p := range configPaths() {
		leaf := p[strings.LastIndexByte(p, '.')+1:]
		d := editDistance(unknown, leaf)
		switch {
		case bestD < 0 || d < bestD:
			best, bestD = []string{p}, d
		case d == bestD:
			best = append(best, p)
		}
	}
	if bestD < 0 || bestD > max(2, len(unknown)/4) || len(best) > 3 {
		return ""
	}
	return strings.Join(best, " or ")
}

var (
	unknownKey   = regexp.MustCompile(`unknown key (\S+)`)
	bareDuration = regexp.MustCompile("cannot unmarshal !!(?:int|float) `([^`]*)` into time.Duration")
)

// friendlyYAMLError rewrites yaml.v3's messages: "field x not found in type
// y" becomes "unknown key x (did you mean proxy.x?)", and a number where a
// duration goes asks for a unit.
func friendlyYAMLError(err error) error {
	msg := unknownField.ReplaceAllString(err.Error(), "unknown key $1")
	msg = unknownKey.ReplaceAllStringFunc(msg, func(m string) string {
		if s := suggestKey(unknownKey.FindStringSubmatch(m)[1]); s != "" {
			return m + " (did you mean " + s + "?)"
		}
		return m
	})
	msg = bareDuration.ReplaceAllString(msg, "$1 is not a duration: write it with a unit, e.g. ${1}s, 500ms or 2m")
	return errors.New(msg)
}
