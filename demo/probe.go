package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"

	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/model/chat"
	"github.com/hone-rl/hone/model/tokenizer"
)

// Probe is what greedy decoding shows about a model on fresh problems:
// shares of first replies with a calculator call that parses, that copies
// both numbers in order, and that is fully right, and of final replies
// that state the call's result.
type Probe struct {
	N      int
	Format float64 // a calculator call with an expression
	Copied float64 // the expression is A op B for some op (both numbers copied in order)
	Right  float64 // the expression is the task's
	ByOp   map[Op]float64
	// Answered: given its call's calculator result, the final reply states it
	Answered float64
}

func (p Probe) String() string {
	return fmt.Sprintf("format %.0f%% copied %.0f%% right %.0f%% (+ %.0f%% - %.0f%% * %.0f%% / %.0f%%) answered %.0f%% of %d",
		100*p.Format, 100*p.Copied, 100*p.Right, 100*p.ByOp[OpAdd], 100*p.ByOp[OpSub], 100*p.ByOp[OpMul], 100*p.ByOp[OpDiv],
		100*p.Answered, p.N)
}

// probe greedily decodes the first reply (up to maxTokens) to n problems
// drawn from seed, in one batch, scores the tool calls, then feeds each call's
// calculator result back and decodes the final replies.
func probe(ctx context.Context, m *model.Model, tok tokenizer.Tokenizer, seed int64, n, maxTokens int) (Probe, error) {
	r := rand.New(rand.NewSource(seed))
	tasks := make([]Task, n)
	convs := make([][]chat.Message, n)
	for i := range tasks {
		tasks[i] = NewTask(r, "probe")
		convs[i] = []chat.Message{{Role: "user", Content: tasks[i].Question}}
	}
	first, err := greedy(ctx, m, tok, convs, maxTokens)
	if err != nil {
		return Probe{}, err
	}
	pr := Probe{N: n, ByOp: map[Op]float64{}}
	count := map[Op]int{}
	var again []int // tasks whose call gets a result to answer from
	results := make([]string, n)
	for i, t := range tasks {
		count[t.Op]++
		calls := TextToolCalls(first[i])
		if len(calls) != 1 || calls[0].Function.Name != ToolName {
			continue
		}
		var args struct {
			Expression string `json:"expression"`
		}
		if json.Unmarshal([]byte(calls[0].Function.Arguments), &args) != nil || args.Expression == "" {
			continue
		}
		pr.Format++
		for _, op := range Ops {
			if args.Expression == Expr(t.A, op, t.B) {
				pr.Copied++
				break
			}
		}
		if strings.TrimSpace(args.Expression) == t.Expression {
			pr.Right++
			pr.ByOp[t.Op]++
		}
		results[i] = RunTool(calls[0].Function.Name, calls[0].Function.Arguments)
		call := chat.ToolCall{Name: ToolName, Arguments: json.RawMessage(mustJSON(calls[0].Function.Arguments))}
		convs[i] = append(convs[i], chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{call}},
			chat.Message{Role: "tool", Content: results[i]})
		again = append(again, i)
	}
	sub := make([][]chat.Message, len(again))
	for j, i := range again {
		sub[j] = convs[i]
	}
	final, err := greedy(ctx, m, tok, sub, maxTokens)
	if err != nil {
		return Probe{}, err
	}
	for j, i := range again {
		if got, ok := ParseAnswer(final[j]); ok && got == results[i] {
			pr.Answered++
		}
	}
	pr.Format, pr.Copied, pr.Right, pr.Answered = pr.Format/float64(n), pr.Copied/float64(n), pr.Right/float64(n), pr.Answered/float64(n)
	for op, c := range count {
		pr.ByOp[op] /= float64(c)
	}
	return pr, nil
}

// greedy decodes the next assistant reply to each conversation, in one
// batch, up to maxTokens or <|im_end|>.
func greedy(ctx context.Context, m *model.Model, tok tokenizer.Tokenizer, convs [][]chat.Message, maxTokens int) ([]string, error) {
	n := len(convs)
	steps := make([]model.Step, n)
	for i, msgs := range convs {
		p, err := chat.Render(msgs, nil, chat.Options{AddGenerationPrompt: true})
		if err != nil {
			return nil, fmt.Errorf("probe: %w", err)
		}
		steps[i] = model.Step{Tokens: tok.Encode(p), Cache: m.NewCache()}
	}
	defer func() {
		for _, s := range steps {
			s.Cache.Free()
		}
	}()
	end, _ := tok.TokenID("<|im_end|>")
	out := make([][]int32, n)
	live := make([]int, n) // indices of unfinished replies
	for i := range live {
		live[i] = i
	}
	for t := 0; t < maxTokens && len(live) > 0; t++ {
		batch := make([]model.Step, len(live))
		for j, i := range live {
			batch[j] = steps[i]
		}
		logits, err := m.Forward(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("probe: %w", err)
		}
		next := live[:0]
		for j, i := range live {
			id := argmaxIDs(logits[j])
			if id == end {
				continue
			}
			out[i] = append(out[i], id)
			steps[i].Tokens = []int32{id}
			next = append(next, i)
		}
		live = next
	}
	texts := make([]string, n)
	for i := range out {
		texts[i] = tok.Decode(out[i])
	}
	return texts, nil
}

func argmaxIDs(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}
