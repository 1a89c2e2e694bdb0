package capture

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"testing"
	"time"
)

// TestAppendSessionMatchesMarshal: appendSession writes what json.Marshal
// writes for the same record, byte for byte, over random records with every
// field set or empty, strings that JSON or HTML escaping touches, and times
// in several zones; a year json.Marshal refuses falls back to it.
func TestAppendSessionMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	strs := []string{"", "s-1", "call-0192f0c4-7e3a-7b1e-8d4f-3c2b1a0f9e8d", "日本語", "<b>&amp;", `a"b\c`, "x\x00y\n\t",
		"bad\xffutf8", "line\u2028sep", "key:3f2a", "\x7f", "tab\there"}
	str := func() string { return strs[r.Intn(len(strs))] }
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("x", 5*3600+1800), time.FixedZone("y", -7*3600)}
	tm := func() time.Time {
		switch r.Intn(5) {
		case 0:
			return time.Time{}
		case 1:
			return time.Unix(r.Int63n(4e9), 0).In(zones[r.Intn(len(zones))])
		}
		return time.Unix(r.Int63n(4e9), r.Int63n(1e9)).In(zones[r.Intn(len(zones))])
	}
	strSlice := func() []string {
		switch r.Intn(3) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		out := make([]string, 1+r.Intn(3))
		for i := range out {
			out[i] = str()
		}
		return out
	}
	num := func() int { return []int{0, 1, 7, -3, 1 << 40}[r.Intn(5)] }
	for i := range 5000 {
		s := &Session{V: sessionVersion, ID: str(), Task: str(), Model: str(), Tags: strSlice(), State: State(str()),
			Since: tm(), Created: tm(), LastCall: tm(), Calls: num(), NextSeq: uint64(r.Int63()), RunID: str(),
			Closed: str(), Drift: num(), Compactions: num(), Owner: str(), ContinuedBy: str(),
			ContinuationOf: str(), Root: str(), Part: num(), Latest: str(), Rebuilds: num(), Orphans: num()}
		if r.Intn(2) == 0 {
			s.Rewards = []Reward{{Value: r.NormFloat64() * 1e-7, Source: str(), Tags: strSlice(), At: tm()},
				{Value: 1e21, Call: str(), Source: "header", Comment: str(), At: tm()}}
		}
		if r.Intn(3) == 0 {
			s.Drifts = []Drift{{Call: str(), Seq: 3, Against: str(), Message: -1, Role: str(), Cause: str(), Detail: str()}}
		}
		if r.Intn(2) == 0 {
			s.Cursors = []uint64{uint64(r.Int63()), 0, 1}[:1+r.Intn(3)]
		}
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendSession(nil, s)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("record %d:\nappendSession %s (ok %v)\njson.Marshal  %s", i, got, ok, want)
		}
	}
	s := &Session{ID: "s", Since: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, ok := appendSession(nil, s); ok {
		t.Error("a year json.Marshal refuses was encoded")
	}
	if _, err := encodeSession(s); err == nil {
		t.Error("encodeSession: no error for a year json.Marshal refuses")
	}
}

// BenchmarkEncodeSession is the session record the writer encodes with a
// header-less call: a new open session.
func BenchmarkEncodeSession(b *testing.B) {
	now := time.Now().UTC()
	s := &Session{ID: "0192f0c4-7e3a-7b1e-8d4f-3c2b1a0f9e8d", Model: "Qwen/Qwen3-8B", State: StateOpen, Since: now,
		Created: now, LastCall: now, Calls: 1, NextSeq: 1, Owner: "key:3f2a9c"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeSession(s); err != nil {
			b.Fatal(err)
		}
	}
}
