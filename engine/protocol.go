package engine

import (
	"encoding/json"
	"fmt"
)

// stopList is the "stop" field: a string, a list of strings, or null.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("stop must be a string or a list of strings")
	}
	*s = many
	return nil
}

type streamOptions struct {
	IncludeUsage         bool `json:"include_usage"`
	ContinuousUsageStats bool `json:"continuous_usage_stats"`
}

// commonRequest holds the sampling fields shared by chat and completions.
type commonRequest struct {
	Model                  string             `json:"model"`
	N                      *int               `json:"n"`
	Temperature            *float64           `json:"temperature"`
	TopP                   *float64           `json:"top_p"`
	TopK                   *int               `json:"top_k"`
	Seed                   *int64             `json:"seed"`
	MaxTokens              *int               `json:"max_tokens"`
	Stop                   stopList           `json:"stop"`
	StopTokenIDs           []int32            `json:"stop_token_ids"`
	IgnoreEOS              bool               `json:"ignore_eos"`
	Stream                 bool               `json:"stream"`
	StreamOptions          *streamOptions     `json:"stream_options"`
	ReturnTokenIDs         bool               `json:"return_token_ids"`
	ReturnTokensAsTokenIDs bool               `json:"return_tokens_as_token_ids"`
	LogitBias              map[string]float64 `json:"logit_bias"`
	PresencePenalty        *float64           `json:"presence_penalty"`
	FrequencyPenalty       *float64           `json:"frequency_penalty"`
	RepetitionPenalty      *float64           `json:"repetition_penalty"`
	MinP                   *float64           `json:"min_p"`
	PromptLogprobs         *int               `json:"prompt_logprobs"`
	MinTokens              int                `json:"min_tokens"`
	SkipSpecialTokens      *bool              `json:"skip_special_tokens"`
	IncludeStopStrInOutput bool               `json:"include_stop_str_in_output"`
	UseBeamSearch          bool               `json:"use_beam_search"`
	ResponseFormat         json.RawMessage    `json:"response_format"` // constrain.go
	// CacheSalt keeps the request's prefix-cache entries apart from those
	// of requests with another salt (or none), as vLLM's cache_salt does.
	CacheSalt *string `json:"cache_salt"`
}

type chatRequest struct {
	commonRequest
	Messages             json.RawMessage `json:"messages"`
	Tools                json.RawMessage `json:"tools"`
	ToolChoice           json.RawMessage `json:"tool_choice"`
	Logprobs             bool            `json:"logprobs"`
	TopLogprobs          *int            `json:"top_logprobs"`
	MaxCompletionTokens  *int            `json:"max_completion_tokens"`
	ChatTemplateKwargs   map[string]any  `json:"chat_template_kwargs"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ContinueFinalMessage bool            `json:"continue_final_message"`
	IncludeReasoning     *bool           `json:"include_reasoning"`
	ParallelToolCalls    *bool           `json:"parallel_tool_calls"`
}

type completionRequest struct {
	commonRequest
	Prompt           json.RawMessage `json:"prompt"`
	Logprobs         *int            `json:"logprobs"`
	Echo             bool            `json:"echo"`
	AddSpecialTokens *bool           `json:"add_special_tokens"`
	// StructuredOutputs is vLLM's structured_outputs: json (a schema) and
	// json_object are enforced (completions.go), the other kinds refused.
	StructuredOutputs json.RawMessage `json:"structured_outputs"`
}

type usageInfo struct {
	PromptTokens     int `json:"prompt_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// fullUsage is usage as vLLM writes it in non-streaming responses.
type fullUsage struct {
	usageInfo
	PromptTokensDetails *struct{} `json:"prompt_tokens_details"`
}

// Chat responses.

type toolCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type toolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function toolCallFunction `json:"function"`
}

type deltaFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

type deltaToolCall struct {
	ID       string         `json:"id,omitempty"`
	Type     string         `json:"type,omitempty"`
	Index    int            `json:"index"`
	Function *deltaFunction `json:"function,omitempty"`
}

type chatLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type chatLogprobContent struct {
	chatLogprob
	TopLogprobs []chatLogprob `json:"top_logprobs"`
}

type chatLogprobs struct {
	Content []chatLogprobContent `json:"content"`
}

// chatMessage is a response message in vLLM's field order. The reasoning
// goes under "reasoning", "reasoning_content" or both (Options.ReasoningField);
// the unused name is omitted.
type chatMessage struct {
	Role             string          `json:"role"`
	Content          any             `json:"content"`
	Refusal          *string         `json:"refusal"`
	Annotations      *struct{}       `json:"annotations"`
	Audio            *struct{}       `json:"audio"`
	FunctionCall     *struct{}       `json:"function_call"`
	ToolCalls        []toolCall      `json:"tool_calls,omitempty"`
	Reasoning        json.RawMessage `json:"reasoning,omitempty"`
	ReasoningContent json.RawMessage `json:"reasoning_content,omitempty"`
}

// chatDelta is a stream chunk's delta; only the fields that changed appear.
type chatDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	Reasoning        json.RawMessage `json:"reasoning,omitempty"`
	ReasoningContent json.RawMessage `json:"reasoning_content,omitempty"`
	ToolCalls        []deltaToolCall `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      chatMessage   `json:"message"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
	StopReason   any           `json:"stop_reason"`
	TokenIDs     []int32       `json:"token_ids"`
}

type chatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []chatChoice `json:"choices"`
	ServiceTier       *string      `json:"service_tier"`
	SystemFingerprint *string      `json:"system_fingerprint"`
	Usage             fullUsage    `json:"usage"`
	PromptLogprobs    *struct{}    `json:"prompt_logprobs"`
	PromptTokenIDs    []int32      `json:"prompt_token_ids"`
	KVTransferParams  *struct{}    `json:"kv_transfer_params"`
}

type chatStreamChoice struct {
	Index        int             `json:"index"`
	Delta        chatDelta       `json:"delta"`
	Logprobs     *chatLogprobs   `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason,omitempty"` // set (maybe to null) on the final chunk only
	TokenIDs     []int32         `json:"token_ids,omitempty"`
}

type chatChunk struct {
	ID             string             `json:"id"`
	Object         string             `json:"object"`
	Created        int64              `json:"created"`
	Model          string             `json:"model"`
	Choices        []chatStreamChoice `json:"choices"`
	Usage          *usageInfo         `json:"usage,omitempty"`
	PromptTokenIDs []int32            `json:"prompt_token_ids,omitempty"`
}

// Completion responses.

type completionLogprobs struct {
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	Tokens        []string             `json:"tokens"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
}

type completionChoice struct {
	Index          int                 `json:"index"`
	Text           string              `json:"text"`
	Logprobs       *completionLogprobs `json:"logprobs"`
	FinishReason   *string             `json:"finish_reason"`
	StopReason     any                 `json:"stop_reason"`
	TokenIDs       []int32             `json:"token_ids"`
	PromptLogprobs *struct{}           `json:"prompt_logprobs"`
	PromptTokenIDs []int32             `json:"prompt_token_ids"`
}

type completionResponse struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	Choices           []completionChoice `json:"choices"`
	ServiceTier       *string            `json:"service_tier"`
	SystemFingerprint *string            `json:"system_fingerprint"`
	Usage             fullUsage          `json:"usage"`
	KVTransferParams  *struct{}          `json:"kv_transfer_params"`
}

type completionStreamChoice struct {
	Index          int                 `json:"index"`
	Text           string              `json:"text"`
	Logprobs       *completionLogprobs `json:"logprobs"`
	FinishReason   *string             `json:"finish_reason"`
	StopReason     any                 `json:"stop_reason"`
	TokenIDs       []int32             `json:"token_ids,omitempty"`
	PromptTokenIDs []int32             `json:"prompt_token_ids,omitempty"`
}

type completionChunk struct {
	ID      string                   `json:"id"`
	Object  string                   `json:"object"`
	Created int64                    `json:"created"`
	Model   string                   `json:"model"`
	Choices []completionStreamChoice `json:"choices"`
	Usage   *usageInfo               `json:"usage,omitempty"`
}
