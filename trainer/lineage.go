package trainer

// lineage tracks which version's weights each trained version started
// from, so that a sample's lag counts the optimizer steps between the
// weights that generated it and the trainer's own, across reverts. Version
// numbers only move forward: after a rollback to v3 the next version is,
// say, v8, and samples from v3 are one step behind it, not five; samples
// from the rolled-back v4..v7 are as far as the path through v3.
type lineage struct {
	cur    int64           // the version whose weights the trainer holds
	parent map[int64]int64 // a version trained here -> the version it started from
}

// stepped records that version next was trained from the current weights.
func (l *lineage) stepped(next int64) {
	if l.parent == nil {
		l.parent = map[int64]int64{}
	}
	l.parent[next] = l.cur
	l.cur = next
}

// reverted records that the trainer went back to version to's weights.
func (l *lineage) reverted(to int64) { l.cur = to }

// lag is the number of steps between version v's weights and the current
// ones: up from v to the nearest version the current weights descend from,
// then down to them. A version this process did not train counts as a
// descendant of the newest ancestor of the current weights numbered before
// it (another trainer's), or, older than them all (from before a restart),
// as on the line below the oldest.
func (l *lineage) lag(v int64) int64 {
	down := map[int64]int64{} // the current weights' ancestors -> steps to them
	var root int64
	for x, d := l.cur, int64(0); ; d++ {
		down[x], root = d, x
		p, ok := l.parent[x]
		if !ok {
			break
		}
		x = p
	}
	for x, up := v, int64(0); ; up++ {
		if dd, ok := down[x]; ok {
			return dd + up
		}
		p, ok := l.parent[x]
		if !ok {
			if x < root {
				return down[root] + up + (root - x)
			}
			return down[newestUpTo(down, x)] + up
		}
		x = p
	}
}

// newestUpTo is the newest version in down numbered at most v (down holds
// one at most v: the oldest).
func newestUpTo(down map[int64]int64, v int64) int64 {
	best := int64(-1)
	for a := range down {
		if a <= v && a > best {
			best = a
		}
	}
	return best
}
