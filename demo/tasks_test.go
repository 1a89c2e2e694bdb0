package demo

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

var digitRuns = regexp.MustCompile(`[0-9]+`)

func TestSplitDeterministicAndDisjoint(t *testing.T) {
	a, b := NewSplit(3, 200, 50), NewSplit(3, 200, 50)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different splits")
	}
	if reflect.DeepEqual(a.Train, NewSplit(4, 200, 50).Train) {
		t.Fatal("different seeds gave the same training set")
	}
	if !reflect.DeepEqual(NewSplit(3, 10, 50).HeldOut[:5], NewSplit(3, 200, 50).HeldOut[:5]) {
		t.Fatal("held-out set depends on the training set size")
	}
	train := map[string]bool{}
	for _, tk := range a.Train {
		train[tk.Question] = true
	}
	for _, tk := range a.HeldOut {
		if train[tk.Question] {
			t.Fatalf("held-out question %q is also a training question", tk.Question)
		}
	}
}

func TestTasksAreSolvable(t *testing.T) {
	ops := map[Op]int{}
	for _, tk := range Generate(9, 2000, "t") {
		ops[tk.Op]++
		v, err := EvalInt(tk.Expression)
		if err != nil || v != tk.Answer || v <= 0 {
			t.Fatalf("%+v: eval %d %v", tk, v, err)
		}
		// the question states both numbers, in the expression's order, and
		// no other digits
		if tk.Expression != fmt.Sprint(tk.A, tk.Op, tk.B) {
			t.Fatalf("expression %q for %+v", tk.Expression, tk)
		}
		if got := digitRuns.FindAllString(tk.Question, -1); len(got) != 2 || got[0] != fmt.Sprint(tk.A) || got[1] != fmt.Sprint(tk.B) {
			t.Fatalf("question %q states %v, want %d then %d", tk.Question, got, tk.A, tk.B)
		}
	}
	for _, op := range Ops {
		if ops[op] < 400 {
			t.Errorf("op %s drawn %d times of 2000", op, ops[op])
		}
	}
}

func TestCalculate(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"17*23", "391", ""},
		{" 2 + 3 * 4 ", "14", ""},
		{"(2+3)*4", "20", ""},
		{"-3--4", "1", ""},
		{"7/2", "3.5", ""},
		{"84/7", "12", ""},
		{"6*7 - 2", "40", ""},
		{"(6+7)/6", "2.1666666666666665", ""},
		{"a*b", "", "unexpected 'a'"},
		{"1/0", "", "division by zero"},
		{"", "", "empty"},
		{"2+", "", "unexpected end"},
		{"2+$", "", "unexpected"},
		{"(1+2", "", "missing )"},
		{strings.Repeat("(", 40) + "1" + strings.Repeat(")", 40), "", "nested"},
		{strings.Repeat("1+", 150) + "1", "", "longer than"},
	} {
		got, err := Calculate(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Calculate(%q) = %q, %v; want error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Calculate(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := EvalInt("7/2"); err == nil {
		t.Error("EvalInt accepted a fraction")
	}
}

func FuzzCalculate(f *testing.F) {
	for _, s := range []string{"17*23", "(1+2)*3", "-4/2", "1/0", "((", "9.5*2"} {
		f.Add(s)
	}
	f.Add("a*b+c")
	f.Fuzz(func(t *testing.T, s string) { _, _ = Calculate(s) })
}
