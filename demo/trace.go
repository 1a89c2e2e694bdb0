package demo

import (
	"encoding/json"
	"fmt"
	"math/rand"

	"github.com/hone-rl/hone/model/chat"
)

// ToolName is the calculator tool's function name.
const ToolName = "calculator"

// CalculatorTool is the OpenAI tool definition the agent sends.
var CalculatorTool = json.RawMessage(`{"type":"function","function":{"name":"calculator",` +
	`"parameters":{"type":"object",` +
	`"properties":{"expression":{"type":"string"}},"required":["expression"]}}}`)

// FinalReply is the final reply the warm start teaches after a calculator
// result: the answer, copied from the tool's result.
func FinalReply(result string) string { return "The answer is " + result + "." }

// toolArguments is the JSON arguments object of a calculator call, spaced
// as the model is taught to write it (json.dumps style).
func toolArguments(expr string) string {
	b, _ := json.Marshal(expr)
	return `{"expression": ` + string(b) + `}`
}

// Turn is one model completion of a solved trace: the prompt the engine
// would render before it and the text the model should generate.
type Turn struct {
	Prompt     string
	Completion string // ends with <|im_end|>
}

// SolvedTrace renders the two turns of a trace that calls the calculator
// with expr and answers with its result, exactly as the engine renders the
// agent's requests (Qwen3 chat template, hermes tool calls) with the given
// request tools (nil: the agent's text mode, no tool list in the prompt).
func SolvedTrace(t Task, expr string, tools []json.RawMessage) ([]Turn, error) {
	result, err := Calculate(expr)
	if err != nil {
		return nil, err
	}
	msgs := []chat.Message{{Role: "user", Content: t.Question}}
	call := chat.ToolCall{Name: ToolName, Arguments: json.RawMessage(mustJSON(toolArguments(expr)))}
	var turns []Turn
	for _, step := range []struct {
		reply chat.Message
		text  string
	}{
		{chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{call}},
			"<tool_call>\n{\"name\": \"" + ToolName + "\", \"arguments\": " + toolArguments(expr) + "}\n</tool_call>"},
		{chat.Message{Role: "assistant", Content: FinalReply(result)}, FinalReply(result)},
	} {
		p, err := chat.Render(msgs, tools, chat.Options{AddGenerationPrompt: true})
		if err != nil {
			return nil, fmt.Errorf("render trace: %w", err)
		}
		turns = append(turns, Turn{Prompt: p, Completion: step.text + "<|im_end|>"})
		msgs = append(msgs, step.reply)
		if len(msgs) == 2 {
			msgs = append(msgs, chat.Message{Role: "tool", Content: result})
		}
	}
	return turns, nil
}

// mustJSON quotes s as a JSON string (tool call arguments travel as a
// string on the OpenAI wire).
func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Confusions is the warm start's teacher noise: per operation, the share of
// demonstrations that use another operation instead (the "wrong teacher").
type Confusions map[Op]float64

// confused is the operation a noisy demonstration uses instead of op.
var confused = map[Op]Op{OpAdd: OpSub, OpSub: OpAdd, OpMul: OpAdd, OpDiv: OpMul}

// DemoExpression is the expression a demonstration for t uses: the right
// one, or with probability c[t.Op] the confused operation.
func DemoExpression(r *rand.Rand, t Task, c Confusions) string {
	if r.Float64() < c[t.Op] {
		return Expr(t.A, confused[t.Op], t.B)
	}
	return t.Expression
}
