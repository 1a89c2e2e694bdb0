package engine

// prefixPool keeps the KV caches of finished sequences so a later prompt
// that starts with the same tokens (the next turn of an agent conversation)
// prefills only its new suffix. Caches are per adapter and cache_salt (a
// request never reuses, so never times, another salt's prompts); the pool is bounded
// in cached tokens and evicts the least recently stored. It is used by the
// scheduler goroutine only.
type prefixPool struct {
	maxTokens int
	tokens    int
	entries   []*prefixEntry // oldest first
}

type prefixEntry struct {
	cache   lmCache
	toks    []int32 // the tokens whose keys/values the cache holds
	adapter *adapterEntry
	salt    string
}

// take removes and returns the cache sharing the longest prefix with prompt
// (same adapter and salt), truncated to that prefix, and the prefix length.
// At least one prompt token is always left to run, for the next logits.
func (p *prefixPool) take(prompt []int32, adapter *adapterEntry, salt string) (lmCache, int) {
	best, bestN := -1, 0
	for i, e := range p.entries {
		if e.adapter != adapter || e.salt != salt {
			continue
		}
		if n := min(commonPrefix(e.toks, prompt), len(prompt)-1); n > bestN {
			best, bestN = i, n
		}
	}
	if best < 0 {
		return nil, 0
	}
	e := p.entries[best]
	p.entries = append(p.entries[:best], p.entries[best+1:]...)
	p.tokens -= len(e.toks)
	e.cache.Truncate(bestN)
	return e.cache, bestN
}

// put stores a finished sequence's cache, evicting old entries beyond the
// token budget.
func (p *prefixPool) put(c lmCache, toks []int32, adapter *adapterEntry, salt string) {
	if len(toks) > p.maxTokens {
		c.Free()
		return
	}
	p.entries = append(p.entries, &prefixEntry{cache: c, toks: toks, adapter: adapter, salt: salt})
	p.tokens += len(toks)
	for p.tokens > p.maxTokens {
		old := p.entries[0]
		p.entries = p.entries[1:]
		p.tokens -= len(old.toks)
		old.cache.Free()
	}
}

// clear frees every cached entry.
func (p *prefixPool) clear() {
	for _, e := range p.entries {
		e.cache.Free()
	}
	p.entries, p.tokens = nil, 0
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
