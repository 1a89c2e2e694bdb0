package capture

import (
	"testing"
)

func noReward(string) *float64 { return nil }

// wantMask builds the expected loss mask: 1 on [start, start+n) spans.
func wantMask(total int, spans ...[2]int) []uint8 {
	m := make([]uint8, total)
	for _, s := range spans {
		for i := s[0]; i < s[0]+s[1]; i++ {
			m[i] = 1
		}
	}
	return m
}

func TestTrieToolSessionOneTrajectory(t *testing.T) {
	v := newVocab()
	prompts, replies := toolSession()
	tr := &trie{}
	var calls []*Call
	for i := range prompts {
		c := v.makeCall(string(rune('a'+i)), "s", prompts[i], replies[i], int64(i+1))
		calls = append(calls, c)
		if tr.add(c) {
			t.Fatalf("call %d drifted", i)
		}
	}
	leaves := tr.leaves()
	if len(leaves) != 1 {
		t.Fatalf("leaves = %d, want 1", len(leaves))
	}
	tokens, mask, lps, vers, steps := trajectory(leaves[0], noReward)
	last := calls[2]
	want := append(append([]int32(nil), last.PromptIDs...), last.Choices[0].TokenIDs...)
	if !equalIDs(tokens, want) {
		t.Fatalf("tokens differ from the last prompt + completion:\n got %v\nwant %v", tokens, want)
	}
	var spans [][2]int
	for _, c := range calls {
		spans = append(spans, [2]int{len(c.PromptIDs), len(c.Choices[0].TokenIDs)})
	}
	if got, w := mask, wantMask(len(tokens), spans...); string(got) != string(w) {
		t.Fatalf("mask\n got %v\nwant %v", got, w)
	}
	if len(steps) != 3 {
		t.Fatalf("steps = %d, want 3", len(steps))
	}
	for i, st := range steps {
		c := calls[i]
		if st.Call != c.ID || st.Start != spans[i][0] || st.End != spans[i][0]+spans[i][1] {
			t.Errorf("step %d = %+v, want call %s [%d,%d)", i, st, c.ID, spans[i][0], spans[i][0]+spans[i][1])
		}
		for j := st.Start; j < st.End; j++ {
			if lps[j] != c.Choices[0].Logprobs[j-st.Start] || vers[j] != c.Version {
				t.Fatalf("token %d: logprob %v version %d, want %v %d", j, lps[j], vers[j], c.Choices[0].Logprobs[j-st.Start], c.Version)
			}
		}
	}
	for i := range tokens {
		if mask[i] == 0 && (lps[i] != 0 || vers[i] != 0) {
			t.Fatalf("token %d has mask 0 but logprob %v version %d", i, lps[i], vers[i])
		}
	}
	// The tool results between the calls are in the trajectory with mask 0.
	toolTok := v.word("<tool_response>")
	found := 0
	for i, id := range tokens {
		if id == toolTok {
			found++
			if mask[i] != 0 {
				t.Fatalf("tool response token at %d has mask 1", i)
			}
		}
	}
	if found != 2 {
		t.Fatalf("tool responses in trajectory = %d, want 2", found)
	}
}

func TestTrieBranchesAndDrift(t *testing.T) {
	v := newVocab()
	prompts, replies := toolSession()
	tests := []struct {
		name       string
		build      func() []*Call
		leaves     int
		drift      int
		lastLeaves []string // last call of each leaf
	}{
		{
			name: "parallel samples of the same prompt are sibling leaves",
			build: func() []*Call {
				a := v.makeCall("a", "s", prompts[0], replies[0], 1)
				b := v.makeCall("b", "s", prompts[0], msg{Role: "assistant", Content: "I do not know."}, 1)
				return []*Call{a, b}
			},
			leaves: 2, lastLeaves: []string{"a", "b"},
		},
		{
			name: "retry of the second turn branches after the first",
			build: func() []*Call {
				a := v.makeCall("a", "s", prompts[0], replies[0], 1)
				b := v.makeCall("b", "s", prompts[1], replies[1], 1)
				c := v.makeCall("c", "s", prompts[1], msg{Role: "assistant", Content: "Rome is probably warm."}, 2)
				return []*Call{a, b, c}
			},
			leaves: 2, lastLeaves: []string{"b", "c"},
		},
		{
			name: "re-tokenized history drifts into a new path",
			build: func() []*Call {
				a := v.makeCall("a", "s", prompts[0], replies[0], 1)
				b := v.makeCall("b", "s", prompts[1], replies[1], 1)
				b.PromptIDs = append([]int32{imStart, v.word("system"), newline, v.word("Be"), v.word("brief.")}, b.PromptIDs[3:]...)
				return []*Call{a, b}
			},
			leaves: 2, drift: 1, lastLeaves: []string{"a", "b"},
		},
		{
			name: "unrelated conversation in the same session drifts",
			build: func() []*Call {
				a := v.makeCall("a", "s", prompts[0], replies[0], 1)
				b := v.makeCall("b", "s", []msg{{Role: "user", Content: "hello there"}}, msg{Role: "assistant", Content: "hi"}, 1)
				c := v.makeCall("c", "s", prompts[1], replies[1], 1)
				return []*Call{a, b, c}
			},
			leaves: 2, drift: 1, lastLeaves: []string{"b", "c"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, _ := buildTrie(tc.build())
			ls := tr.leaves()
			if len(ls) != tc.leaves || tr.drift != tc.drift {
				t.Fatalf("leaves %d drift %d, want %d %d", len(ls), tr.drift, tc.leaves, tc.drift)
			}
			for i, l := range ls {
				if l.call.ID != tc.lastLeaves[i] {
					t.Errorf("leaf %d ends with call %s, want %s", i, l.call.ID, tc.lastLeaves[i])
				}
				tokens, mask, _, _, steps := trajectory(l, noReward)
				want := append(append([]int32(nil), promptOf(l.call, 0)...), l.call.Choices[0].TokenIDs...)
				if !equalIDs(tokens, want) {
					t.Errorf("leaf %d tokens are not its last call's prompt + completion", i)
				}
				last := steps[len(steps)-1]
				for j := last.Start; j < last.End; j++ {
					if mask[j] != 1 {
						t.Fatalf("leaf %d: completion token %d has mask 0", i, j)
					}
				}
			}
		})
	}
}

func TestTrieSkipsCallsWithoutTokens(t *testing.T) {
	v := newVocab()
	prompts, replies := toolSession()
	c := v.makeCall("a", "s", prompts[0], replies[0], 1)
	c.Choices[0].TokenIDs = nil
	tr, _ := buildTrie([]*Call{c})
	if len(tr.leaves()) != 0 || tr.skipped != 1 {
		t.Fatalf("leaves %d skipped %d, want 0 1", len(tr.leaves()), tr.skipped)
	}
}
