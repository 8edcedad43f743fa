package narration

import (
	"sort"
	"time"
)

// Kind is what an item voices. Its order is its priority (SPEC 8: permission ask > completion >
// interaction ask > hand-off > milestone); an inject is queued like a hand-off.
type Kind int

// The kinds of narration items, highest priority first.
const (
	PermissionAsk Kind = iota
	Completion
	InteractionAsk
	HandOff
	Inject
	Milestone
)

// priority maps kinds that share a priority together.
func (k Kind) priority() int {
	if k == Inject {
		return int(HandOff)
	}
	return int(k)
}

// Lifecycle reports whether items of the kind report tool_job_narration frames (hand-offs and
// injects have none: SPEC 8).
func (k Kind) Lifecycle() bool {
	return k == Milestone || k == InteractionAsk || k == Completion
}

// Item is one thing to say.
type Item struct {
	Kind    Kind
	CallID  string // the job it is about ("" for an inject)
	Key     string // an interaction id for asks (several asks of one job are told apart by it)
	Attempt int    // 1 for the first attempt
	Queued  time.Time
	// Spoken counts the attempts that reached speaking.
	Spoken  int
	Payload any // what the broker needs to voice it
	seq     uint64
}

// Queue is a session's queue of things to say.
type Queue struct {
	items []*Item
	seq   uint64
}

// Push queues it and returns the item it replaces: an older unspoken milestone of the same
// job (SPEC 8: reported skipped).
func (q *Queue) Push(it *Item) (replaced *Item) {
	if it.Kind == Milestone {
		for i, old := range q.items {
			if old.Kind == Milestone && old.CallID == it.CallID {
				replaced = old
				q.items = append(q.items[:i:i], q.items[i+1:]...)
				break
			}
		}
	}
	q.seq++
	it.seq = q.seq
	q.items = append(q.items, it)
	sort.SliceStable(q.items, func(i, j int) bool {
		a, b := q.items[i], q.items[j]
		if a.Kind.priority() != b.Kind.priority() {
			return a.Kind.priority() < b.Kind.priority()
		}
		return a.seq < b.seq
	})
	return replaced
}

// Pop takes the next item to say, or nil.
func (q *Queue) Pop() *Item {
	if len(q.items) == 0 {
		return nil
	}
	it := q.items[0]
	q.items[0] = nil
	q.items = q.items[1:]
	return it
}

// Remove takes out every item matching pred and returns them.
func (q *Queue) Remove(pred func(*Item) bool) []*Item {
	var out []*Item
	keep := q.items[:0]
	for _, it := range q.items {
		if pred(it) {
			out = append(out, it)
		} else {
			keep = append(keep, it)
		}
	}
	for i := len(keep); i < len(q.items); i++ {
		q.items[i] = nil
	}
	q.items = keep
	return out
}

// Len is the number of queued items.
func (q *Queue) Len() int { return len(q.items) }

// Oldest is when the longest-waiting item was queued (zero when empty).
func (q *Queue) Oldest() time.Time {
	var t time.Time
	for _, it := range q.items {
		if t.IsZero() || it.Queued.Before(t) {
			t = it.Queued
		}
	}
	return t
}
