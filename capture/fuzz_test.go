package capture

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func FuzzParseHoneHeaders(f *testing.F) {
	f.Add("sess-1", "task", "1", "a, b,,a", "0.5", "1")
	f.Add("", "", "true", "", "-1e3", "yes")
	f.Add("x\x00y", "t", "maybe", ",,,", "NaN", "2")
	f.Add("s", "", "0", "x", "inf", "false")
	f.Add("s\xff", "t\xc3", "1", "ok,\xfe\xff", "1", "1")
	f.Fuzz(func(t *testing.T, sess, task, train, tags, reward, commit string) {
		vals := map[string]string{"X-Hone-Session": sess, "X-Hone-Task": task, "X-Hone-Train": train,
			"X-Hone-Tags": tags, "X-Hone-Reward": reward, "X-Hone-Commit": commit}
		h, err := ParseHoneHeaders(func(n string) string { return vals[n] }, DefaultHeaderNames())
		if h.Reward != nil && (math.IsNaN(*h.Reward) || math.IsInf(*h.Reward, 0)) {
			t.Fatalf("non-finite reward accepted: %v", *h.Reward)
		}
		if h.Train < -1 || h.Train > 1 {
			t.Fatalf("train %d", h.Train)
		}
		if len(h.Tags) > maxTags {
			t.Fatalf("%d tags", len(h.Tags))
		}
		for _, tag := range h.Tags {
			if !utf8.ValidString(tag) {
				t.Fatalf("tag %q is not UTF-8", tag)
			}
		}
		for _, id := range []string{h.Session, h.Task} {
			if _, e := ParseID(id); e != nil {
				t.Fatalf("invalid id %q returned", id)
			}
		}
		_ = err
	})
}

func TestParseHoneHeaders(t *testing.T) {
	vals := map[string]string{"X-Hone-Session": " s1 ", "X-Hone-Train": "false", "X-Hone-Tags": "a, b,,a",
		"X-Hone-Reward": "0.75", "X-Hone-Commit": "1"}
	h, err := ParseHoneHeaders(func(n string) string { return vals[n] }, DefaultHeaderNames())
	if err != nil {
		t.Fatal(err)
	}
	want := HoneHeaders{Session: "s1", Train: 0, Tags: []string{"a", "b"}, Reward: ptr(0.75), Commit: true}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("got %+v, want %+v", h, want)
	}
	vals = map[string]string{"X-Hone-Session": "s\xff1", "X-Hone-Tags": "a,b\xfe,c"}
	h, err = ParseHoneHeaders(func(n string) string { return vals[n] }, DefaultHeaderNames())
	if err == nil || !strings.Contains(err.Error(), "UTF-8") || h.Session != "" || !reflect.DeepEqual(h.Tags, []string{"a", "c"}) {
		t.Fatalf("a session id and a tag that are not UTF-8: %+v %v", h, err)
	}
	vals = map[string]string{"X-Hone-Reward": "lots", "X-Hone-Train": "2"}
	h, err = ParseHoneHeaders(func(n string) string { return vals[n] }, DefaultHeaderNames())
	if err == nil || h.Reward != nil || h.Train != -1 {
		t.Fatalf("bad headers: %+v %v", h, err)
	}
}

func FuzzFeedbackBodies(f *testing.F) {
	f.Add([]byte(`{"session":"s","reward":1,"tags":["a"],"comment":"c"}`))
	f.Add([]byte(`{"msg_ids":["chatcmpl-1",2],"reward":0.5,"task_id":3,"run_id":"r"}`))
	f.Add([]byte(`{"msg_ids":null,"reward":null,"task_id":{},"run_id":[]}`))
	f.Add([]byte(`{"cursor":18446744073709551615}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fb FeedbackReq
		if json.Unmarshal(b, &fb) == nil {
			_ = fb.check()
		}
		var tr TrinityFeedbackReq
		if json.Unmarshal(b, &tr) == nil {
			ids, reward, task, _, err := tr.parse()
			if err == nil {
				if math.IsNaN(reward) || len(ids) != len(tr.MsgIDs) {
					t.Fatalf("parse accepted %q", b)
				}
				if _, e := ParseID(task); e != nil {
					t.Fatalf("bad task id %q accepted", task)
				}
			}
		}
	})
}

func FuzzDecodeCall(f *testing.F) {
	v := newVocab()
	prompts, replies := toolSession()
	c := v.makeCall("id", "s", prompts[1], replies[1], 3)
	c.Hone.Reward = ptr(1)
	c.Hone.Tags = []string{"x"}
	f.Add(encodeCall(nil, c))
	f.Add(compactCall(encodeCall(nil, longCall()), nil))
	f.Add([]byte{SchemaVersion})
	f.Add([]byte{SchemaVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCall(b)
		if err != nil {
			return
		}
		again, err := decodeCall(encodeCall(nil, c))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !bytes.Equal(encodeCall(nil, again), encodeCall(nil, c)) {
			t.Fatal("encoding not stable")
		}
	})
}

// longCall is a call whose record is large and compressible, as a long
// agent prompt makes it.
func longCall() *Call {
	v := newVocab()
	prompts, replies := toolSession()
	c := v.makeCall("long", "s", prompts[1], replies[1], 3)
	c.Request = []byte(`{"messages":[{"role":"system","content":"` + strings.Repeat("Read the file, then fix the bug. ", 1200) + `"}]}`)
	return c
}

// Large records are stored compressed with their sequence number in the
// clear (patched after compression); small and incompressible ones plain.
func TestCallCompression(t *testing.T) {
	c := longCall()
	plain := encodeCall(nil, c)
	var scratch []byte
	rec := compactCall(plain, &scratch)
	if rec[0] != compressedCall || len(rec) > len(plain)/4 {
		t.Fatalf("a %d-byte compressible record became %d bytes (format %#x)", len(plain), len(rec), rec[0])
	}
	if len(scratch) == 0 || cap(rec) != len(rec) {
		t.Fatalf("scratch %d bytes kept, record %d bytes in a %d-byte allocation", len(scratch), len(rec), cap(rec))
	}
	first := bytes.Clone(rec)
	other := longCall()
	other.Request = []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("Another prompt entirely. ", 900) + `"}]}`)
	if compactCall(encodeCall(nil, other), &scratch); !bytes.Equal(rec, first) {
		t.Fatal("compressing the next record through the same scratch changed the first")
	}
	patchSeq(rec, 42)
	c.Seq = 42
	got, err := decodeCall(rec)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("compressed round trip: %v", err)
	}
	for n := 0; n < len(rec); n++ {
		if _, err := decodeCall(rec[:n]); err == nil {
			t.Fatalf("truncated compressed record of %d bytes decoded", n)
		}
	}
	answer := newVocab().makeCall("a", "s", nil, msg{Role: "assistant", Content: "hi"}, 1)
	var lps []string
	for i := range 40 { // a chat answer with logprobs, as vLLM writes it: 3.6 KB
		lps = append(lps, fmt.Sprintf(`{"token":"t%d","logprob":-0.%07d,"bytes":[116],"top_logprobs":[]}`, i, i*7919))
	}
	answer.Response = []byte(`{"choices":[{"logprobs":{"content":[` + strings.Join(lps, ",") + `]}}]}`)
	if r := compactCall(encodeCall(nil, answer), nil); r[0] != compressedCall {
		t.Errorf("a %d-byte answer with logprobs was not compressed", len(answer.Response))
	}
	small := encodeCall(nil, newVocab().makeCall("s", "s", nil, msg{Role: "assistant", Content: "hi"}, 1))
	if r := compactCall(small, nil); &r[0] != &small[0] {
		t.Error("a small record was compressed")
	}
	noise := make([]byte, 64<<10)
	rand.New(rand.NewSource(1)).Read(noise)
	c.Request = noise
	if r := compactCall(encodeCall(nil, c), nil); r[0] != SchemaVersion {
		t.Error("an incompressible record was stored compressed")
	}
}

func TestCallCodecRoundTrip(t *testing.T) {
	v := newVocab()
	prompts, replies := toolSession()
	c := v.makeCall("id", "s", prompts[1], replies[1], 3)
	c.Seq, c.TTFT, c.Latency = 7, time.Millisecond, 2*time.Second
	c.Hone = HoneHeaders{Session: "s", Task: "t", Train: 1, Tags: []string{"a", "b"}, Reward: ptr(-0.5), Commit: true}
	c.Usage = Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
	got, err := decodeCall(encodeCall(nil, c))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, c)
	}
	for n := 0; n < len(encodeCall(nil, c)); n++ {
		if _, err := decodeCall(encodeCall(nil, c)[:n]); err == nil {
			t.Fatalf("truncated record of %d bytes decoded", n)
		}
	}
}

func FuzzPrefixHashes(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"image_url"}],"tool_calls":[{"function":{"name":"f","arguments":"{\"b\":1,\"a\":2}"}}]}]}`))
	f.Add([]byte(`{"messages":"nope"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		hs, _, ok := prefixHashes(b)
		if ok && len(hs) == 0 {
			t.Fatal("ok without hashes")
		}
	})
}

func FuzzDecodeExperience(f *testing.F) {
	good, _ := encodeExperience(&Experience{Session: "s", Tokens: []int32{1, 2}, Mask: []uint8{0, 1}})
	f.Add(good)
	f.Add([]byte{expZstd, 0x28, 0xb5, 0x2f, 0xfd})
	f.Add([]byte(`{"session":"s"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Experience
		if decodeExperienceInto(b, &e) == nil {
			again, err := encodeExperience(&e)
			if err != nil {
				t.Fatal(err)
			}
			var e2 Experience
			if err := decodeExperienceInto(again, &e2); err != nil || !reflect.DeepEqual(e, e2) {
				t.Fatalf("round trip: %v", err)
			}
		}
	})
}

// FuzzTrie builds sessions from arbitrary bytes: each call's prompt reuses a
// prefix of an earlier path (or not) plus new tokens. Every leaf must
// reproduce its last call's prompt + completion exactly, with mask 1 on
// exactly the completions of the calls on its path.
func FuzzTrie(f *testing.F) {
	f.Add([]byte{3, 0, 5, 2, 1, 9, 4, 3, 2, 0, 0, 7})
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{1, 255, 3, 3, 3, 1, 255, 2, 2, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		var calls []*Call
		var paths [][]int32
		for i := 0; len(b) >= 3 && i < 32; i++ {
			base, keep, n := int(b[0]), int(b[1]), int(b[2])%8
			b = b[3:]
			var prompt []int32
			if len(paths) > 0 && base%2 == 1 {
				p := paths[base%len(paths)]
				prompt = append(prompt, p[:keep%(len(p)+1)]...)
			}
			for j := 0; j < n && len(b) > 0; j++ {
				prompt = append(prompt, int32(b[0]))
				b = b[1:]
			}
			comp := []int32{int32(1000 + i), 151645}
			c := &Call{ID: fmt.Sprint(i), PromptIDs: prompt, Choices: []Choice{{TokenIDs: comp, Logprobs: []float32{-1, -2}}}}
			calls = append(calls, c)
			paths = append(paths, append(append([]int32(nil), prompt...), comp...))
		}
		tr, drifts := buildTrie(calls)
		if len(drifts) != tr.drift {
			t.Fatalf("%d drifts explained, %d counted", len(drifts), tr.drift)
		}
		for _, leaf := range tr.leaves() {
			tokens, mask, _, _, steps := trajectory(leaf, func(string) *float64 { return nil })
			want := append(append([]int32(nil), leaf.call.PromptIDs...), leaf.call.Choices[0].TokenIDs...)
			if !equalIDs(tokens, want) {
				t.Fatalf("leaf %s: tokens %v, want %v", leaf.call.ID, tokens, want)
			}
			ones := 0
			for _, m := range mask {
				ones += int(m)
			}
			if ones != 2*len(steps) {
				t.Fatalf("leaf %s: %d mask-1 tokens for %d steps", leaf.call.ID, ones, len(steps))
			}
		}
		if len(tr.nodes) != len(calls) {
			t.Fatalf("%d nodes for %d calls", len(tr.nodes), len(calls))
		}
	})
}

// TestResponseNulls: a record stores the spans of Response that
// ResponseNulls names as null, and the whole response when the spans are
// not sorted, apart and within it.
func TestResponseNulls(t *testing.T) {
	body := []byte(`{"choices":[{"prompt_token_ids":[7,8]}],"prompt_token_ids":[1,2,3]}`)
	first := [2]int{bytes.Index(body, []byte("[7,8]")), bytes.Index(body, []byte("[7,8]")) + 5}
	second := [2]int{bytes.Index(body, []byte("[1,2,3]")), bytes.Index(body, []byte("[1,2,3]")) + 7}
	for _, tc := range []struct {
		spans [][2]int
		want  string
	}{
		{nil, string(body)},
		{[][2]int{second}, `{"choices":[{"prompt_token_ids":[7,8]}],"prompt_token_ids":null}`},
		{[][2]int{first, second}, `{"choices":[{"prompt_token_ids":null}],"prompt_token_ids":null}`},
		{[][2]int{second, first}, string(body)},
		{[][2]int{{3, 2}}, string(body)},
		{[][2]int{{0, len(body) + 1}}, string(body)},
	} {
		c := newVocab().makeCall("n", "s", nil, msg{Role: "assistant", Content: "hi"}, 1)
		c.Response, c.ResponseNulls = body, tc.spans
		got, err := decodeCall(compactCall(encodeCall(nil, c), nil))
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Response) != tc.want {
			t.Errorf("spans %v: stored %s, want %s", tc.spans, got.Response, tc.want)
		}
	}
}

// TestIDsEncoding: ids writes what binary.AppendVarint of each difference
// writes, for ids at the edges of int32 and at random.
func TestIDsEncoding(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	cases := [][]int32{nil, {0}, {math.MaxInt32, math.MinInt32, math.MaxInt32}, {-1, 1, -64, 64, 8191, -8192}}
	for range 20 {
		ids := make([]int32, r.Intn(300))
		for i := range ids {
			ids[i] = int32(r.Uint32()) >> uint(r.Intn(32))
		}
		cases = append(cases, ids)
	}
	for _, ids := range cases {
		want := binary.AppendUvarint(nil, uint64(len(ids)))
		var prev int32
		for _, id := range ids {
			want = binary.AppendVarint(want, int64(id)-int64(prev))
			prev = id
		}
		e := encoder{b: []byte{9}}
		e.ids(ids)
		if !bytes.Equal(e.b[1:], want) || e.b[0] != 9 {
			t.Fatalf("ids(%v) = %x, AppendVarint %x", ids, e.b, want)
		}
		d := decoder{b: e.b[1:]}
		if got := d.ids(); len(ids) > 0 && !slices.Equal(got, ids) {
			t.Fatalf("ids(%v) decoded as %v", ids, got)
		}
	}
}
