package capture

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// HeaderNames are the request header names hone reads; configurable so an
// agent's existing headers can be reused.
type HeaderNames struct {
	Session string `yaml:"session"`
	Task    string `yaml:"task"`
	Train   string `yaml:"train"`
	Tags    string `yaml:"tags"`
	Reward  string `yaml:"reward"`
	Commit  string `yaml:"commit"`
}

// DefaultHeaderNames returns the X-Hone-* names.
func DefaultHeaderNames() HeaderNames {
	return HeaderNames{
		Session: "X-Hone-Session", Task: "X-Hone-Task", Train: "X-Hone-Train",
		Tags: "X-Hone-Tags", Reward: "X-Hone-Reward", Commit: "X-Hone-Commit",
	}
}

const (
	maxIDLen  = 256
	maxTags   = 32
	maxTagLen = 128
)

// ParseHoneHeaders parses the hone request headers; get returns a header's
// value ("" when absent). Every field is parsed even when another one is bad;
// the error joins all problems so the proxy can answer 400 or ignore them.
func ParseHoneHeaders(get func(name string) string, names HeaderNames) (HoneHeaders, error) {
	var h HoneHeaders
	var errs []error
	var err error
	if h.Session, err = ParseID(get(names.Session)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", names.Session, err))
	}
	if h.Task, err = ParseID(get(names.Task)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", names.Task, err))
	}
	if h.Train, err = ParseTrain(get(names.Train)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", names.Train, err))
	}
	h.Tags = ParseTags(get(names.Tags))
	if h.Reward, err = ParseReward(get(names.Reward)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", names.Reward, err))
	}
	if h.Commit, err = ParseBool(get(names.Commit)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", names.Commit, err))
	}
	return h, errors.Join(errs...)
}

// ParseID validates a session or task id: at most 256 bytes of UTF-8 (an id
// reads back through JSON as sent), printable, no NUL. The empty string
// means unset.
func ParseID(s string) (string, error) {
	s = strings.TrimSpace(s)
	if len(s) > maxIDLen {
		return "", fmt.Errorf("id longer than %d bytes", maxIDLen)
	}
	if !utf8.ValidString(s) {
		return "", errors.New("id is not valid UTF-8")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("id contains control character %q", r)
		}
	}
	return s, nil
}

// ParseTrain parses X-Hone-Train: 1/true/yes/on train, 0/false/no/off skip,
// empty unset (-1).
func ParseTrain(s string) (int8, error) {
	if strings.TrimSpace(s) == "" {
		return -1, nil
	}
	b, err := ParseBool(s)
	if err != nil {
		return -1, err
	}
	if b {
		return 1, nil
	}
	return 0, nil
}

// ParseBool parses 1/0, true/false, yes/no, on/off (any case); empty is false.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "", "0", "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("want 1|0|true|false, got %q", truncate(s, 32))
}

// ParseReward parses a plain decimal number (JSON's number syntax, with an
// optional leading '+'); empty means no reward. Go's ParseFloat alone would
// also take hex floats ("0x1p-2"), underscores ("1_0"), "NaN" and "Inf".
func ParseReward(s string) (*float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if !decimalNumber.MatchString(s) {
		return nil, fmt.Errorf("reward %q is not a decimal number", truncate(s, 32))
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("reward %q is not a number", truncate(s, 32))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, fmt.Errorf("reward %q is not finite", truncate(s, 32))
	}
	return &v, nil
}

// decimalNumber is JSON's number grammar with an optional '+'.
var decimalNumber = regexp.MustCompile(`^[+-]?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// ParseTags splits a comma-separated tag list, trimming blanks and dropping
// empty, duplicate, over-long (>128 bytes), non-UTF-8 and excess (>32)
// tags.
func ParseTags(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var out []string
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if t == "" || len(t) > maxTagLen || !utf8.ValidString(t) || contains(out, t) {
			continue
		}
		if len(out) == maxTags {
			break
		}
		out = append(out, t)
	}
	return out
}

// addTags merges tags into the session's, which keeps its first maxTags
// distinct ones (each feedback and call may bring more).
func (rec *Session) addTags(tags []string) {
	for _, tag := range tags {
		if len(rec.Tags) < maxTags && !contains(rec.Tags, tag) {
			rec.Tags = append(rec.Tags, tag)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
