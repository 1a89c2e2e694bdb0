package grammar

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
)

// Automaton runs a compiled constraint as a lazily built DFA. It is safe
// for concurrent use.
type Automaton struct {
	edges  [][]edge
	eps    [][]int32
	accept int32
	// live marks the nodes from which the accept node is reachable, and
	// stepping the nodes with a byte edge to a live node: states keep only
	// those, so a state is Dead exactly when no output can complete it (an
	// object key whose value schema admits nothing, such as enum [], never
	// starts).
	live, stepping []bool

	mu        sync.Mutex
	states    map[string]*State
	start     *State
	mark      []uint32 // closure scratch: mark[n] == gen when visited
	gen       uint32
	maskBytes int // memory held by cached masks
}

// maxStates bounds the interned DFA states (2 KiB each); past it the table
// starts over (states already handed out keep working).
const maxStates = 1 << 12

// maxMaskBytes bounds the token masks cached on one automaton's states
// (19 KiB each for Qwen3's vocabulary); past it masks are computed each
// time.
const maxMaskBytes = 16 << 20

// State is a DFA state: the set of NFA nodes the bytes so far lead to.
// States are shared; they never change once made (only their lazily filled
// transition and mask caches grow).
type State struct {
	nodes  []int32
	next   [256]*State // nil: not computed yet
	accept bool
	final  bool // accept, and no byte can follow

	mask      []uint64 // allowed tokens of maskVocab, when cached
	maskVocab *Vocab
}

// dead is the state with no nodes: nothing can follow.
var dead = &State{}

// Compile turns f into an automaton that accepts exactly f's language.
// It fails when the language is empty or the builder passed its limit.
func (b *Builder) Compile(f Frag) (*Automaton, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	a := &Automaton{edges: b.edges, eps: b.eps, accept: f.out, states: map[string]*State{},
		mark: make([]uint32, len(b.edges))}
	a.markLive()
	// The fragment's nodes only: anything else the builder made is
	// unreachable from f.in anyway.
	a.start = a.intern(a.closure([]int32{f.in}))
	if !a.canAccept() {
		return nil, fmt.Errorf("the constraint admits no output")
	}
	return a, nil
}

// markLive fills live (reverse reachability from the accept node over byte
// and epsilon edges) and stepping.
func (a *Automaton) markLive() {
	n := len(a.edges)
	rev := make([][]int32, n)
	for from := range a.edges {
		for _, e := range a.edges[from] {
			rev[e.to] = append(rev[e.to], int32(from))
		}
		for _, to := range a.eps[from] {
			rev[to] = append(rev[to], int32(from))
		}
	}
	a.live, a.stepping = make([]bool, n), make([]bool, n)
	a.live[a.accept] = true
	stack := []int32{a.accept}
	for len(stack) > 0 {
		m := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, p := range rev[m] {
			if !a.live[p] {
				a.live[p] = true
				stack = append(stack, p)
			}
		}
	}
	for from := range a.edges {
		for _, e := range a.edges[from] {
			if a.live[e.to] {
				a.stepping[from] = true
				break
			}
		}
	}
}

// canAccept reports whether the accept node is reachable from the start.
func (a *Automaton) canAccept() bool {
	seen := make([]bool, len(a.edges))
	stack := slices.Clone(a.start.nodes)
	for _, n := range stack {
		seen[n] = true
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == a.accept {
			return true
		}
		visit := func(m int32) {
			if !seen[m] {
				seen[m] = true
				stack = append(stack, m)
			}
		}
		for _, e := range a.edges[n] {
			visit(e.to)
		}
		for _, m := range a.eps[n] {
			visit(m)
		}
	}
	return false
}

// Nodes is the NFA's size.
func (a *Automaton) Nodes() int { return len(a.edges) }

// Start is the state before any output.
func (a *Automaton) Start() *State { return a.start }

// closure returns the sorted epsilon closure of seeds. Call with a.mu held
// (or before the automaton is shared).
func (a *Automaton) closure(seeds []int32) []int32 {
	a.gen++
	if a.gen == 0 {
		clear(a.mark)
		a.gen = 1
	}
	var out []int32
	stack := make([]int32, 0, len(seeds))
	for _, n := range seeds {
		if a.mark[n] != a.gen {
			a.mark[n] = a.gen
			stack = append(stack, n)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		out = append(out, n)
		for _, m := range a.eps[n] {
			if a.mark[m] != a.gen {
				a.mark[m] = a.gen
				stack = append(stack, m)
			}
		}
	}
	// Keep only nodes that matter: with a byte edge towards the accept
	// node, or the accept node.
	keep := out[:0]
	for _, n := range out {
		if a.stepping[n] || n == a.accept {
			keep = append(keep, n)
		}
	}
	slices.Sort(keep)
	return keep
}

// intern returns the state for a sorted node set.
func (a *Automaton) intern(nodes []int32) *State {
	if len(nodes) == 0 {
		return dead
	}
	key := make([]byte, 4*len(nodes))
	for i, n := range nodes {
		binary.LittleEndian.PutUint32(key[4*i:], uint32(n))
	}
	if s, ok := a.states[string(key)]; ok {
		return s
	}
	if len(a.states) >= maxStates {
		a.states = map[string]*State{}
	}
	s := &State{nodes: nodes}
	s.final = true
	for _, n := range nodes {
		if n == a.accept {
			s.accept = true
		}
		if a.stepping[n] {
			s.final = false
		}
	}
	s.final = s.final && s.accept
	a.states[string(key)] = s
	return s
}

// step follows byte c from s. Call with a.mu held.
func (a *Automaton) step(s *State, c byte) *State {
	if s == dead {
		return dead
	}
	if n := s.next[c]; n != nil {
		return n
	}
	var seeds []int32
	for _, n := range s.nodes {
		for _, e := range a.edges[n] {
			if e.lo <= c && c <= e.hi && a.live[e.to] {
				seeds = append(seeds, e.to)
			}
		}
	}
	n := dead
	if len(seeds) > 0 {
		n = a.intern(a.closure(seeds))
	}
	s.next[c] = n
	return n
}

// Feed follows the bytes of p from s; the result is Dead() when p leaves
// the language.
func (a *Automaton) Feed(s *State, p []byte) *State {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range p {
		if s = a.step(s, c); s == dead {
			return dead
		}
	}
	return s
}

// Match reports whether the whole of p is in the language.
func (a *Automaton) Match(p []byte) bool { return a.Feed(a.start, p).accept }

// Dead reports whether nothing can follow: the bytes so far are not a
// prefix of any output in the language.
func (s *State) Dead() bool { return s == dead }

// Accepting reports whether the output so far is complete (it may still
// continue when not Final).
func (s *State) Accepting() bool { return s.accept }

// Final reports whether the output is complete and nothing may follow.
func (s *State) Final() bool { return s.final }
