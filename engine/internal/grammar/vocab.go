package grammar

import (
	"bytes"
	"slices"
)

// Vocab is a tokenizer's vocabulary as bytes: the tokens a constraint may
// allow. Tokens without bytes (special tokens, holes) are never allowed.
type Vocab struct {
	size   int      // ids 0..size-1 (the model's logits)
	tokens [][]byte // bytes of each id; nil: never allowed
	nodes  []trieNode
	ids    []int32 // token ids grouped by trie node (trieNode.ids indexes here)
}

// trieNode is a node of the byte trie over the tokens: children are linked
// through child/sibling in byte order.
type trieNode struct {
	child, sibling int32 // -1: none
	b              byte
	idLo, idHi     int32 // ids[idLo:idHi] end here
}

// NewVocab builds the trie over tokens (index = token id; nil or empty:
// never allowed); size is the number of logits (at least len(tokens)).
func NewVocab(size int, tokens [][]byte) *Vocab {
	v := &Vocab{size: max(size, len(tokens)), tokens: make([][]byte, max(size, len(tokens)))}
	order := make([]int32, 0, len(tokens))
	for id, t := range tokens {
		if len(t) > 0 {
			v.tokens[id] = t
			order = append(order, int32(id))
		}
	}
	slices.SortStableFunc(order, func(a, b int32) int { return bytes.Compare(v.tokens[a], v.tokens[b]) })
	v.ids = order
	v.nodes = []trieNode{{child: -1, sibling: -1}} // root
	lastChild := []int32{-1}
	// path[d] is the node for the first d bytes of the previous token.
	path := []int32{0}
	var prev []byte
	for i, id := range order {
		t := v.tokens[id]
		common := 0
		for common < len(t) && common < len(prev) && t[common] == prev[common] {
			common++
		}
		path = path[:common+1]
		for d := common; d < len(t); d++ {
			parent := path[d]
			n := int32(len(v.nodes))
			v.nodes = append(v.nodes, trieNode{child: -1, sibling: -1, b: t[d], idLo: int32(i), idHi: int32(i)})
			lastChild = append(lastChild, -1)
			// Children arrive in byte order: append after the last one.
			if c := lastChild[parent]; c < 0 {
				v.nodes[parent].child = n
			} else {
				v.nodes[c].sibling = n
			}
			lastChild[parent] = n
			path = append(path, n)
		}
		leaf := path[len(t)]
		if v.nodes[leaf].idHi == v.nodes[leaf].idLo { // first id ending here
			v.nodes[leaf].idLo = int32(i)
		}
		v.nodes[leaf].idHi = int32(i) + 1
		prev = t
	}
	return v
}

// Size is the number of token ids (mask bits).
func (v *Vocab) Size() int { return v.size }

// Bytes returns a token's bytes (nil when it is never allowed).
func (v *Vocab) Bytes(id int32) []byte {
	if id < 0 || int(id) >= len(v.tokens) {
		return nil
	}
	return v.tokens[id]
}

// Next returns the state after token id, Dead() when the token is not
// allowed in s.
func (a *Automaton) Next(v *Vocab, s *State, id int32) *State {
	t := v.Bytes(id)
	if t == nil {
		return dead
	}
	return a.Feed(s, t)
}

// Mask returns the tokens allowed in s as a bitset over v's ids (bit id%64
// of word id/64). The result is shared: do not modify it.
func (a *Automaton) Mask(v *Vocab, s *State) []uint64 {
	words := (v.size + 63) / 64
	if s == dead {
		return make([]uint64, words)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.maskVocab == v {
		return s.mask
	}
	m := make([]uint64, words)
	a.walk(v, 0, s, m)
	if a.maskBytes+8*words <= maxMaskBytes {
		s.mask, s.maskVocab = m, v
		a.maskBytes += 8 * words
	}
	return m
}

// walk sets the bits of the tokens below trie node n that s allows.
func (a *Automaton) walk(v *Vocab, n int32, s *State, m []uint64) {
	for c := v.nodes[n].child; c >= 0; c = v.nodes[c].sibling {
		node := &v.nodes[c]
		ns := a.step(s, node.b)
		if ns == dead {
			continue
		}
		for _, id := range v.ids[node.idLo:node.idHi] {
			m[id/64] |= 1 << (uint(id) % 64)
		}
		if node.child >= 0 {
			a.walk(v, c, ns, m)
		}
	}
}
