package proxy

import (
	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
)

// jval is a JSON value of a request already checked to be valid JSON
// (inspect, jsonwalk.IsObject), as its raw text: a view of the body, ""
// when absent. Translations read lists and objects once with it, where
// gjson's ForEach scanned each element to find its end and then Get
// scanned it again for each key.
type jval string

func (v jval) isNull() bool   { return v == "" || v[0] == 'n' } // absent or null
func (v jval) isString() bool { return v != "" && v[0] == '"' }
func (v jval) isArray() bool  { return v != "" && v[0] == '[' }
func (v jval) isObject() bool { return v != "" && v[0] == '{' }

// String is the value as gjson's Result.String gives it.
func (v jval) String() string {
	if v.isString() {
		return jsonwalk.AsString(string(v))
	}
	return gjson.Parse(string(v)).String()
}

// result is the value as gjson.Parse reads it, for code that takes a
// gjson.Result.
func (v jval) result() gjson.Result { return gjson.Parse(string(v)) }

// get is the first member named key of the object v, as gjson's Get of a
// plain key finds it ("" when there is none or v is not an object).
func (v jval) get(key string) jval {
	if !v.isObject() {
		return ""
	}
	w := jsonwalk.New(string(v))
	for k := range w.Members {
		raw, _ := w.Value()
		if k == key {
			return jval(raw)
		}
	}
	return ""
}

// setFirst sets *dst to the value at the walk's position, unless an earlier
// member of the same name set it (gjson's Get finds the first); a later
// one is skipped.
func setFirst(dst *jval, w *jsonwalk.Walker) {
	raw, _ := w.Value()
	if *dst == "" {
		*dst = jval(raw)
	}
}
