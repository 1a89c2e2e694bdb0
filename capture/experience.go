package capture

import (
	"encoding/json"
	"strconv"
)

// LossMask is a per-token 0/1 mask. It is a JSON array of numbers, not the
// base64 string encoding/json makes of a []uint8, so any NDJSON reader (a
// Python trainer, jq) sees the mask as it sees token ids.
type LossMask []uint8

// MarshalJSON writes the mask as an array of 0 and 1.
func (m LossMask) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	b := make([]byte, 0, 2*len(m)+2)
	b = append(b, '[')
	for i, v := range m {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(v), 10)
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads an array of numbers (or, for older readers' data, the
// base64 string of a []uint8).
func (m *LossMask) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var raw []uint8
		if err := json.Unmarshal(b, &raw); err != nil {
			return err
		}
		*m = raw
		return nil
	}
	var ints []uint8
	if err := json.Unmarshal(b, &ints); err != nil {
		return err
	}
	*m = ints
	return nil
}

// StepSpan locates one call's completion inside a trajectory's token sequence.
type StepSpan struct {
	Call   string   `json:"call"`
	Start  int      `json:"start"` // index of the first completion token in Tokens
	End    int      `json:"end"`   // one past the last completion token
	Reward *float64 `json:"reward,omitempty"`
}

// Experience is one ready trajectory (a leaf path of a session's token trie),
// the unit the trainer consumes.
type Experience struct {
	Cursor  uint64 `json:"cursor"`
	Session string `json:"session"`
	Task    string `json:"task,omitempty"`
	// Owner is the opaque id of the client key that opened the session
	// ("" without client keys). Trainers group by owner and task, so one
	// client's sessions never enter the baseline of another's task.
	Owner    string     `json:"owner,omitempty"`
	Model    string     `json:"model"`
	Leaf     int        `json:"leaf"`      // leaf index within the session
	Tokens   []int32    `json:"tokens"`    // prompt and completion tokens of the whole path
	Mask     LossMask   `json:"loss_mask"` // 1 on tokens the policy generated
	Logprobs []float32  `json:"logprobs"`  // behaviour logprobs, 0 where mask is 0
	Versions []int64    `json:"versions"`  // policy version per token, 0 where mask is 0
	Steps    []StepSpan `json:"steps"`     // one per call on the path, in order
	Reward   float64    `json:"reward"`    // combined session reward

	Messages json.RawMessage `json:"messages,omitempty"` // last call's messages + reply
	Tools    json.RawMessage `json:"tools,omitempty"`

	// Replaces lists the cursors of the session's earlier experiences, which
	// this one (with its siblings) supersedes: a call or a reward arrived
	// after the session was ready, and it was rebuilt whole. A consumer that
	// already trained on those sees the session again, complete.
	Replaces []uint64 `json:"replaces,omitempty"`
	// ContinuationOf is the previous part of the conversation when this
	// session continues one that was already consumed (Session.ContinuedBy).
	ContinuationOf string `json:"continuation_of,omitempty"`
	// CompactedFrom, when set, is the call whose reply (a summary of the
	// conversation so far) this trajectory's first call carries: the agent
	// compacted its context and this trajectory is the task's next segment.
	CompactedFrom string `json:"compacted_from,omitempty"`
}
