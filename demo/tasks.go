// Package demo is hone's closed-loop demonstration: synthetic arithmetic
// word problems solved with a calculator tool, a ReAct agent that talks to
// hone only over the OpenAI HTTP API, the SFT warm start of the tiny model,
// and the runner that trains it with step-wise GRPO and measures the
// held-out solve rate before and after.
package demo

import (
	"fmt"
	"math/rand"
	"strconv"
)

// Op is the arithmetic operation a problem needs.
type Op string

// The four operations of the task set.
const (
	OpAdd Op = "+"
	OpSub Op = "-"
	OpMul Op = "*"
	OpDiv Op = "/"
)

// Ops lists the operations in a fixed order.
var Ops = []Op{OpAdd, OpSub, OpMul, OpDiv}

// Task is one word problem with its ground truth.
type Task struct {
	ID         string `json:"id"`
	Question   string `json:"question"`
	Op         Op     `json:"op"`
	A          int64  `json:"a"`          // the first quantity in the question
	B          int64  `json:"b"`          // the second quantity in the question
	Expression string `json:"expression"` // the calculator expression that solves it, e.g. "6*7"
	Answer     int64  `json:"answer"`
}

var names = []string{"Ann", "Bob", "Cid", "Dee", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jon", "Kim", "Lou", "Max", "Ned", "Ora", "Pam"}

var things = []string{"pens", "cups", "eggs", "keys", "nuts", "cards", "books", "coins", "shells", "stamps"}

// templates are the question shapes per operation: %[1]s name, %[2]s
// thing, %[3]d and %[4]d the quantities, always in that order, so the
// expression that solves a problem copies them in the order they appear.
var templates = map[Op][]string{
	OpAdd: {"%[1]s has %[3]d %[2]s and buys %[4]d more. How many %[2]s now?",
		"%[1]s had %[3]d %[2]s and found %[4]d more. How many %[2]s now?"},
	OpSub: {"%[1]s has %[3]d %[2]s and gives away %[4]d. How many %[2]s are left?",
		"%[1]s had %[3]d %[2]s and lost %[4]d. How many %[2]s are left?"},
	OpMul: {"%[1]s has %[3]d boxes of %[4]d %[2]s. How many %[2]s in all?",
		"%[1]s buys %[3]d packs with %[4]d %[2]s each. How many %[2]s in all?"},
	OpDiv: {"%[1]s shares %[3]d %[2]s equally among %[4]d friends. How many %[2]s each?",
		"%[1]s packs %[3]d %[2]s into %[4]d equal bags. How many %[2]s per bag?"},
}

// operands draws a and b for op: small numbers, results stay positive
// integers.
func operands(r *rand.Rand, op Op) (a, b int64) {
	switch op {
	case OpAdd:
		return 10 + r.Int63n(90), 10 + r.Int63n(90)
	case OpSub:
		b = 10 + r.Int63n(80)
		return b + 1 + r.Int63n(99-b), b
	case OpMul:
		return 2 + r.Int63n(28), 2 + r.Int63n(28)
	default:
		b = 2 + r.Int63n(9)
		return b * (2 + r.Int63n(20)), b
	}
}

// Expr is the calculator expression a op b, as the model writes it.
func Expr(a int64, op Op, b int64) string {
	return strconv.FormatInt(a, 10) + string(op) + strconv.FormatInt(b, 10)
}

// NewTask draws one problem from r with the given id.
func NewTask(r *rand.Rand, id string) Task {
	op := Ops[r.Intn(len(Ops))]
	a, b := operands(r, op)
	ts := templates[op]
	q := fmt.Sprintf(ts[r.Intn(len(ts))], names[r.Intn(len(names))], things[r.Intn(len(things))], a, b)
	t := Task{ID: id, Question: q, Op: op, A: a, B: b, Expression: Expr(a, op, b)}
	t.Answer, _ = EvalInt(t.Expression)
	return t
}

// Generate returns n problems drawn deterministically from seed, with ids
// prefix-0, prefix-1, ...
func Generate(seed int64, n int, prefix string) []Task {
	r := rand.New(rand.NewSource(seed))
	out := make([]Task, n)
	for i := range out {
		out[i] = NewTask(r, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// Split is a task set: training problems and held-out problems, drawn from
// independent streams of the same seed so neither depends on the other's size.
type Split struct {
	Train   []Task `json:"train"`
	HeldOut []Task `json:"held_out"`
}

// NewSplit draws nTrain training and nHeld held-out problems from seed.
// Held-out questions that also occur in the training set are redrawn.
func NewSplit(seed int64, nTrain, nHeld int) Split {
	s := Split{Train: Generate(seed, nTrain, "train")}
	seen := make(map[string]bool, nTrain)
	for _, t := range s.Train {
		seen[t.Question] = true
	}
	r := rand.New(rand.NewSource(seed ^ 0x5eed))
	for i := 0; len(s.HeldOut) < nHeld; i++ {
		t := NewTask(r, fmt.Sprintf("held-%d", len(s.HeldOut)))
		if !seen[t.Question] {
			s.HeldOut = append(s.HeldOut, t)
		}
	}
	return s
}
