package capture

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// benchCall builds a call with promptN prompt tokens and completionN
// completion tokens, with request and response bodies of realistic size
// (about 4 bytes of text per token).
func benchCall(r *rand.Rand, id, session string, promptN, completionN int) *Call {
	ids := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(r.IntN(150000))
		}
		return out
	}
	lps := make([]float32, completionN)
	for i := range lps {
		lps[i] = -r.Float32() * 3
	}
	words := func(n int) string {
		var sb strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&sb, "w%d ", r.IntN(5000))
		}
		return sb.String()
	}
	req := fmt.Sprintf(`{"model":"qwen","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":%q}]}`, words(promptN))
	resp := fmt.Sprintf(`{"id":"chatcmpl-%s","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, id, words(completionN))
	now := time.Now()
	return &Call{ID: id, Session: session, Route: RouteChat, Model: "qwen", Upstream: "qwen@v3", Engine: "e0", Version: 3,
		ResponseID: "chatcmpl-" + id, Start: now, End: now, Latency: time.Second, Status: StatusOK, HTTPStatus: 200,
		Request: []byte(req), Response: []byte(resp), PromptIDs: ids(promptN),
		Choices: []Choice{{TokenIDs: ids(completionN), Logprobs: lps, Content: "x", FinishReason: "stop"}},
		Usage:   Usage{PromptTokens: promptN, CompletionTokens: completionN, TotalTokens: promptN + completionN},
		Hone:    HoneHeaders{Session: session, Train: -1}}
}

// BenchmarkRecordEnqueue measures the hot-path Record call (p50/p99 in ns;
// ns/op also counts building each call). "queued" sizes the queue so that
// nothing is dropped (up to 1M calls); "default" uses the default queue,
// where a writer that falls behind makes Record drop (and count) instead.
func BenchmarkRecordEnqueue(b *testing.B) {
	for _, name := range []string{"queued", "default"} {
		b.Run(name, func(b *testing.B) {
			o := DefaultOptions()
			o.Retention.Interval = time.Hour
			if name == "queued" {
				o.Queue.Size = min(b.N+1, 1<<20)
			}
			s, err := Open(b.TempDir(), o, nil)
			if err != nil {
				b.Fatal(err)
			}
			benchRecord(b, s)
			b.ReportMetric(counterValue(s.m.dropped), "dropped")
			_ = s.Close()
		})
	}
}

func benchRecord(b *testing.B, s *Store) {
	proto := benchCall(rand.New(rand.NewPCG(1, 2)), "p", "s", 768, 256)
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := *proto // the store owns each recorded call: a fresh copy
		c.ID = strconv.Itoa(i)
		c.Session = "s" + strconv.Itoa(i/8)
		c.Hone.Session = c.Session
		t0 := time.Now()
		s.Record(&c)
		lat[i] = time.Since(t0)
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkAdmitInferred measures Admit for a header-less 6-message
// conversation (canonical hashing and cache look-ups).
func BenchmarkAdmitInferred(b *testing.B) {
	s := openBench(b, "drop")
	defer s.Close()
	prompts, _ := toolSession()
	body := newVocab().makeCall("a", "", prompts[2], msg{Role: "assistant"}, 1).Request
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		s.Admit(&Admission{CallID: "a", Route: RouteChat, Hone: HoneHeaders{Train: -1}, Body: body})
		lat[i] = time.Since(t0)
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkAdmitLongPrompt: Admit for a header-less chat whose system
// prompt is 32 KB (an agent's instructions).
func BenchmarkAdmitLongPrompt(b *testing.B) {
	s := openBench(b, "drop")
	defer s.Close()
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("Be careful. ", 32768/12) +
		`"},{"role":"user","content":"Hello!"}]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		s.Admit(&Admission{CallID: "a", Route: RouteChat, Hone: HoneHeaders{Train: -1}, Body: body})
	}
}

// BenchmarkAdmitLongPromptLines is BenchmarkAdmitLongPrompt with the
// instructions in lines of 80 characters, as agents write them: JSON escapes
// every newline.
func BenchmarkAdmitLongPromptLines(b *testing.B) {
	s := openBench(b, "drop")
	defer s.Close()
	line := strings.Repeat("Be careful. ", 6) + `Use the \"tools\".\n`
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat(line, 32768/len(line)) +
		`"},{"role":"user","content":"Hello!"}]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		s.Admit(&Admission{CallID: "a", Route: RouteChat, Hone: HoneHeaders{Train: -1}, Body: body})
	}
}

// BenchmarkAdmitToolHistory: Admit for a header-less coding agent's 41st
// call: 40 earlier turns, each a tool call (a path and a few lines of
// code as arguments) and its result, all sent again with every call.
func BenchmarkAdmitToolHistory(b *testing.B) {
	body := toolHistoryBody(b)
	s := openBench(b, "drop")
	defer s.Close()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		s.Admit(&Admission{CallID: "a", Route: RouteChat, Hone: HoneHeaders{Train: -1}, Body: body})
	}
}

// toolHistoryBody is a coding agent's request after 40 edit_file calls
// (testdata/requests/README.md).
func toolHistoryBody(b *testing.B) []byte {
	body, err := os.ReadFile("../testdata/requests/tool-history-40.json")
	if err != nil {
		b.Fatal(err)
	}
	return body
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*50/100].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

func openBench(b *testing.B, onFull string) *Store {
	b.Helper()
	o := DefaultOptions()
	o.Queue.OnFull = onFull
	o.Retention.Interval = time.Hour
	s, err := Open(b.TempDir(), o, nil)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkStoreThroughput measures sustained stored calls per second with
// 1k-token calls (768 prompt + 256 completion tokens, 8 calls per session)
// and the on-disk bytes per call after close.
func BenchmarkStoreThroughput(b *testing.B) {
	dir := b.TempDir()
	o := DefaultOptions()
	o.Queue.OnFull = "block"
	o.Retention.Interval = time.Hour
	s, err := Open(dir, o, nil)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	protos := make([]*Call, 64)
	for i := range protos {
		protos[i] = benchCall(r, "p", "s", 768, 256)
	}
	calls := make([]*Call, b.N)
	for i := range calls {
		c := *protos[i%len(protos)]
		c.ID = fmt.Sprintf("c%09d", i)
		c.ResponseID = "chatcmpl-" + c.ID
		c.Session = fmt.Sprintf("s%08d", i/8)
		c.Hone.Session = c.Session
		calls[i] = &c
	}
	b.ResetTimer()
	t0 := time.Now()
	for _, c := range calls {
		s.Record(c)
	}
	if err := s.do(context.Background(), func() error { return nil }); err != nil {
		b.Fatal(err)
	}
	el := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "calls/s")
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(diskBytes(dir))/float64(b.N), "disk-B/call")
	b.ReportMetric(float64(len(encodeCall(nil, calls[0]))), "record-B/call")
}

// diskBytes is the space the files under dir occupy (allocated blocks, so
// sparse preallocated value-log files count only what is written).
func diskBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// BenchmarkExportRows measures building export rows (trajectory + steps)
// from stored 3-call sessions.
func BenchmarkExportRows(b *testing.B) {
	s := openBench(b, "block")
	defer s.Close()
	v := newVocab()
	prompts, replies := toolSession()
	const sessions = 200
	for i := 0; i < sessions; i++ {
		id := fmt.Sprintf("x%d", i)
		for j := range prompts {
			s.Record(v.makeCall(fmt.Sprintf("%s-%d", id, j), id, prompts[j], replies[j], 1))
		}
	}
	if err := s.do(context.Background(), func() error { return nil }); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	rows := 0
	t0 := time.Now()
	for i := 0; i < b.N; i++ {
		err := s.Export(context.Background(), ExportFilter{Trajectories: true, Steps: true}, func(*Row) error { rows++; return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)/time.Since(t0).Seconds(), "rows/s")
}

// BenchmarkTrieLongSession stitches a 100-call session whose prompt grows
// by about 300 tokens per turn (about 30k tokens at the end).
func BenchmarkTrieLongSession(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	var calls []*Call
	var prompt []int32
	for i := 0; i < 100; i++ {
		prompt = append(prompt, benchCall(r, "x", "s", 250, 0).PromptIDs...)
		c := benchCall(r, fmt.Sprint(i), "s", 0, 50)
		c.PromptIDs = append([]int32(nil), prompt...)
		calls = append(calls, c)
		prompt = append(prompt, c.Choices[0].TokenIDs...)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr, _ := buildTrie(calls)
		if len(tr.leaves()) != 1 || tr.drift != 0 {
			b.Fatalf("leaves %d drift %d", len(tr.leaves()), tr.drift)
		}
	}
}

// BenchmarkEncodeCall measures encoding one 1k-token call record.
func BenchmarkEncodeCall(b *testing.B) {
	c := benchCall(rand.New(rand.NewPCG(7, 8)), "p", "s", 768, 256)
	buf := encodeCall(nil, c)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf = encodeCall(buf[:0], c)
	}
}

// BenchmarkHeaderCommit: one-call sessions whose call carries X-Hone-Reward
// and X-Hone-Commit (each readies its session), recorded by 1 or 32 agents
// at once. "async" records and goes on (what every call did before
// Durable); "durable" waits on Call.Durable as the proxy does before
// answering such a call (p50/p99-ms: that wait). calls/s is what the store
// sustains.
func BenchmarkHeaderCommit(b *testing.B) {
	for _, run := range []struct {
		mode   string
		agents int
	}{{"async", 32}, {"durable", 32}, {"async", 1}, {"durable", 1}} {
		mode, agents := run.mode, run.agents
		b.Run(fmt.Sprintf("%s-agents=%d", mode, agents), func(b *testing.B) {
			o := DefaultOptions()
			o.Queue.OnFull = "block"
			o.Retention.Interval = time.Hour
			s, err := Open(b.TempDir(), o, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			proto := benchCall(rand.New(rand.NewPCG(5, 6)), "p", "s", 768, 256)
			lat := make([]time.Duration, b.N)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			t0 := time.Now()
			for a := 0; a < agents; a++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					done := make(chan error, 1)
					for {
						i := int(next.Add(1)) - 1
						if i >= b.N {
							return
						}
						c := *proto
						c.ID = fmt.Sprintf("h%09d", i)
						c.ResponseID = "chatcmpl-" + c.ID
						c.Session = c.ID
						c.Hone = HoneHeaders{Session: c.ID, Train: -1, Reward: ptr(1), Commit: true}
						t := time.Now()
						if mode == "durable" {
							c.Durable = done
							s.Record(&c)
							if err := <-done; err != nil {
								b.Error(err)
								return
							}
						} else {
							s.Record(&c)
						}
						lat[i] = time.Since(t)
					}
				}()
			}
			wg.Wait()
			if err := s.do(context.Background(), func() error { return nil }); err != nil {
				b.Fatal(err)
			}
			el := time.Since(t0)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/el.Seconds(), "calls/s")
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*50/100].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			if last, _, _ := s.Cursor(context.Background()); last != uint64(b.N) {
				b.Fatalf("%d sessions ready, want %d", last, b.N)
			}
		})
	}
}

// BenchmarkEncodeLongPrompt encodes a call with an 8,000-token prompt, the
// size of an agent's turn late in a session.
func BenchmarkEncodeLongPrompt(b *testing.B) {
	c := benchCall(rand.New(rand.NewPCG(7, 8)), "p", "s", 8000, 64)
	buf := encodeCall(nil, c)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = encodeCall(buf[:0], c)
	}
}
