// Package grammar compiles output constraints (a JSON Schema subset, literal
// wrappers such as hermes tool-call tags) into byte-level automata, and
// checks tokens against them for constrained decoding.
//
// A constraint is built as a Thompson NFA over bytes (Builder), then run as a
// lazily built DFA (Automaton: each state is a set of NFA nodes, made on
// first visit, its byte transitions filled in as they are taken). A Vocab
// holds every token's bytes in a trie, so the tokens allowed in a state are
// found by one walk of the trie through the DFA; the result is cached on the
// state.
//
// All languages here are regular: free-form JSON is bounded in depth and
// recursive schemas are cut at a depth (see Options).
package grammar

import (
	"errors"
	"fmt"
)

// edge is a byte transition: any byte in [lo, hi] leads to node to.
type edge struct {
	lo, hi byte
	to     int32
}

// Frag is a piece of NFA with one entry and one exit node. A fragment is
// used once: to use a language twice, build it twice. Combinators only add
// edges out of a fragment's exit and into its entry, never the reverse, as
// either node may carry the fragment's own loops.
type Frag struct {
	in, out int32
}

// ErrTooLarge is returned when a constraint needs more NFA nodes than the
// builder's limit.
var ErrTooLarge = errors.New("constraint too large")

// Builder makes NFA fragments. The zero value is not usable: see NewBuilder.
type Builder struct {
	edges    [][]edge
	eps      [][]int32
	maxNodes int
	opts     Options
	kmp      [][256]int // Forbid's KMP table, made on first use
}

// Options bound and adjust what a Builder makes.
type Options struct {
	// MaxDepth is how many containers (objects, arrays) free-form JSON may
	// nest, counted from the root value; a recursive $ref is cut after this
	// many expansions.
	MaxDepth int
	// MaxNodes bounds the NFA's size.
	MaxNodes int
	// AllProperties emits every declared property of an object schema, as
	// OpenAI's strict mode requires; otherwise properties not listed in
	// "required" may be left out (as xgrammar and JSON Schema have it).
	AllProperties bool
	// Forbid is a substring the raw text of no JSON string may contain
	// (plain ASCII without '"' or '\\'): hermes tool calls keep
	// "</tool_call>" out of their arguments, as the parser would cut there.
	Forbid string
}

// DefaultOptions are the engine's bounds.
var DefaultOptions = Options{MaxDepth: 6, MaxNodes: 1 << 18}

// NewBuilder returns an empty builder; zero bounds take DefaultOptions'.
func NewBuilder(opts Options) *Builder {
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = DefaultOptions.MaxDepth
	}
	if opts.MaxNodes <= 0 {
		opts.MaxNodes = DefaultOptions.MaxNodes
	}
	return &Builder{maxNodes: opts.MaxNodes, opts: opts}
}

// Nodes is the number of NFA nodes made so far.
func (b *Builder) Nodes() int { return len(b.edges) }

// check reports ErrTooLarge once the node limit is passed.
func (b *Builder) check() error {
	if len(b.edges) > b.maxNodes {
		return fmt.Errorf("%w: more than %d automaton nodes", ErrTooLarge, b.maxNodes)
	}
	return nil
}

func (b *Builder) node() int32 {
	b.edges = append(b.edges, nil)
	b.eps = append(b.eps, nil)
	return int32(len(b.edges) - 1)
}

func (b *Builder) link(from, to int32) { b.eps[from] = append(b.eps[from], to) }

// Empty matches the empty string.
func (b *Builder) Empty() Frag {
	n := b.node()
	return Frag{n, n}
}

// Never matches nothing.
func (b *Builder) Never() Frag { return Frag{b.node(), b.node()} }

// Lit matches s.
func (b *Builder) Lit(s string) Frag {
	in := b.node()
	cur := in
	for i := 0; i < len(s); i++ {
		n := b.node()
		b.edges[cur] = append(b.edges[cur], edge{s[i], s[i], n})
		cur = n
	}
	return Frag{in, cur}
}

// ByteRange is an inclusive range of byte values.
type ByteRange struct{ Lo, Hi byte }

// Class matches one byte in any of the ranges.
func (b *Builder) Class(rs ...ByteRange) Frag {
	in, out := b.node(), b.node()
	for _, r := range rs {
		if r.Lo <= r.Hi {
			b.edges[in] = append(b.edges[in], edge{r.Lo, r.Hi, out})
		}
	}
	return Frag{in, out}
}

// Seq matches the fragments one after another.
func (b *Builder) Seq(fs ...Frag) Frag {
	if len(fs) == 0 {
		return b.Empty()
	}
	for i := 1; i < len(fs); i++ {
		b.link(fs[i-1].out, fs[i].in)
	}
	return Frag{fs[0].in, fs[len(fs)-1].out}
}

// Alt matches any one of the fragments (none: nothing).
func (b *Builder) Alt(fs ...Frag) Frag {
	if len(fs) == 1 {
		return fs[0]
	}
	in, out := b.node(), b.node()
	for _, f := range fs {
		b.link(in, f.in)
		b.link(f.out, out)
	}
	return Frag{in, out}
}

// Opt matches f or the empty string. (The skip goes to a new exit node:
// f's own exit may have edges back into f.)
func (b *Builder) Opt(f Frag) Frag {
	in, out := b.node(), b.node()
	b.link(in, f.in)
	b.link(f.out, out)
	b.link(in, out)
	return Frag{in, out}
}

// Star matches f repeated zero or more times.
func (b *Builder) Star(f Frag) Frag {
	n := b.node()
	b.link(n, f.in)
	b.link(f.out, n)
	return Frag{n, n}
}

// Plus matches f repeated one or more times.
func (b *Builder) Plus(f Frag) Frag {
	out := b.node()
	b.link(f.out, out)
	b.link(out, f.in)
	return Frag{f.in, out}
}

// List matches open, then min..max elements separated by sep, then close
// (max < 0: no upper bound). elem makes a fresh copy of the element each
// time it is called: once when max < 0 and min <= 1, else max (or min+1)
// times.
func (b *Builder) List(open, sep, close string, min, max int, elem func() (Frag, error)) (Frag, error) {
	if max >= 0 && max < min {
		return b.Never(), nil
	}
	start := b.Lit(open)
	end := b.Lit(close)
	if max == 0 {
		return b.Seq(start, end), nil
	}
	if max < 0 && min <= 1 {
		// open (elem (sep elem)*)? close, with elem built once:
		// start -> e.in; e.out -> end | sep -> e.in.
		e, err := elem()
		if err != nil {
			return Frag{}, err
		}
		b.link(start.out, e.in)
		if min == 0 {
			b.link(start.out, end.in)
		}
		s := b.Lit(sep)
		b.link(e.out, s.in)
		b.link(s.out, e.in)
		b.link(e.out, end.in)
		return Frag{start.in, end.out}, b.check()
	}
	// Unrolled: element k (1-based) may be followed by close once k >= min.
	if min == 0 {
		b.link(start.out, end.in)
	}
	prev := start.out
	n := max
	if max < 0 {
		n = min
	}
	for k := 1; k <= n; k++ {
		if k > 1 {
			s := b.Lit(sep)
			b.link(prev, s.in)
			prev = s.out
		}
		e, err := elem()
		if err != nil {
			return Frag{}, err
		}
		if err := b.check(); err != nil {
			return Frag{}, err
		}
		b.link(prev, e.in)
		prev = e.out
		if k >= min {
			b.link(prev, end.in)
		}
	}
	if max < 0 { // more after the min-th: (sep elem)*
		s := b.Lit(sep)
		e, err := elem()
		if err != nil {
			return Frag{}, err
		}
		b.link(prev, s.in)
		b.link(s.out, e.in)
		b.link(e.out, s.in)
		b.link(e.out, end.in)
	}
	return Frag{start.in, end.out}, b.check()
}

// Repeat matches f's language min..max times (max < 0: unbounded); mk
// builds a fresh copy of it.
func (b *Builder) Repeat(min, max int, mk func() Frag) (Frag, error) {
	if max >= 0 && max < min {
		return b.Never(), nil
	}
	in := b.node()
	prev := in
	out := b.node()
	n := max
	if max < 0 {
		n = min
	}
	for k := 1; k <= n; k++ {
		if k > min {
			b.link(prev, out)
		}
		f := mk()
		if err := b.check(); err != nil {
			return Frag{}, err
		}
		b.link(prev, f.in)
		prev = f.out
	}
	b.link(prev, out)
	if max < 0 {
		s := b.Star(mk())
		b.link(prev, s.in)
		b.link(s.out, out)
	}
	return Frag{in, out}, b.check()
}

// UntilLit matches any bytes up to and including the first occurrence of
// lit (a KMP automaton built from byte edges, so the text before lit never
// contains it).
func (b *Builder) UntilLit(lit string) Frag {
	if lit == "" {
		return b.Empty()
	}
	m := len(lit)
	// Failure function.
	fail := make([]int, m)
	for i, k := 1, 0; i < m; i++ {
		for k > 0 && lit[i] != lit[k] {
			k = fail[k-1]
		}
		if lit[i] == lit[k] {
			k++
		}
		fail[i] = k
	}
	st := make([]int32, m+1)
	for i := range st {
		st[i] = b.node()
	}
	for k := 0; k < m; k++ {
		// next[c] for every byte c from state k (k bytes of lit matched).
		var next [256]int
		for c := 0; c < 256; c++ {
			j := k
			for j > 0 && lit[j] != byte(c) {
				j = fail[j-1]
			}
			if lit[j] == byte(c) {
				j++
			}
			next[c] = j
		}
		for c := 0; c < 256; {
			d := c
			for d+1 < 256 && next[d+1] == next[c] {
				d++
			}
			b.edges[st[k]] = append(b.edges[st[k]], edge{byte(c), byte(d), st[next[c]]})
			c = d + 1
		}
	}
	return Frag{st[0], st[m]}
}
