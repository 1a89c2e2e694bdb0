// Package engine is hone's embedded inference server: vLLM's OpenAI-compatible
// HTTP API over the model package on the CPU backend, with a
// continuous-batching scheduler. Real deployments point hone at vLLM; this
// engine makes the whole loop run on any machine.
//
// Endpoints (field for field as vLLM >= 0.10.2 writes them):
//
//	POST /v1/chat/completions, /v1/completions   streaming and not; n, temperature,
//	     top_p, top_k, min_p, seed, max_tokens / max_completion_tokens, stop,
//	     stop_token_ids, ignore_eos, min_tokens, include_stop_str_in_output,
//	     skip_special_tokens, logit_bias, presence/frequency/repetition
//	     penalties, logprobs / top_logprobs (raw: before any logits processing),
//	     return_token_ids, return_tokens_as_token_ids, stream_options (include_usage,
//	     continuous_usage_stats),
//	     hermes tool calls, Qwen3 <think> reasoning, tool_choice required / a named
//	     function and response_format json_object / json_schema enforced by
//	     constrained decoding (constrain.go)
//	GET  /v1/models   base model and loaded adapters (root, parent, max_model_len)
//	POST /tokenize, /detokenize
//	GET  /health, /version, /load ({"server_load": in-flight requests}), /metrics
//	POST /v1/load_lora_adapter, /v1/unload_lora_adapter   (VLLM_ALLOW_RUNTIME_LORA_UPDATING)
//	POST /sleep?level=N, /wake_up[?tags=weights|kv_cache], GET /is_sleeping,
//	POST /collective_rpc {"method":"reload_weights"}, /reset_prefix_cache   (dev mode)
//
// Choices where vLLM leaves room:
//   - While any part sleeps, generation requests get 503 ServiceUnavailableError
//     (running requests finish); sleeping drops the prefix cache, weights stay
//     resident on the CPU.
//   - reload_weights re-reads the model folder and swaps it in once the running
//     sequences finish; loaded adapters are reloaded onto the new weights.
//   - Reasoning goes under "reasoning" (current vLLM), "reasoning_content"
//     (vLLM < 0.11, SGLang) or both: Options.ReasoningField.
//   - Completed token ids include the EOS token that ended the sequence; the
//     text does not (special tokens are skipped).
//   - Stream chunks carry one token each; text that may still become a stop
//     string or an incomplete UTF-8 character is held back, so the chunks
//     concatenate to the non-streamed text.
//   - Chunked prefill: each step runs every decoding sequence's next token
//     and fills the rest of Options.MaxNumBatchedTokens with prompt chunks, so
//     a long prompt does not stall the running sequences.
//   - Running sequences' KV caches share a memory budget (Options.KVCacheMiB):
//     new sequences wait while it is full, and when decoding outgrows it the
//     latest started sequence is preempted and recomputed later, as vLLM does.
//   - Prefix caching (off by default, Options.PrefixCacheMiB): a finished
//     sequence's KV cache is kept (per adapter, memory-bounded LRU) and reused
//     by a later prompt that extends it. Off, a request's logprobs do not
//     depend on earlier requests (sequences batched into the same step can
//     still move the last bits, as in vLLM).
//   - Constrained output holds from the first token (vLLM lets a reasoning
//     model finish its <think> block first) unless the prompt left <think>
//     open; required tool calls are hermes blocks, not vLLM's JSON list.
//   - Not implemented: prompt_logprobs, echo with logprobs, beam search (400),
//     vLLM's guided_* fields, structural_tag, and structured_outputs other
//     than json and json_object (which /v1/completions enforces).
package engine
