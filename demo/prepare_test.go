package demo

import (
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/model/tokenizer"
)

func TestEncodeTraceMask(t *testing.T) {
	dir := t.TempDir()
	if err := tokenizer.WriteCharTokenizer(dir, tokenizer.DefaultChars); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	task := Task{Question: "Ann has 6 boxes of 7 pens. How many pens in all?", A: 6, B: 7, Op: OpMul, Expression: "6*7", Answer: 42}
	turns, err := SolvedTrace(task, task.Expression, nil)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := encodeTrace(tok, turns, 3)
	if strings.Count(turns[1].Prompt, "<tool_response>\n42\n</tool_response>") != 1 {
		t.Fatalf("second prompt lacks the tool result: %q", turns[1].Prompt)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.mask) != len(ex.tokens)-1 {
		t.Fatalf("%d mask values for %d tokens", len(ex.mask), len(ex.tokens))
	}
	// the masked tokens are exactly the two completions, digits weighted 3
	var gen strings.Builder
	for i, w := range ex.mask {
		if w == 0 {
			continue
		}
		s := tok.Decode(ex.tokens[i+1 : i+2])
		if isDigit := s >= "0" && s <= "9" && len(s) == 1; (w == 3) != isDigit {
			t.Fatalf("token %q weight %v", s, w)
		}
		gen.WriteString(s)
	}
	want := turns[0].Completion + turns[1].Completion
	if gen.String() != want {
		t.Fatalf("masked text %q, want %q", gen.String(), want)
	}
	if !strings.Contains(want, `{"expression": "6*7"}`) || !strings.Contains(want, FinalReply("42")) {
		t.Fatalf("completions %q", want)
	}
}

func TestDemoExpressionConfusions(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	task := Task{A: 9, B: 3, Op: OpSub, Expression: "9-3"}
	wrong := 0
	for i := 0; i < 1000; i++ {
		if DemoExpression(r, task, Confusions{OpSub: 0.6}) == "9+3" {
			wrong++
		}
	}
	if wrong < 540 || wrong > 660 {
		t.Fatalf("%d of 1000 demonstrations confused, want about 600", wrong)
	}
	if DemoExpression(r, task, nil) != "9-3" {
		t.Fatal("no confusion configured, got a wrong expression")
	}
}

func TestPrepareErrors(t *testing.T) {
	for _, o := range []PrepareOptions{
		{},
		{Out: t.TempDir(), Batch: 1},
		{Out: "x", Init: "x/", Batch: 1, Stages: []Stage{{Steps: 1}}},
	} {
		if err := Prepare(context.Background(), o); err == nil {
			t.Errorf("Prepare(%+v) accepted", o)
		}
	}
}

// TestShippedModelCopiesNumbers: the shipped warm start writes a calculator
// call for every probe problem, copies both of its numbers in order and
// states the calculator's result in its final reply (greedy), while it is
// often wrong about the operation (what the demo's training fixes).
func TestShippedModelCopiesNumbers(t *testing.T) {
	dir := "../testdata/tiny-model"
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Skip("no shipped model (make tiny-model)")
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	pr, err := probe(context.Background(), m, tok, 99, 64, 80)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("probe: %s", pr)
	if pr.Format < 0.95 || pr.Copied < 0.9 || pr.Answered < 0.9 {
		t.Fatalf("the shipped model: %s; want >= 95%% calls, >= 90%% with both numbers copied, >= 90%% answers stating the result", pr)
	}
	if pr.Right > 0.6 {
		t.Fatalf("the shipped model is already right on %.0f%% (the demo needs room to improve)", 100*pr.Right)
	}
}
