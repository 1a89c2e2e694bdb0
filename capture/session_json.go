package capture

import (
	"encoding/json"
	"strconv"
	"time"
)

// appendSession appends s as JSON, byte for byte what json.Marshal writes
// (TestAppendSessionMatchesMarshal holds it to that): the writer encodes a
// session record with every call it stores, and encoding/json's reflection
// and time.Time's MarshalJSON cost more than the rest of the record's
// update. Fields that are rarely set or hard to escape exactly (rewards,
// drifts, strings with characters JSON or HTML escaping touches) are
// encoded by encoding/json itself; ok is false for a time json.Marshal
// refuses (a year outside 0-9999), which the caller encodes with
// json.Marshal to get its error.
func appendSession(b []byte, s *Session) (_ []byte, ok bool) {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(s.V), 10)
	b = appendField(b, "id", s.ID)
	if s.Task != "" {
		b = appendField(b, "task", s.Task)
	}
	if s.Model != "" {
		b = appendField(b, "model", s.Model)
	}
	if len(s.Tags) > 0 {
		b = append(b, `,"tags":[`...)
		for i, t := range s.Tags {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, t)
		}
		b = append(b, ']')
	}
	b = appendField(b, "state", string(s.State))
	for _, f := range [...]struct {
		name string
		t    time.Time
	}{{"since", s.Since}, {"created", s.Created}, {"last_call", s.LastCall}} {
		if y := f.t.Year(); y < 0 || y > 9999 {
			return b, false
		}
		b = append(b, ',', '"')
		b = append(b, f.name...)
		b = append(b, `":"`...)
		b = f.t.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = appendInt(b, "calls", int64(s.Calls))
	b = append(b, `,"next_seq":`...)
	b = strconv.AppendUint(b, s.NextSeq, 10)
	if len(s.Rewards) > 0 {
		b = appendMarshaled(b, "rewards", s.Rewards)
	}
	if s.RunID != "" {
		b = appendField(b, "run_id", s.RunID)
	}
	if s.Closed != "" {
		b = appendField(b, "closed_by", s.Closed)
	}
	b = appendInt(b, "drift", int64(s.Drift))
	if len(s.Drifts) > 0 {
		b = appendMarshaled(b, "drifts", s.Drifts)
	}
	if s.Compactions != 0 {
		b = appendInt(b, "compactions", int64(s.Compactions))
	}
	if len(s.Cursors) > 0 {
		b = append(b, `,"cursors":[`...)
		for i, c := range s.Cursors {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, c, 10)
		}
		b = append(b, ']')
	}
	for _, f := range [...]struct{ name, v string }{{"owner", s.Owner}, {"continued_by", s.ContinuedBy},
		{"continuation_of", s.ContinuationOf}, {"root", s.Root}} {
		if f.v != "" {
			b = appendField(b, f.name, f.v)
		}
	}
	if s.Part != 0 {
		b = appendInt(b, "part", int64(s.Part))
	}
	if s.Latest != "" {
		b = appendField(b, "latest", s.Latest)
	}
	if s.Rebuilds != 0 {
		b = appendInt(b, "rebuilds", int64(s.Rebuilds))
	}
	if s.Orphans != 0 {
		b = appendInt(b, "orphans", int64(s.Orphans))
	}
	return append(b, '}'), true
}

func appendField(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendJSONString(b, v)
}

func appendInt(b []byte, name string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

// appendMarshaled appends a field whose value encoding/json writes.
func appendMarshaled(b []byte, name string, v any) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	m, err := json.Marshal(v)
	if err != nil { // rewards are finite and drifts plain: not reached
		return append(b, "null"...)
	}
	return append(b, m...)
}

// appendJSONString appends s quoted. Printable ASCII that neither JSON nor
// encoding/json's HTML escaping touches is copied; anything else goes
// through json.Marshal, so the bytes stay encoding/json's.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			m, _ := json.Marshal(s) // a string always encodes
			return append(b, m...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
