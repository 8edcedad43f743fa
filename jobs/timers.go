package jobs

import "container/heap"

// timerHeap holds the deadline of each open job the engine knows, at most one entry per job,
// so that Run can sleep until the nearest one instead of keeping a timer per job. It is only a
// wake-up hint: the store's deadline index decides what is due.
type timerHeap struct {
	items []*timer
	at    map[jobKey]*timer
}

type timer struct {
	key   jobKey
	at    int64
	index int
}

// set moves the job's entry to at (0 removes it) and reports whether it became the nearest.
func (h *timerHeap) set(k jobKey, at int64) bool {
	t := h.at[k]
	switch {
	case at == 0 && t == nil:
		return false
	case at == 0:
		heap.Remove(h, t.index)
		delete(h.at, k)
		return false
	case t == nil:
		t = &timer{key: k, at: at}
		h.at[k] = t
		heap.Push(h, t)
	case t.at == at:
		return false
	default:
		t.at = at
		heap.Fix(h, t.index)
	}
	return t.index == 0
}

// next returns the nearest deadline.
func (h *timerHeap) next() (int64, bool) {
	if len(h.items) == 0 {
		return 0, false
	}
	return h.items[0].at, true
}

func (h *timerHeap) Len() int           { return len(h.items) }
func (h *timerHeap) Less(i, j int) bool { return h.items[i].at < h.items[j].at }
func (h *timerHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index, h.items[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.index = len(h.items)
	h.items = append(h.items, t)
}
func (h *timerHeap) Pop() any {
	n := len(h.items) - 1
	t := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	return t
}
