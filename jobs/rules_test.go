package jobs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestValidHandle(t *testing.T) {
	for _, c := range []struct {
		h    string
		want bool
	}{
		{"report-2026-11", true},
		{"ünïcode ok", true},
		{strings.Repeat("a", 128), true},
		{"", false},
		{strings.Repeat("a", 129), false},
		{strings.Repeat("é", 65), false}, // 130 bytes
		{"line\nbreak", false},
		{"cr\r", false},
		{"tab\t", false},
		{"nul\x00", false},
		{"del\x7f", false},
		{"c1\u0085", false},
		{"bad utf8 \xff", false},
	} {
		if got := ValidHandle(c.h); got != c.want {
			t.Errorf("ValidHandle(%q) = %v, want %v", c.h, got, c.want)
		}
	}
}

func TestIsBrokerCallID(t *testing.T) {
	for _, c := range []struct {
		s    string
		want bool
	}{
		{"call_abcdefghijklmnopqrst", true},
		{"call_234567234567234567ab", true},
		{"call_abcdefghijklmnopqrs", false},   // 19
		{"call_abcdefghijklmnopqrstu", false}, // 21
		{"call_abcdefghijklmnopqrs1", false},  // 1 is not base32
		{"call_abcdefghijklmnopqrs8", false},
		{"call_ABCDEFGHIJKLMNOPQRST", false},
		{"Call_abcdefghijklmnopqrst", false},
		{"callxabcdefghijklmnopqrst", false},
	} {
		if got := IsBrokerCallID(c.s); got != c.want {
			t.Errorf("IsBrokerCallID(%q) = %v, want %v", c.s, got, c.want)
		}
	}
	for range 100 {
		if id := NewCallID(); !IsBrokerCallID(id) {
			t.Fatalf("NewCallID() = %q is not a broker call id", id)
		}
	}
	if id := NewInteractionID(); !strings.HasPrefix(id, "ia_") || len(id) != 19 {
		t.Fatalf("NewInteractionID() = %q", id)
	}
}

// TestDerivedCallID: the same parts name the same broker call id, and parts that differ —
// where they are cut included — name different ones.
func TestDerivedCallID(t *testing.T) {
	a := DerivedCallID("sess_1", "sl1", "root", "a1")
	if !IsBrokerCallID(a) {
		t.Fatalf("DerivedCallID = %q is not a broker call id", a)
	}
	if b := DerivedCallID("sess_1", "sl1", "root", "a1"); b != a {
		t.Errorf("the same parts: %q then %q", a, b)
	}
	seen := map[string][]string{}
	for _, parts := range [][]string{
		{"sess_1", "sl1", "root", "a1"}, {"sess_1", "sl1", "root", "a2"}, {"sess_1", "sl2", "root", "a1"},
		{"sess_2", "sl1", "root", "a1"}, {"sess_1", "sl1", "child", "a1"},
		{"ab", "c"}, {"a", "bc"}, {"a\x00", "b"}, {"a", "\x00b"}, {"abc"}, {"abc", ""},
	} {
		id := DerivedCallID(parts...)
		if other, ok := seen[id]; ok {
			t.Errorf("%q and %q name the same id %s", parts, other, id)
		}
		seen[id] = parts
	}
}

func TestDeadline(t *testing.T) {
	const s = int64(1000) // one second in ms
	perm := 120 * time.Second
	for _, c := range []struct {
		name string
		job  Job
		want int64
	}{
		{"pending: activity + timeout", Job{State: Pending, DispatchedMS: 0, ActivityMS: 30 * s, Tool: Tool{Timeout: 20 * time.Second}}, 50 * s},
		{"pending: default timeout", Job{State: Pending, ActivityMS: 5 * s}, 15 * s},
		{"pending: capped at dispatch + 10 min", Job{State: Pending, DispatchedMS: 0, ActivityMS: 590 * s, Tool: Tool{Timeout: 120 * time.Second}}, 600 * s},
		{"pending: open interaction suspends", Job{State: Pending, DispatchedMS: 7 * s, ActivityMS: 8 * s, Interaction: &Interaction{ID: "x"}}, 607 * s},
		{"deferred: fixed", Job{State: Deferred, DeferredDLMS: 99 * s, ActivityMS: 98 * s, Interaction: &Interaction{ID: "x"}}, 99 * s},
		{"awaiting permission: none before the ask", Job{State: AwaitingPermission}, 0},
		{"awaiting permission: ask end + permission timeout", Job{State: AwaitingPermission, AskEndedMS: 10 * s}, 130 * s},
		{"pending local call: none", Job{State: Pending, Local: true, ActivityMS: 5 * s}, 0},
		{"terminal: none", Job{State: Completed, DeferredDLMS: 5, ActivityMS: 5}, 0},
	} {
		if got := c.job.deadline(perm); got != c.want {
			t.Errorf("%s: deadline %d, want %d", c.name, got, c.want)
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	j := &Job{Arguments: json.RawMessage(`{"a":1}`), Output: json.RawMessage(`[1]`),
		Interaction: &Interaction{ID: "i", Options: []string{"a"}}, Closed: map[string]string{"x": "resolved"}}
	c := j.Clone()
	c.Arguments[1] = 'X'
	c.Output[1] = '9'
	c.Interaction.Options[0] = "changed"
	c.Interaction.ID = "other"
	c.Closed["x"] = "changed"
	if string(j.Arguments) != `{"a":1}` || string(j.Output) != `[1]` || j.Interaction.Options[0] != "a" || j.Interaction.ID != "i" || j.Closed["x"] != "resolved" {
		t.Fatalf("modifying a clone changed the original: %+v", j)
	}
}

func TestTimerHeap(t *testing.T) {
	h := timerHeap{at: make(map[jobKey]*timer)}
	a, b, c := jobKey{"t", "a"}, jobKey{"t", "b"}, jobKey{"t", "c"}
	if !h.set(a, 300) || !h.set(b, 100) || h.set(c, 200) {
		t.Fatal("set did not report the nearest entry correctly")
	}
	h.set(b, 0) // b ended
	h.set(c, 400)
	h.set(a, 300) // unchanged
	if at, ok := h.next(); !ok || at != 300 || h.Len() != 2 {
		t.Fatalf("next %d %v, len %d; want 300 with two entries", at, ok, h.Len())
	}
	h.set(a, 0)
	h.set(c, 0)
	if _, ok := h.next(); ok || len(h.at) != 0 {
		t.Fatal("heap not empty")
	}
}

func TestMatchAnswer(t *testing.T) {
	opts := []string{"window", "aisle"}
	for _, c := range []struct {
		reply   string
		options []string
		want    string
		ok      bool
	}{
		{"aisle", opts, "aisle", true},
		{"AISLE!", opts, "aisle", true},
		{"the aisle one, please", opts, "aisle", true},
		{"window or aisle?", opts, "", false},
		{"I don't know", opts, "", false},
		{"windows", opts, "", false},
		{"", opts, "", false},
		{"New York", []string{"New York", "Boston"}, "New York", true},
		{"fly me to new york.", []string{"New York", "Boston"}, "New York", true},
		{"vegetarian", nil, "", true},
		{"  ", nil, "", false},
		{"...", nil, "", false},
	} {
		got, ok := MatchAnswer(c.reply, c.options)
		if got != c.want || ok != c.ok {
			t.Errorf("MatchAnswer(%q, %v) = %q, %v; want %q, %v", c.reply, c.options, got, ok, c.want, c.ok)
		}
	}
}

// TestTimelineWords checks the strings of the timeline against SPEC 16 (entry kinds and the
// shape of an entry) and SPEC 9 (how an interaction closes), letter for letter.
func TestTimelineWords(t *testing.T) {
	kinds := []string{KindCall, KindDeferred, KindDeferRejected, KindProgress, KindPartial, KindNarration,
		KindInteraction, KindPermission, KindResult, KindCancel, KindNotice, KindToolDeadlineTimeout,
		KindLateResultDropped, KindDuplicateCancel, KindDeliveryFailed, KindInjectRejected, KindDisconnect,
		KindResume, KindSessionEnd}
	spec := "call deferred defer_rejected progress partial narration interaction permission result cancel notice " +
		"tool_deadline_timeout late_result_dropped duplicate_cancel delivery_failed inject_rejected disconnect resume session_end"
	if got := strings.Join(kinds, " "); got != spec {
		t.Fatalf("timeline kinds\n%s\nwant (SPEC 16)\n%s", got, spec)
	}
	closed := []string{InteractionAnswered, InteractionResolved, InteractionCancelled, InteractionSuperseded}
	if got := strings.Join(closed, " "); got != "answered resolved cancelled superseded" {
		t.Fatalf("interaction closings %q", got)
	}
	b, err := json.Marshal(Entry{AtMS: 7, Kind: KindCancel, CallID: "call_x", Handle: "h", Detail: map[string]any{"reason": "timeout"}})
	if err != nil || string(b) != `{"at_ms":7,"kind":"cancel","call_id":"call_x","handle":"h","detail":{"reason":"timeout"}}` {
		t.Fatalf("entry encodes as %s %v", b, err)
	}
	if b, _ := json.Marshal(entry(7, KindNotice, &Job{}, nil)); string(b) != `{"at_ms":7,"kind":"notice","detail":{}}` {
		t.Fatalf("an entry without call and detail encodes as %s: call_id and handle are optional, detail an object", b)
	}
}

// TestRetentionCoversTheLongestDeferredTimeout checks SPEC 6: a burned handle is remembered
// for the retention period (default 7 days), and never less than the longest deferred_timeout.
func TestRetentionCoversTheLongestDeferredTimeout(t *testing.T) {
	for _, c := range []struct{ set, want time.Duration }{
		{0, 7 * 24 * time.Hour},
		{time.Hour, 24 * time.Hour},
		{30 * 24 * time.Hour, 30 * 24 * time.Hour},
	} {
		if got := NewEngine(nil, Options{Retention: c.set}).Retention(); got != c.want {
			t.Errorf("Retention %v: engine keeps %v, want %v", c.set, got, c.want)
		}
	}
}
