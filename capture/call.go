package capture

import "time"

// SchemaVersion is the version of the Call record encoding. Bump it when a
// field changes meaning; decoders keep reading older versions.
const SchemaVersion = 1

// Status is how a captured call ended.
type Status string

// Call statuses.
const (
	StatusOK                 Status = "ok"
	StatusClientDisconnected Status = "client_disconnected"
	StatusUpstreamError      Status = "upstream_error"  // engine answered with an error status
	StatusUpstreamBroken     Status = "upstream_broken" // engine closed or failed mid-response
	StatusTimeout            Status = "timeout"
	// StatusUpstreamInvalid: the engine answered 2xx with a body or stream
	// that is not a completion (garbage, truncated JSON); never trained on.
	StatusUpstreamInvalid Status = "upstream_invalid"
)

// Route names the API a call used.
const (
	RouteChat        = "chat"        // /v1/chat/completions
	RouteCompletions = "completions" // /v1/completions
)

// HoneHeaders are the X-Hone-* request headers of one call, parsed.
type HoneHeaders struct {
	Session string   // X-Hone-Session as sent; empty when the agent sent none
	Task    string   // X-Hone-Task
	Train   int8     // X-Hone-Train: -1 unset, 0 skip, 1 train
	Tags    []string // X-Hone-Tags
	Reward  *float64 // X-Hone-Reward
	Commit  bool     // X-Hone-Commit: 1
}

// Admission is what the proxy knows about a call before it goes upstream.
// Body is only valid during the Admit call: copy what you keep.
type Admission struct {
	CallID string
	Route  string
	Model  string // model name the agent asked for
	Hone   HoneHeaders
	Body   []byte // request body as the agent sent it (of a repeated top-level key, only the last member)
	// Owner identifies the client key the call came with (a hash, never the
	// key; "" without client keys). A session belongs to the owner of its
	// first call.
	Owner string
}

// Verdict is the recorder's answer to an Admission.
type Verdict struct {
	Session string // session id to use and to return in X-Hone-Session
	Capture bool   // whether the call is captured (rewrite + Record)
	New     bool   // Session was made for this call: nothing stored can have it
	// Refused, when set, says why the call may not run: its session id
	// belongs to another client (wraps ErrForbidden). Nothing is captured
	// and the proxy answers an error.
	Refused error
}

// ToolCall is one tool call of a choice, aggregated over stream deltas.
type ToolCall struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Type      string `json:"type,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Choice is one completion choice of a call.
type Choice struct {
	Index        int        `json:"index"`
	TokenIDs     []int32    `json:"token_ids,omitempty"` // completion token ids
	Logprobs     []float32  `json:"logprobs,omitempty"`  // per completion token, behaviour policy
	Content      string     `json:"content,omitempty"`
	Reasoning    string     `json:"reasoning,omitempty"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
	PromptIDs    []int32    `json:"prompt_token_ids,omitempty"` // completions API: per-choice prompt ids
}

// Usage is the token accounting the engine reported.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Call is one captured model call as the proxy saw it.
type Call struct {
	ID         string `json:"id"`
	Session    string `json:"session"`
	Task       string `json:"task,omitempty"`
	Seq        uint64 `json:"seq"` // order within the session, assigned by the store
	Route      string `json:"route"`
	Model      string `json:"model"`          // model name the agent asked for
	Upstream   string `json:"upstream_model"` // model or adapter name sent to the engine
	Engine     string `json:"engine"`
	Policy     string `json:"policy,omitempty"` // policy alias name
	Version    int64  `json:"policy_version"`
	Stream     bool   `json:"stream"`
	ResponseID string `json:"response_id,omitempty"` // the answer's id the agent saw: chatcmpl-..., cmpl-..., resp_..., msg_...

	Start   time.Time     `json:"start"`
	End     time.Time     `json:"end"`
	TTFT    time.Duration `json:"ttft"`
	Latency time.Duration `json:"latency"`

	Status     Status `json:"status"`
	HTTPStatus int    `json:"http_status"`
	Error      string `json:"error,omitempty"`

	Request  []byte `json:"request"`  // request body as the agent sent it, a repeated top-level key's last member only (never headers)
	Response []byte `json:"response"` // response body as the engine sent it; streams: aggregated chat/completion object
	// ResponseNulls are byte ranges of Response (sorted, apart) that the
	// stored record holds as null: the prompt's token ids, which PromptIDs
	// keeps. Not stored itself.
	ResponseNulls [][2]int `json:"-"`

	PromptIDs []int32  `json:"prompt_token_ids,omitempty"`
	Choices   []Choice `json:"choices"`
	Usage     Usage    `json:"usage"`

	Hone HoneHeaders `json:"hone"`

	// NewSession is Verdict.New: the writer skips looking the session up.
	NewSession bool `json:"-"`

	// Owner is Admission.Owner. It is not part of the call record: the
	// session records the owner of its first call, and a call of another
	// owner that names the session is stored in a session of its own
	// (see doc.go, Ownership).
	Owner string `json:"-"`

	// Durable, when non-nil, receives exactly one value once the call and
	// what its X-Hone-Reward / X-Hone-Commit settle (reward, commit, ready
	// experiences) are synced to disk: nil, or the error that kept them from
	// being stored (queue full, store closed, invalid call, write failure).
	// It must have room for that value (capacity >= 1): the writer never
	// waits on it. Never encoded.
	Durable chan<- error `json:"-"`
	// refused is why the writer did not apply the call's header reward
	// (the call was stored); it is the call's Durable answer.
	refused error
}
