package capture

import "slices"

// Calls of a session form a prefix trie on token ids. Every node is the
// segment one call's choice appended to its parent's path: the prompt tokens
// past the parent (mask 0) followed by the completion (mask 1). Leaves are
// trajectories.

// hashMul is the multiplier of the polynomial path hash.
const hashMul = 0x100000001b3

type node struct {
	parent   *node
	children []*node
	depth    int    // path length in tokens
	hash     uint64 // polynomial hash of the path
	call     *Call
	choice   int
	between  []int32 // prompt tokens past the parent's path
	promptH  uint64  // hash of the full prompt, to find siblings with the same prompt
	promptN  int
}

// trie stitches a session's calls, added in seq order.
type trie struct {
	root  node
	nodes []*node
	calls int
	drift int
	// compacted maps the calls that start a path after a compaction (they
	// carry an earlier reply's summary) to the summarised call
	compacted map[*Call]string
	skipped   int // calls without token ids
}

func extendHash(h uint64, ids []int32) uint64 {
	for _, id := range ids {
		h = h*hashMul + uint64(uint32(id)) + 1
	}
	return h
}

// completion returns the completion tokens of a node's choice.
func (n *node) completion() []int32 { return n.call.Choices[n.choice].TokenIDs }

// path returns the node's full token path.
func (n *node) path() []int32 {
	out := make([]int32, n.depth)
	for m := n; m.parent != nil; m = m.parent {
		comp := m.completion()
		mid := m.depth - len(comp)
		copy(out[mid:m.depth], comp)
		copy(out[mid-len(m.between):mid], m.between)
	}
	return out
}

// promptOf returns the prompt token ids of a call's choice.
func promptOf(c *Call, choice int) []int32 {
	if len(c.PromptIDs) > 0 {
		return c.PromptIDs
	}
	return c.Choices[choice].PromptIDs
}

// add places a call's choices in the trie and reports whether it drifted:
// it extends no path of the session and repeats no earlier prompt.
func (t *trie) add(c *Call) bool {
	if c.Status == StatusUpstreamInvalid || c.Status == StatusUpstreamError {
		t.skipped++ // what the engine sent is not a completion: nothing to train on
		return false
	}
	drifted := false
	placed := false
	for i := range c.Choices {
		if len(c.Choices[i].TokenIDs) == 0 {
			continue
		}
		p := promptOf(c, i)
		parent, kind := t.parentFor(p)
		if !placed && kind == placeDrift {
			drifted = true
			t.drift++
		}
		placed = true
		t.attach(parent, c, i, p)
	}
	if placed {
		t.calls++
	} else {
		t.skipped++
	}
	return drifted
}

type placement int

const (
	placeFirst placement = iota
	placeExtend
	placeBranch
	placeDrift
)

// parentFor finds the deepest node whose path is a prefix of p and how the
// call relates to it.
func (t *trie) parentFor(p []int32) (*node, placement) {
	pre := make([]uint64, len(p)+1)
	for i, id := range p {
		pre[i+1] = pre[i]*hashMul + uint64(uint32(id)) + 1
	}
	var cands []*node
	for _, n := range t.nodes {
		if n.depth <= len(p) && pre[n.depth] == n.hash {
			cands = append(cands, n)
		}
	}
	// Deepest first: usually the first candidate verifies, so each call
	// materialises one path.
	slices.SortStableFunc(cands, func(a, b *node) int { return b.depth - a.depth })
	best := &t.root
	for _, n := range cands {
		if equalIDs(n.path(), p[:n.depth]) {
			best = n
			break
		}
	}
	ph := pre[len(p)]
	for _, ch := range best.children {
		if ch.promptN == len(p) && ch.promptH == ph && equalIDs(promptOf(ch.call, ch.choice), p) {
			return best, placeBranch
		}
	}
	switch {
	case best != &t.root && len(best.children) == 0:
		return best, placeExtend
	case best == &t.root && t.calls == 0:
		return best, placeFirst
	}
	return best, placeDrift
}

func (t *trie) attach(parent *node, c *Call, choice int, p []int32) {
	n := &node{
		parent:  parent,
		call:    c,
		choice:  choice,
		between: p[parent.depth:],
		promptH: extendHash(0, p),
		promptN: len(p),
	}
	comp := c.Choices[choice].TokenIDs
	n.depth = len(p) + len(comp)
	n.hash = extendHash(extendHash(parent.hash, n.between), comp)
	parent.children = append(parent.children, n)
	t.nodes = append(t.nodes, n)
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// leaves returns the trajectory leaves in creation order.
func (t *trie) leaves() []*node {
	var out []*node
	for _, n := range t.nodes {
		if len(n.children) == 0 {
			out = append(out, n)
		}
	}
	return out
}

// trajectory materialises the path of a leaf: tokens, loss mask, behaviour
// logprobs, per-token policy versions and one step per call. callReward
// gives a call's reward, or nil.
func trajectory(leaf *node, callReward func(id string) *float64) (tokens []int32, mask []uint8, lps []float32, vers []int64, steps []StepSpan) {
	var chain []*node
	for n := leaf; n.parent != nil; n = n.parent {
		chain = append(chain, n)
	}
	tokens = make([]int32, 0, leaf.depth)
	mask = make([]uint8, 0, leaf.depth)
	lps = make([]float32, 0, leaf.depth)
	vers = make([]int64, 0, leaf.depth)
	for i := len(chain) - 1; i >= 0; i-- {
		n := chain[i]
		tokens = append(tokens, n.between...)
		mask = append(mask, make([]uint8, len(n.between))...)
		lps = append(lps, make([]float32, len(n.between))...)
		vers = append(vers, make([]int64, len(n.between))...)
		ch := &n.call.Choices[n.choice]
		start := len(tokens)
		tokens = append(tokens, ch.TokenIDs...)
		for j := range ch.TokenIDs {
			mask = append(mask, 1)
			var lp float32
			if j < len(ch.Logprobs) {
				lp = ch.Logprobs[j]
			}
			lps = append(lps, lp)
			vers = append(vers, n.call.Version)
		}
		steps = append(steps, StepSpan{Call: n.call.ID, Start: start, End: len(tokens), Reward: callReward(n.call.ID)})
	}
	return tokens, mask, lps, vers, steps
}

// compactedFrom returns the summarised call when the first call of a
// leaf's path continues the session after a compaction, else "".
func (t *trie) compactedFrom(leaf *node) string {
	n := leaf
	for n.parent != nil && n.parent != &t.root {
		n = n.parent
	}
	return t.compacted[n.call]
}

// summarised reports whether a later call carries the reply of call id as
// the summary of a compaction.
func (t *trie) summarised(id string) bool {
	for _, of := range t.compacted {
		if of == id {
			return true
		}
	}
	return false
}

// forked reports whether call id's path starts inside the session's trie
// (it shares a prefix with an earlier path) rather than at its root.
func (t *trie) forked(id string) bool {
	for _, n := range t.nodes {
		if n.call.ID == id {
			return n.parent != &t.root
		}
	}
	return false
}
