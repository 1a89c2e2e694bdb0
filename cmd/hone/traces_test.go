package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
)

// recordSession admits and records one call of session id.
func recordSession(t *testing.T, s *capture.Store, id string) {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]string{{"role": "user", "content": "hi " + id}}})
	hh := capture.HoneHeaders{Session: id, Train: -1}
	if v := s.Admit(&capture.Admission{CallID: id + "-1", Route: capture.RouteChat, Model: "m", Hone: hh, Body: req}); !v.Capture {
		t.Fatalf("%s not captured: %+v", id, v)
	}
	now := time.Now().UTC()
	s.Record(&capture.Call{ID: id + "-1", Session: id, Route: capture.RouteChat, Model: "m", Start: now, End: now,
		Status: capture.StatusOK, HTTPStatus: 200, Request: req, Response: []byte(`{}`), PromptIDs: []int32{1, 2, 3},
		Choices: []capture.Choice{{TokenIDs: []int32{4, 5}, Logprobs: []float32{-0.1, -0.2}, FinishReason: "stop"}}, Hone: hh})
}

// traceStore writes a store under DATA/capture with a dropped session
// ("gone"), a consumed one ("used") and an open one ("live"), and returns
// DATA. (Not a committed one: capture's state index shares one key prefix
// between committed and consumed, so Store.GC deletes committed sessions
// with the consumed ones.)
func traceStore(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	data := t.TempDir()
	o := capture.DefaultOptions()
	o.Retention.Interval = time.Hour
	o.Reward.Deadline = time.Minute
	s, err := capture.Open(filepath.Join(data, "capture"), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recordSession(t, s, "gone")
	recordSession(t, s, "used")
	waitFor(t, func() bool { _, calls, err := s.GetSession(ctx, "used"); return err == nil && len(calls) == 1 })
	one := 1.0
	if _, err := s.Feedback(ctx, capture.FeedbackReq{Session: "used", Reward: &one}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "used"); err != nil {
		t.Fatal(err)
	}
	exps, err := s.Experiences(ctx, 0, 10)
	if err != nil || len(exps) == 0 {
		t.Fatalf("experiences %d, %v", len(exps), err)
	}
	if err := s.Ack(ctx, exps[len(exps)-1].Cursor); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.Sweep(ctx, time.Now().Add(time.Hour)); err != nil { // past gone's reward deadline
		t.Fatal(err)
	}
	recordSession(t, s, "live")
	waitFor(t, func() bool { _, calls, err := s.GetSession(ctx, "live"); return err == nil && len(calls) == 1 })
	for id, want := range map[string]capture.State{"gone": capture.StateDropped, "used": capture.StateConsumed, "live": capture.StateOpen} {
		if rec, _, err := s.GetSession(ctx, id); err != nil || rec.State != want {
			t.Fatalf("%s: %v %v, want %s", id, rec, err, want)
		}
	}
	return data
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// TestTracesGCDryRun: --dry-run lists what gc would delete and deletes
// nothing; gc then deletes exactly those.
func TestTracesGCDryRun(t *testing.T) {
	data := traceStore(t)
	for _, tc := range []struct {
		name   string
		args   []string
		listed []string
		count  string
	}{
		{"default states", []string{"--dry-run"}, []string{"gone", "used"}, "would delete 2 sessions"},
		{"one state", []string{"--dry-run", "--state", "dropped"}, []string{"gone"}, "would delete 1 sessions"},
		{"open", []string{"--dry-run", "--state", "open"}, []string{"live"}, "would delete 1 sessions"},
		{"older than", []string{"--dry-run", "--older-than", "1h"}, nil, "would delete 0 sessions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append([]string{"traces", "gc", "--data", data}, tc.args...)...)
			if code != 0 || !strings.Contains(out, tc.count) {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			for _, id := range []string{"gone", "used", "live"} {
				listed := strings.Contains(out, "\n"+id+" ")
				if want := strings.Contains(strings.Join(tc.listed, ","), id); listed != want {
					t.Errorf("%s listed %v, want %v:\n%s", id, listed, want, out)
				}
			}
		})
	}
	code, out, _ := runCLI(t, "traces", "ls", "--data", data, "--limit", "0")
	if code != 0 || strings.Count(out, "\n") != 4 { // header + 3 sessions: the dry runs deleted nothing
		t.Fatalf("after dry runs: exit %d\n%s", code, out)
	}
	if code, out, _ = runCLI(t, "traces", "gc", "--data", data); code != 0 || !strings.Contains(out, "deleted 2 sessions") {
		t.Fatalf("gc: exit %d %q", code, out)
	}
	code, out, _ = runCLI(t, "traces", "ls", "--data", data, "--limit", "0")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, "live") {
		t.Fatalf("after gc: exit %d\n%s", code, out)
	}
}

// TestTracesShowDrift: traces show marks the call that started a new path,
// its cause and the message that differed; traces stats counts causes.
func TestTracesShowDrift(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	s, err := capture.Open(filepath.Join(data, "capture"), capture.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	user := map[string]any{"role": "user", "content": "What is 6*7?"}
	first, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{user}})
	sent := map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
		"function": map[string]any{"name": "calc", "arguments": `{"b":7,"a":6}`}}}}
	second, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{user, sent,
		map[string]any{"role": "tool", "tool_call_id": "c1", "content": "42"}}})
	hh := capture.HoneHeaders{Session: "d", Train: -1}
	now := time.Now().UTC()
	for i, c := range []*capture.Call{
		{ID: "d-1", PromptIDs: []int32{1, 2, 3}, Request: first, Choices: []capture.Choice{{TokenIDs: []int32{4, 5},
			ToolCalls: []capture.ToolCall{{Name: "calc", Arguments: `{"a": 6, "b": 7}`}}, FinishReason: "tool_calls"}}},
		{ID: "d-2", PromptIDs: []int32{1, 2, 3, 9, 5, 6}, Request: second, Choices: []capture.Choice{{TokenIDs: []int32{7}, Content: "42", FinishReason: "stop"}}},
	} {
		if v := s.Admit(&capture.Admission{CallID: c.ID, Route: capture.RouteChat, Model: "m", Hone: hh, Body: c.Request}); !v.Capture {
			t.Fatalf("%s not captured", c.ID)
		}
		c.Session, c.Route, c.Model, c.Start, c.End, c.Status, c.HTTPStatus, c.Hone = "d", capture.RouteChat, "m", now, now, capture.StatusOK, 200, hh
		c.Response = []byte(`{}`)
		s.Record(c)
		waitFor(t, func() bool { _, calls, err := s.GetSession(ctx, "d"); return err == nil && len(calls) == i+1 })
	}
	var out strings.Builder
	if err := tracesShow(ctx, s, "d", &out); err != nil {
		t.Fatal(err)
	}
	want := "!! drift (tool_arguments): a new path from message 1 (assistant), compared with call d-1: " +
		`arguments of calc sent back as {"b":7,"a":6}, sampled as {"a": 6, "b": 7}`
	if !strings.Contains(out.String(), "drift 1\n") || !strings.Contains(out.String(), want) ||
		!strings.Contains(out.String(), "!! differs:\nassistant:") {
		t.Errorf("traces show:\n%s\nwant the line %s", out.String(), want)
	}
	one := 1.0
	if _, err := s.Feedback(ctx, capture.FeedbackReq{Session: "d", Reward: &one}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := tracesStats(ctx, s, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "drift: 1 (tool_arguments 1)") {
		t.Errorf("traces stats:\n%s", out.String())
	}
}
