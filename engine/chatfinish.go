package engine

// chatFinish is the finish_reason a chat choice reports, as vLLM 0.32's
// chat endpoint (entrypoints/openai/chat_completion/serving.py) decides it:
// a named tool_choice reports the engine's reason ("stop") even though the
// message holds a tool call; otherwise a parsed tool call reports
// "tool_calls" — always when not streamed, only when the engine stopped
// (not at the length limit) when streamed. called: the output held a tool
// call; finish: the engine's reason.
func chatFinish(req *chatRequest, called bool, finish string, stream bool) string {
	if finish == "" {
		finish = "stop"
	}
	if !called {
		return finish
	}
	tc, apiErr := parseToolChoice(req.ToolChoice)
	if apiErr == nil && tc.mode == "named" {
		return finish
	}
	if stream && finish != "stop" {
		return finish
	}
	if !stream && tc.mode == "required" && finish != "stop" {
		// vLLM: "tool_calls" for required only when output.finish_reason == "stop"
		return finish
	}
	return "tool_calls"
}
