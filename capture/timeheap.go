package capture

import (
	"container/heap"
	"time"
)

// timeHeap holds open sessions by the time of their last call, earliest
// first, so that the janitor's pass looks only at the sessions whose time has passed instead of walking them all:
// with many short sessions (every header-less one-call session stays open
// until its idle timeout) that walk ran every second over millions.
type timeHeap struct {
	items []timed
	index map[string]int // session -> position in items
}

type timed struct {
	at time.Time
	id string
}

func newTimeHeap() *timeHeap { return &timeHeap{index: map[string]int{}} }

// set adds a session or moves it to a new time.
func (h *timeHeap) set(id string, at time.Time) {
	if i, ok := h.index[id]; ok {
		h.items[i].at = at
		heap.Fix(h, i)
		return
	}
	heap.Push(h, timed{at, id})
}

// remove drops a session; unknown ones are ignored.
func (h *timeHeap) remove(id string) {
	if i, ok := h.index[id]; ok {
		heap.Remove(h, i)
	}
}

// get returns a session's time.
func (h *timeHeap) get(id string) (time.Time, bool) {
	i, ok := h.index[id]
	if !ok {
		return time.Time{}, false
	}
	return h.items[i].at, true
}

// before returns up to max sessions whose time is before cutoff, without
// removing them: a walk of the heap that stops below every entry not before
// the cutoff.
func (h *timeHeap) before(cutoff time.Time, max int) []string {
	var ids []string
	stack := []int{0}
	for len(stack) > 0 && len(ids) < max {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(h.items) || !h.items[i].at.Before(cutoff) {
			continue
		}
		ids = append(ids, h.items[i].id)
		stack = append(stack, 2*i+2, 2*i+1)
	}
	return ids
}

// oldest returns up to max sessions with the earliest times, earliest
// first, and the latest of their times, leaving the heap as it was.
func (h *timeHeap) oldest(max int) (ids []string, last time.Time) {
	popped := make([]timed, 0, min(max, len(h.items)))
	for len(popped) < max && len(h.items) > 0 {
		popped = append(popped, heap.Pop(h).(timed))
	}
	ids = make([]string, len(popped))
	for i, it := range popped {
		ids[i], last = it.id, it.at
		heap.Push(h, it)
	}
	return ids, last
}

// drop removes those of ids still held with a time before cutoff: a pass
// that found nothing to do for them (the session is gone, or no longer needs
// its timer) must not find them first again on every later pass.
func (h *timeHeap) drop(ids []string, cutoff time.Time) {
	for _, id := range ids {
		if at, ok := h.get(id); ok && at.Before(cutoff) {
			h.remove(id)
		}
	}
}

// heap.Interface; use set and remove instead.

func (h *timeHeap) Len() int           { return len(h.items) }
func (h *timeHeap) Less(i, j int) bool { return h.items[i].at.Before(h.items[j].at) }
func (h *timeHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.index[h.items[i].id], h.index[h.items[j].id] = i, j
}
func (h *timeHeap) Push(x any) {
	t := x.(timed)
	h.index[t.id] = len(h.items)
	h.items = append(h.items, t)
}
func (h *timeHeap) Pop() any {
	t := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	delete(h.index, t.id)
	return t
}
