package demo

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxExpr bounds a calculator expression's length.
const maxExpr = 200

// Calculate evaluates an arithmetic expression (numbers, + - * /, unary
// minus, parentheses) and formats the result as the calculator tool returns
// it: an integer without a decimal point, otherwise the shortest decimal.
func Calculate(expr string) (string, error) {
	v, err := evalFloat(expr)
	if err != nil {
		return "", err
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10), nil
	}
	return strconv.FormatFloat(v, 'f', -1, 64), nil
}

// EvalInt evaluates expr and returns its value when it is an integer.
func EvalInt(expr string) (int64, error) {
	v, err := evalFloat(expr)
	if err != nil {
		return 0, err
	}
	if v != math.Trunc(v) || math.Abs(v) >= 1e15 {
		return 0, fmt.Errorf("calculate %q: %v is not an integer", expr, v)
	}
	return int64(v), nil
}

func evalFloat(expr string) (float64, error) {
	if len(expr) > maxExpr {
		return 0, fmt.Errorf("calculate: expression longer than %d characters", maxExpr)
	}
	p := &parser{s: strings.ReplaceAll(expr, " ", "")}
	if p.s == "" {
		return 0, errors.New("calculate: empty expression")
	}
	v, err := p.sum(0)
	if err == nil && p.i < len(p.s) {
		err = fmt.Errorf("unexpected %q at %d", p.s[p.i], p.i)
	}
	if err == nil && (math.IsInf(v, 0) || math.IsNaN(v)) {
		err = errors.New("result is not a finite number")
	}
	if err != nil {
		return 0, fmt.Errorf("calculate %q: %w", expr, err)
	}
	return v, nil
}

// parser is a recursive-descent evaluator over s (spaces removed).
type parser struct {
	s string
	i int
}

// maxDepth bounds parenthesis nesting.
const maxDepth = 32

func (p *parser) sum(depth int) (float64, error) {
	v, err := p.product(depth)
	for err == nil && p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
		op := p.s[p.i]
		p.i++
		var w float64
		if w, err = p.product(depth); op == '+' {
			v += w
		} else {
			v -= w
		}
	}
	return v, err
}

func (p *parser) product(depth int) (float64, error) {
	v, err := p.unary(depth)
	for err == nil && p.i < len(p.s) && (p.s[p.i] == '*' || p.s[p.i] == '/') {
		op := p.s[p.i]
		p.i++
		var w float64
		if w, err = p.unary(depth); err != nil {
			break
		}
		if op == '*' {
			v *= w
		} else if w == 0 {
			err = errors.New("division by zero")
		} else {
			v /= w
		}
	}
	return v, err
}

func (p *parser) unary(depth int) (float64, error) {
	if p.i < len(p.s) && p.s[p.i] == '-' {
		p.i++
		v, err := p.unary(depth)
		return -v, err
	}
	return p.atom(depth)
}

func (p *parser) atom(depth int) (float64, error) {
	if p.i >= len(p.s) {
		return 0, errors.New("unexpected end")
	}
	if p.s[p.i] == '(' {
		if depth >= maxDepth {
			return 0, errors.New("parentheses nested too deeply")
		}
		p.i++
		v, err := p.sum(depth + 1)
		if err != nil {
			return 0, err
		}
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			return 0, fmt.Errorf("missing ) at %d", p.i)
		}
		p.i++
		return v, nil
	}
	start := p.i
	for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.') {
		p.i++
	}
	if start == p.i {
		return 0, fmt.Errorf("unexpected %q at %d", p.s[p.i], p.i)
	}
	return strconv.ParseFloat(p.s[start:p.i], 64)
}
