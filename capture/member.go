package capture

import "github.com/tidwall/gjson"

// member is the value of key in the object o as the engine reads it: the
// last member of that name (vLLM's JSON parsing, like Python's json and Go's
// encoding/json, keeps the last of a repeated key, where gjson's Get finds
// the first). A key spelled with escapes counts as the key it spells. Not an
// object, or no such member: an empty Result.
//
// The proxy keeps only the last of a repeated top-level key before anything
// reads a request; inside the conversation a stored request is as the agent
// sent it, so the readers of its messages and tools go through member.
func member(o gjson.Result, key string) gjson.Result {
	var out gjson.Result
	if !o.IsObject() {
		return out
	}
	o.ForEach(func(k, v gjson.Result) bool {
		if k.String() == key {
			out = v
		}
		return true
	})
	return out
}

// memberPath follows keys through nested objects with member.
func memberPath(o gjson.Result, keys ...string) gjson.Result {
	for _, k := range keys {
		o = member(o, k)
	}
	return o
}
