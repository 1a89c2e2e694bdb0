package proxy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hone-rl/hone/capture"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
)

// driftCase is one way a client changes the history it sends back.
type driftCase struct {
	name  string
	cause string // the cause observe mode reports
	// first is the first call's extra request fields; next builds the
	// second call's messages from the first's and the reply the client got.
	first map[string]any
	next  func(t *testing.T, msgs []any, reply gjson.Result) []any
}

var forcedFirst = map[string]any{"tools": forcedTools, "tool_choice": "required", "parallel_tool_calls": false,
	"max_tokens": 400, "temperature": 1, "seed": 7}

// toolHistory appends the reply's tool call, with its arguments as args
// makes them, and the tool's result.
func toolHistory(t *testing.T, msgs []any, reply gjson.Result, args func(string) string) []any {
	t.Helper()
	tc := reply.Get("message.tool_calls.0")
	if !tc.Exists() {
		t.Fatalf("no tool call: %s", reply.Raw)
	}
	call := map[string]any{"id": "c0", "type": "function", "function": map[string]any{"name": tc.Get("function.name").String(),
		"arguments": args(tc.Get("function.arguments").String())}}
	return append(msgs, map[string]any{"role": "assistant", "content": "", "tool_calls": []any{call}},
		map[string]any{"role": "tool", "tool_call_id": "c0", "content": "42"})
}

// reverseKeys writes an object's keys in reverse order, keeping the
// sampled spacing (", " and ": ").
func reverseKeys(t *testing.T, args string) string {
	var parts []string
	gjson.Parse(args).ForEach(func(k, v gjson.Result) bool {
		parts = append([]string{k.Raw + ": " + v.Raw}, parts...)
		return true
	})
	out := "{" + strings.Join(parts, ", ") + "}"
	if out == args {
		t.Fatalf("reordering %s changed nothing", args)
	}
	return out
}

var driftCases = []driftCase{
	{name: "re-serialised arguments", cause: capture.DriftToolArguments, first: forcedFirst,
		next: func(t *testing.T, msgs []any, reply gjson.Result) []any {
			return toolHistory(t, msgs, reply, func(a string) string {
				var v any
				if err := json.Unmarshal([]byte(a), &v); err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(v) // compact, keys sorted: as JSON.stringify of a parsed object
				return string(b)
			})
		}},
	{name: "reordered keys", cause: capture.DriftToolArguments, first: forcedFirst,
		next: func(t *testing.T, msgs []any, reply gjson.Result) []any {
			return toolHistory(t, msgs, reply, func(a string) string { return reverseKeys(t, a) })
		}},
	{name: "stripped reasoning", cause: capture.DriftReasoning,
		// Qwen3's template prompts with an empty think block when thinking
		// is off and drops it from the turn once a user speaks again.
		first: map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}, "max_tokens": 8, "temperature": 0},
		next: func(t *testing.T, msgs []any, reply gjson.Result) []any {
			return append(msgs, map[string]any{"role": "assistant", "content": reply.Get("message.content").String()},
				map[string]any{"role": "user", "content": "Thanks."})
		}},
	{name: "edited user turn", cause: capture.DriftEdited, first: forcedFirst,
		next: func(t *testing.T, msgs []any, reply gjson.Result) []any {
			msgs = toolHistory(t, msgs, reply, func(a string) string { return a })
			msgs[0] = map[string]any{"role": "user", "content": "What is 6 times 8, plus 3?"}
			return msgs
		}},
}

// driftSession runs a case's two calls (the second with the reward and the
// commit) and returns the session's drift, trajectories and drift records.
func driftSession(t *testing.T, h *testHone, store *capture.Store, session string, tc driftCase) (int, int, []capture.Drift) {
	t.Helper()
	msgs := []any{map[string]any{"role": "user", "content": "What is 6 times 7, plus 3?"}}
	var reply gjson.Result
	for turn := 0; turn < 2; turn++ {
		req := map[string]any{"model": "Qwen/Qwen3-0.6B", "messages": msgs, "max_tokens": 1}
		if turn == 0 {
			for k, v := range tc.first {
				req[k] = v
			}
		} else {
			msgs = tc.next(t, msgs, reply)
			req["messages"] = msgs
			if kw, ok := tc.first["chat_template_kwargs"]; ok {
				req["chat_template_kwargs"] = kw
			}
			if tools, ok := tc.first["tools"]; ok {
				req["tools"] = tools
			}
		}
		body, _ := json.Marshal(req)
		reply = gjson.GetBytes(sessionPost(t, h, store, session, turn, turn == 1, false, body).body, "choices.0")
	}
	drift, leaves, _ := sessionDrift(t, store, session, 2)
	rec, _, err := store.GetSession(t.Context(), session)
	if err != nil {
		t.Fatal(err)
	}
	return drift, leaves, rec.Drifts
}

// TestDriftCauses: one session per way a client changes its history,
// through hone to the embedded engine. In tokens mode re-serialised
// arguments, reordered keys and stripped reasoning keep one path (drift
// 0); an edited user turn starts a new one, counted as edited. Observing,
// each drifts once and hone_trajectory_drift_total counts it under its
// cause.
func TestDriftCauses(t *testing.T) {
	for _, tc := range driftCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []string{ContinuityTokens, ContinuityObserve} {
				reg := prometheus.NewRegistry()
				h, store, url := startEngineContinuityIn(t, mode, reg)
				if mode == ContinuityTokens {
					if st := waitProbe(t, h.s, url); !st.Tokens {
						t.Fatalf("probe against the embedded engine: %s", st.Reason)
					}
				}
				drift, leaves, drifts := driftSession(t, h, store, "d", tc)
				want := 1
				if mode == ContinuityTokens && tc.cause != capture.DriftEdited {
					want = 0
				}
				if drift != want || leaves != want+1 || len(drifts) != want {
					t.Errorf("%s: drift %d, %d trajectories, %d drift records; want %d", mode, drift, leaves, len(drifts), want)
				}
				if want == 1 && len(drifts) == 1 && drifts[0].Cause != tc.cause {
					t.Errorf("%s: drift %+v, want cause %s", mode, drifts[0], tc.cause)
				}
				for _, c := range capture.DriftCauses {
					n, w := driftCounter(t, reg, c), 0.0
					if c == tc.cause {
						w = float64(want)
					}
					if n != w {
						t.Errorf("%s: hone_trajectory_drift_total{cause=%q} %v, want %v", mode, c, n, w)
					}
				}
				if mode == ContinuityTokens {
					t.Logf("tokens: %+v", drifts)
				}
			}
		})
	}
}

// driftCounter reads hone_trajectory_drift_total{cause} from reg.
func driftCounter(t *testing.T, reg *prometheus.Registry, cause string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "hone_trajectory_drift_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cause" && l.GetValue() == cause {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no hone_trajectory_drift_total{cause=%q}", cause)
	return 0
}
