package engine

// kvUsed is the KV cache positions the running sequences hold after the
// next forward (each appends its pending tokens).
func (s *scheduler) kvUsed() int {
	n := 0
	for _, q := range s.running {
		n += len(q.fed) + len(q.pending)
	}
	return n
}

// fits reports whether q can start without pushing the running sequences
// past the KV budget.
func (s *scheduler) fits(q *seq) bool {
	return s.kvBudget == 0 || s.kvUsed()+len(q.pending) <= s.kvBudget
}

// preemptOverBudget preempts the most recently started sequences until the
// next step fits the KV budget (one sequence always runs): each gives up its
// cache (to the prefix cache when on, so it can resume without recomputing)
// and goes back to the front of the queue to recompute its prompt and output
// so far, then continues where it left off.
func (s *scheduler) preemptOverBudget() {
	for s.kvBudget > 0 && len(s.running) > 1 && s.kvUsed() > s.kvBudget {
		q := s.running[len(s.running)-1]
		s.running = s.running[:len(s.running)-1]
		if s.prefixes != nil {
			s.prefixes.put(q.cache, q.fed, q.spec.Adapter, q.spec.CacheSalt)
		} else {
			q.cache.Free()
		}
		q.cache = nil
		q.pending = append(q.fed, q.pending...)
		q.fed = nil
		s.waiting = append([]*seq{q}, s.waiting...)
		s.metrics.preempted()
	}
}
