package narration_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/narration"
)

// t0 is the fake clock's origin: every time in these tests is an explicit offset from it.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

var kindNames = map[narration.Kind]string{
	narration.PermissionAsk:  "permission",
	narration.Completion:     "completion",
	narration.InteractionAsk: "ask",
	narration.HandOff:        "handoff",
	narration.Inject:         "inject",
	narration.Milestone:      "milestone",
}

// item is a queue item named "kind/call" (a milestone of job a is "milestone/a").
func item(kind narration.Kind, call string, queuedMS int) *narration.Item {
	return &narration.Item{Kind: kind, CallID: call, Attempt: 1, Queued: at(queuedMS)}
}

func name(it *narration.Item) string {
	if it == nil {
		return "<nil>"
	}
	return kindNames[it.Kind] + "/" + it.CallID
}

// drain pops every item and names them in order.
func drain(q *narration.Queue) string {
	var out []string
	for it := q.Pop(); it != nil; it = q.Pop() {
		out = append(out, name(it))
	}
	return strings.Join(out, " ")
}

// TestQueuePriority checks SPEC 8's order: permission ask > completion > interaction ask >
// hand-off = inject > milestone, first in, first out within a priority.
func TestQueuePriority(t *testing.T) {
	type push struct {
		kind narration.Kind
		call string
	}
	tests := []struct {
		name   string
		pushes []push
		want   string
	}{
		{"empty", nil, ""},
		{"one", []push{{narration.Milestone, "a"}}, "milestone/a"},
		{
			"every kind pushed lowest first",
			[]push{{narration.Milestone, "m"}, {narration.Inject, ""}, {narration.HandOff, "h"}, {narration.InteractionAsk, "i"}, {narration.Completion, "c"}, {narration.PermissionAsk, "p"}},
			"permission/p completion/c ask/i inject/ handoff/h milestone/m",
		},
		{
			"every kind pushed highest first",
			[]push{{narration.PermissionAsk, "p"}, {narration.Completion, "c"}, {narration.InteractionAsk, "i"}, {narration.HandOff, "h"}, {narration.Inject, ""}, {narration.Milestone, "m"}},
			"permission/p completion/c ask/i handoff/h inject/ milestone/m",
		},
		{
			"fifo within a priority",
			[]push{{narration.Completion, "c1"}, {narration.Milestone, "m1"}, {narration.Completion, "c2"}, {narration.Milestone, "m2"}, {narration.Completion, "c3"}},
			"completion/c1 completion/c2 completion/c3 milestone/m1 milestone/m2",
		},
		{
			"hand-offs and injects share a priority: arrival order between them",
			[]push{{narration.Inject, "i1"}, {narration.HandOff, "h1"}, {narration.Inject, "i2"}, {narration.HandOff, "h2"}},
			"inject/i1 handoff/h1 inject/i2 handoff/h2",
		},
		{
			"a hand-off outranks a milestone pushed before it, an ask outranks both",
			[]push{{narration.Milestone, "a"}, {narration.HandOff, "b"}, {narration.InteractionAsk, "c"}},
			"ask/c handoff/b milestone/a",
		},
		{
			"permission asks first in, first out",
			[]push{{narration.Completion, "c"}, {narration.PermissionAsk, "p1"}, {narration.PermissionAsk, "p2"}},
			"permission/p1 permission/p2 completion/c",
		},
		{
			"several asks of one job keep their order",
			[]push{{narration.InteractionAsk, "j"}, {narration.Milestone, "j"}, {narration.InteractionAsk, "j"}},
			"ask/j ask/j milestone/j",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var q narration.Queue
			for i, p := range tc.pushes {
				if old := q.Push(item(p.kind, p.call, i)); old != nil && p.kind != narration.Milestone {
					t.Fatalf("push %s replaced %s", name(item(p.kind, p.call, i)), name(old))
				}
			}
			if q.Len() != len(tc.pushes) {
				t.Fatalf("Len %d after %d pushes", q.Len(), len(tc.pushes))
			}
			if got := drain(&q); got != tc.want {
				t.Fatalf("order\n got %q\nwant %q", got, tc.want)
			}
			if q.Len() != 0 || q.Pop() != nil {
				t.Fatal("queue not empty after draining it")
			}
		})
	}
}

// TestQueueInterleaved pops while pushing: a later item of higher priority goes ahead of older
// ones still queued, never ahead of what was already popped.
func TestQueueInterleaved(t *testing.T) {
	var q narration.Queue
	q.Push(item(narration.Milestone, "m1", 0))
	q.Push(item(narration.HandOff, "h1", 1))
	if got := name(q.Pop()); got != "handoff/h1" {
		t.Fatalf("first pop %s, want handoff/h1", got)
	}
	q.Push(item(narration.Milestone, "m2", 2))
	q.Push(item(narration.Completion, "c1", 3))
	q.Push(item(narration.Inject, "i1", 4))
	if got := drain(&q); got != "completion/c1 inject/i1 milestone/m1 milestone/m2" {
		t.Fatalf("order %q", got)
	}
}

// TestQueueMilestoneReplacement checks SPEC 8: a newer milestone of a job replaces that job's
// older unspoken milestone (the older one is returned, to be reported skipped); nothing else
// is replaced.
func TestQueueMilestoneReplacement(t *testing.T) {
	tests := []struct {
		name string
		// pushes are "kind/call"; the replaced item expected of each push ("" for none).
		pushes   []string
		replaced []string
		want     string
	}{
		{
			"the newer milestone of the same job replaces the older",
			[]string{"milestone/a", "milestone/a"},
			[]string{"", "milestone/a#0"},
			"milestone/a#1",
		},
		{
			"milestones of other jobs stay",
			[]string{"milestone/a", "milestone/b", "milestone/a"},
			[]string{"", "", "milestone/a#0"},
			"milestone/b#1 milestone/a#2",
		},
		{
			"three in a row leave only the newest",
			[]string{"milestone/a", "milestone/a", "milestone/a"},
			[]string{"", "milestone/a#0", "milestone/a#1"},
			"milestone/a#2",
		},
		{
			"a milestone never replaces another kind of the same job",
			[]string{"completion/a", "ask/a", "handoff/a", "milestone/a"},
			[]string{"", "", "", ""},
			"completion/a#0 ask/a#1 handoff/a#2 milestone/a#3",
		},
		{
			"other kinds never replace a milestone",
			[]string{"milestone/a", "completion/a", "handoff/a", "ask/a"},
			[]string{"", "", "", ""},
			"completion/a#1 ask/a#3 handoff/a#2 milestone/a#0",
		},
		{
			"completions of one job are not replaced",
			[]string{"completion/a", "completion/a"},
			[]string{"", ""},
			"completion/a#0 completion/a#1",
		},
	}
	kinds := map[string]narration.Kind{}
	for k, n := range kindNames {
		kinds[n] = k
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var q narration.Queue
			for i, p := range tc.pushes {
				kind, call, _ := strings.Cut(p, "/")
				it := item(kinds[kind], call, i)
				it.Key = fmt.Sprintf("#%d", i)
				old := q.Push(it)
				got := ""
				if old != nil {
					got = name(old) + old.Key
				}
				if got != tc.replaced[i] {
					t.Fatalf("push %d (%s) replaced %q, want %q", i, p, got, tc.replaced[i])
				}
			}
			var out []string
			for it := q.Pop(); it != nil; it = q.Pop() {
				out = append(out, name(it)+it.Key)
			}
			if got := strings.Join(out, " "); got != tc.want {
				t.Fatalf("queue\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestQueueReplacementAfterPop: a milestone already taken from the queue (being spoken) is not
// replaced by the next one of its job.
func TestQueueReplacementAfterPop(t *testing.T) {
	var q narration.Queue
	q.Push(item(narration.Milestone, "a", 0))
	if got := name(q.Pop()); got != "milestone/a" {
		t.Fatalf("pop %s", got)
	}
	if old := q.Push(item(narration.Milestone, "a", 1)); old != nil {
		t.Fatalf("a spoken milestone was replaced: %s", name(old))
	}
	if q.Len() != 1 {
		t.Fatalf("Len %d, want 1", q.Len())
	}
}

// TestQueueRemove takes out matching items and keeps the order of the rest.
func TestQueueRemove(t *testing.T) {
	build := func() *narration.Queue {
		q := &narration.Queue{}
		q.Push(item(narration.Milestone, "a", 0))
		q.Push(item(narration.Completion, "b", 1))
		q.Push(item(narration.HandOff, "a", 2))
		q.Push(item(narration.InteractionAsk, "c", 3))
		q.Push(item(narration.Completion, "a", 4))
		return q
	}
	tests := []struct {
		name    string
		pred    func(*narration.Item) bool
		removed string
		left    string
	}{
		{"nothing matches", func(*narration.Item) bool { return false }, "", "completion/b completion/a ask/c handoff/a milestone/a"},
		{"everything", func(*narration.Item) bool { return true }, "completion/b completion/a ask/c handoff/a milestone/a", ""},
		{
			"one job but its completion",
			func(it *narration.Item) bool { return it.CallID == "a" && it.Kind != narration.Completion },
			"handoff/a milestone/a",
			"completion/b completion/a ask/c",
		},
		{"one kind", func(it *narration.Item) bool { return it.Kind == narration.Completion }, "completion/b completion/a", "ask/c handoff/a milestone/a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := build()
			var names []string
			for _, it := range q.Remove(tc.pred) {
				names = append(names, name(it))
			}
			if got := strings.Join(names, " "); got != tc.removed {
				t.Fatalf("removed %q, want %q", got, tc.removed)
			}
			if want := len(strings.Fields(tc.left)); q.Len() != want {
				t.Fatalf("Len %d, want %d", q.Len(), want)
			}
			if got := drain(q); got != tc.left {
				t.Fatalf("left %q, want %q", got, tc.left)
			}
		})
	}

	// Items pushed after a Remove still take their place by priority.
	q := build()
	q.Remove(func(it *narration.Item) bool { return it.Kind == narration.Completion })
	q.Push(item(narration.Completion, "d", 5))
	q.Push(item(narration.Milestone, "e", 6))
	if got := drain(q); got != "completion/d ask/c handoff/a milestone/a milestone/e" {
		t.Fatalf("after Remove and Push: %q", got)
	}
}

// TestQueueOldest is when the longest-waiting item was queued, by its Queued time (a retried
// item keeps the time it was queued again), zero when empty.
func TestQueueOldest(t *testing.T) {
	var q narration.Queue
	if !q.Oldest().IsZero() {
		t.Fatalf("Oldest of an empty queue %v, want zero", q.Oldest())
	}
	q.Push(item(narration.Milestone, "m", 100))
	if !q.Oldest().Equal(at(100)) {
		t.Fatalf("Oldest %v, want +100ms", q.Oldest().Sub(t0))
	}
	// A later item of higher priority goes first but is not the oldest.
	q.Push(item(narration.Completion, "c", 250))
	q.Push(item(narration.HandOff, "h", 50)) // queued earlier (a retry keeps an older time)
	if !q.Oldest().Equal(at(50)) {
		t.Fatalf("Oldest %v, want +50ms", q.Oldest().Sub(t0))
	}
	steps := []struct {
		pop    string
		oldest int // -1: zero
	}{
		{"completion/c", 50},
		{"handoff/h", 100},
		{"milestone/m", -1},
	}
	for _, s := range steps {
		if got := name(q.Pop()); got != s.pop {
			t.Fatalf("pop %s, want %s", got, s.pop)
		}
		o := q.Oldest()
		if s.oldest < 0 {
			if !o.IsZero() {
				t.Fatalf("after popping %s: Oldest %v, want zero", s.pop, o)
			}
			continue
		}
		if !o.Equal(at(s.oldest)) {
			t.Fatalf("after popping %s: Oldest %v, want +%dms", s.pop, o.Sub(t0), s.oldest)
		}
	}

	// Removing the oldest moves Oldest on; the replaced milestone is no longer counted.
	q.Push(item(narration.Milestone, "a", 10))
	q.Push(item(narration.Completion, "b", 20))
	q.Push(item(narration.Milestone, "a", 30)) // replaces the milestone queued at +10ms
	if !q.Oldest().Equal(at(20)) {
		t.Fatalf("after replacing the oldest milestone: Oldest %v, want +20ms", q.Oldest().Sub(t0))
	}
	q.Remove(func(it *narration.Item) bool { return it.CallID == "b" })
	if !q.Oldest().Equal(at(30)) {
		t.Fatalf("after Remove: Oldest %v, want +30ms", q.Oldest().Sub(t0))
	}
}

// TestKindLifecycle: milestones, interaction asks and completions report tool_job_narration;
// hand-offs, injects and permission asks have no lifecycle frames (SPEC 8, 12).
func TestKindLifecycle(t *testing.T) {
	want := map[narration.Kind]bool{
		narration.PermissionAsk:  false,
		narration.Completion:     true,
		narration.InteractionAsk: true,
		narration.HandOff:        false,
		narration.Inject:         false,
		narration.Milestone:      true,
	}
	for k, w := range want {
		if got := k.Lifecycle(); got != w {
			t.Errorf("%s.Lifecycle() = %v, want %v", kindNames[k], got, w)
		}
	}
}
