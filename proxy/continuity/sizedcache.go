package continuity

import (
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
)

// sizedCache is an LRU cache bounded by entries and by the bytes its values
// hold (as size reports them): adding past maxBytes evicts the least
// recently used entries. Values must not change size once added.
type sizedCache[V any] struct {
	c        *lru.Cache[string, V]
	bytes    atomic.Int64
	maxBytes int64
	size     func(V) int64
}

func newSizedCache[V any](entries int, maxBytes int64, size func(V) int64) (*sizedCache[V], error) {
	s := &sizedCache[V]{maxBytes: maxBytes, size: size}
	c, err := lru.NewWithEvict(entries, func(_ string, v V) { s.bytes.Add(-size(v)) })
	if err != nil {
		return nil, err
	}
	s.c = c
	return s, nil
}

// Add stores v under key, replacing what was there.
func (s *sizedCache[V]) Add(key string, v V) {
	s.c.Remove(key) // a replaced entry is not evicted: take its bytes off first
	s.bytes.Add(s.size(v))
	s.c.Add(key, v)
	for s.bytes.Load() > s.maxBytes && s.c.Len() > 1 {
		s.c.RemoveOldest()
	}
}

// Get returns the value under key and marks it recently used.
func (s *sizedCache[V]) Get(key string) (V, bool) { return s.c.Get(key) }

// Len is the number of entries.
func (s *sizedCache[V]) Len() int { return s.c.Len() }

// Bytes is the bytes the entries hold.
func (s *sizedCache[V]) Bytes() int64 { return s.bytes.Load() }
