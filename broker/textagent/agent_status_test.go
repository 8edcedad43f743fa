package textagent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// SPEC 13 `status`: accepted titles are trimmed of Unicode white space and reported in the body
// "Status set to `STATE`: TITLE".
func TestAgentStatusAccepted(t *testing.T) {
	long := strings.Repeat("é", 80) // 160 bytes
	tests := []struct{ state, title, want string }{
		{"working", "Fix the bug", "Status set to `working`: Fix the bug"},
		{"waiting", "  for the build \t\n", "Status set to `waiting`: for the build"},
		{"blocked", "\u00a0\u2003need a key\u3000", "Status set to `blocked`: need a key"},
		{"done", "ok", "Status set to `done`: ok"},
		{"working", long, "Status set to `working`: " + long},
		{"working", "  " + strings.Repeat("a", 160) + "\n", "Status set to `working`: " + strings.Repeat("a", 160)},
		{"done", "emoji 🚀 and `ticks`", "Status set to `done`: emoji 🚀 and `ticks`"},
	}
	for _, tt := range tests {
		h := newAgRaw(t, Options{})
		args, _ := json.Marshal(map[string]string{"state": tt.state, "title": tt.title})
		h.call(RootConversation, "s", "status", string(args))
		h.expect(agOK("s", tt.want))
	}
}

// Rejected status calls: the four exact errors, never echoing the state or the title.
func TestAgentStatusRejected(t *testing.T) {
	const (
		eState  = "error: status state must be one of working, waiting, blocked, done"
		eEmpty  = "error: status title must not be empty"
		eLong   = "error: status title must be at most 160 UTF-8 bytes"
		eSingle = "error: status title must be a single line without control characters"
	)
	tests := []struct{ args, want string }{
		{`{"state":"sleeping","title":"Zq7 title"}`, eState},
		{`{"state":"Working","title":"Zq7 title"}`, eState},
		{`{"state":" working","title":"Zq7 title"}`, eState},
		{`{"state":"","title":"Zq7 title"}`, eState},
		{`{"state":7,"title":"Zq7 title"}`, eState},
		{`{"title":"Zq7 title"}`, eState},
		{`{}`, eState},
		{`{"state":"working"}`, eEmpty},
		{`{"state":"working","title":""}`, eEmpty},
		{`{"state":"working","title":" \t\n\u2028 "}`, eEmpty},
		{`{"state":"working","title":42}`, eEmpty},
		{`{"state":"working","title":"` + strings.Repeat("Zq7", 54) + `"}`, eLong},
		{`{"state":"working","title":"` + strings.Repeat("é", 80) + `a"}`, eLong},
		{`{"state":"working","title":"Zq7\nsecond"}`, eSingle},
		{`{"state":"working","title":"Zq7\rsecond"}`, eSingle},
		{`{"state":"working","title":"Zq7\tsecond"}`, eSingle},
		{`{"state":"working","title":"Zq7\u0000x"}`, eSingle},
		{`{"state":"working","title":"Zq7\u007fx"}`, eSingle},
		{`{"state":"working","title":"Zq7\u0085x"}`, eSingle},
		{`{"state":"working","title":"Zq7\u2028x"}`, eSingle},
		{`{"state":"working","title":"Zq7\u2029x"}`, eSingle},
	}
	for _, tt := range tests {
		h := newAg(t, Options{})
		child := h.create(RootConversation, "")
		h.skip()
		h.call(child, "s", "status", tt.args)
		fs := h.take()
		if got := agDescribe(fs); len(got) != 1 || got[0] != agErr("s", tt.want) {
			t.Errorf("%s: got %s, want %s", tt.args, agList(got), agErr("s", tt.want))
			continue
		}
		for _, echo := range []string{"Zq7", "sleeping", "Working"} {
			if strings.Contains(agDescribe(fs)[0], echo) {
				t.Errorf("%s: the error echoes %q", tt.args, echo)
			}
		}
		// A rejected status reaches no watching parent.
		if got := h.promptsOf(RootConversation); len(got) != 0 {
			t.Errorf("%s: parent got %q", tt.args, got)
		}
	}
}

// A parent watching a child receives `Watched agent CONVERSATION_ID status: STATE on TITLE`,
// in the same shape for the first report and every update, with the trimmed title; activating
// input for the parent's waits. It goes to the direct parent only.
func TestAgentStatusWatchPrompt(t *testing.T) {
	h := newAg(t, Options{})
	child := h.create(RootConversation, "")
	grand := h.create(child, "")
	updates := []struct{ state, title, shown string }{
		{"working", " step one ", "step one"},
		{"working", "step two", "step two"},
		{"blocked", "need input", "need input"},
		{"done", "finished", "finished"},
	}
	for i, u := range updates {
		args, _ := json.Marshal(map[string]string{"state": u.state, "title": u.title})
		id := "s" + string(rune('a'+i))
		h.call(child, id, "status", string(args))
		h.expect(agOK(id, "Status set to `"+u.state+"`: "+u.shown),
			agP(RootConversation, "Watched agent "+child+" status: "+u.state+" on "+u.shown))
	}
	h.call(grand, "g", "status", `{"state":"working","title":"deep"}`)
	h.expect(agOK("g", "Status set to `working`: deep"), agP(child, "Watched agent "+grand+" status: working on deep"))
	// The root has no watcher.
	h.call(RootConversation, "r", "status", `{"state":"done","title":"x"}`)
	h.expect(agOK("r", "Status set to `done`: x"))
	// A watch prompt queued during the parent's turn waits for its end.
	h.turnStart(RootConversation)
	h.call(child, "s9", "status", `{"state":"waiting","title":"later"}`)
	h.expect(agOK("s9", "Status set to `waiting`: later"))
	h.turnEnd(RootConversation)
	h.expect(agP(RootConversation, "Watched agent "+child+" status: waiting on later"))
}

// SPEC 13 reminder rule.
func TestAgentStatusReminder(t *testing.T) {
	type step struct {
		do       func(h *agHarness, id string)
		reminder bool // the step queues the reminder
	}
	host := func(h *agHarness, id string) { h.call(RootConversation, id, "lookup", `{}`) }
	st := func(state string) func(h *agHarness, id string) {
		return func(h *agHarness, id string) {
			h.call(RootConversation, id, "status", `{"state":"`+state+`","title":"t"}`)
		}
	}
	rejected := func(h *agHarness, id string) {
		h.call(RootConversation, id, "status", `{"state":"working","title":""}`)
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first substantive call only", []step{{host, true}, {host, false}, {host, false}}},
		{"working: never", []step{{st("working"), false}, {host, false}, {host, false}, {st("working"), false}, {host, false}}},
		{"waiting", []step{{st("waiting"), false}, {host, true}, {host, false}}},
		{"blocked", []step{{st("blocked"), false}, {host, true}, {host, false}}},
		{"done", []step{{st("done"), false}, {host, true}, {host, false}}},
		{"re-armed by each accepted status", []step{{host, true}, {st("done"), false}, {host, true}, {st("done"), false}, {host, true}, {host, false}}},
		{"working then done", []step{{st("working"), false}, {host, false}, {st("done"), false}, {host, true}}},
		{"a rejected status does not re-arm", []step{{host, true}, {rejected, false}, {host, false}}},
		{"a rejected status does not change the state", []step{{st("working"), false}, {rejected, false}, {host, false}}},
		{"wait and status are exempt", []step{
			{func(h *agHarness, id string) { h.call(RootConversation, id, "wait", `{}`) }, false},
			{func(h *agHarness, id string) { h.call(RootConversation, id, "wait", `{"tool_call_id":"nope"}`) }, false},
			{func(h *agHarness, id string) { h.call(RootConversation, id, "wait", `{"timeout_minutes":0}`) }, false},
			{rejected, false},
			{host, true},
		}},
		{"cancel is substantive", []step{{func(h *agHarness, id string) {
			h.call(RootConversation, id, "cancel", `{"tool_call_id":"nope"}`)
		}, true}, {host, false}}},
		{"a local call is substantive", []step{{func(h *agHarness, id string) { h.local(RootConversation, id, "sub", `{}`) }, true}}},
		{"a refused call is substantive", []step{{func(h *agHarness, id string) {
			h.startErr["gone"] = "Tool gone is not available"
			h.call(RootConversation, id, "gone", `{}`)
		}, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newAgRaw(t, Options{})
			for i, s := range tt.steps {
				s.do(h, "k"+string(rune('a'+i)))
				n := 0
				for _, f := range h.take() {
					if agMatch([]string{agDescribeOne(f)}, []string{agP(RootConversation, specReminder)}) {
						n++
					}
				}
				want := 0
				if s.reminder {
					want = 1
				}
				if n != want {
					t.Errorf("step %d: %d reminders, want %d", i+1, n, want)
				}
			}
		})
	}
}

// The reminder is queued for the calling conversation and delivered by the usual rules.
func TestAgentStatusReminderQueuedLikeAPrompt(t *testing.T) {
	h := newAgRaw(t, Options{})
	h.call(RootConversation, "s", "status", `{"state":"working","title":"t"}`)
	child := h.create(RootConversation, "")
	h.skip()
	h.turnStart(child)
	h.call(child, "k1", "lookup", `{}`)
	h.expectNone()
	h.turnEnd(child)
	h.expect(agP(child, specReminder))
	if got := h.promptsOf(RootConversation); len(got) != 0 {
		t.Errorf("root got %q", got)
	}
}

// Watch notices never trigger the reminder: a parent that never set a status gets only the
// watch prompts; its own first substantive call then queues one reminder.
func TestAgentStatusWatchNoticesDoNotRemind(t *testing.T) {
	h := newAgRaw(t, Options{})
	child := h.create(RootConversation, "")
	h.call(child, "s1", "status", `{"state":"working","title":"a"}`)
	h.call(child, "s2", "status", `{"state":"done","title":"b"}`)
	h.final(child, "bye")
	h.expect(agOK("s1", "Status set to `working`: a"), agP(RootConversation, "Watched agent "+child+" status: working on a"),
		agOK("s2", "Status set to `done`: b"), agP(RootConversation, "Watched agent "+child+" status: done on b"),
		agP(RootConversation, "Watched agent "+child+" final response:\nbye"))
	h.call(RootConversation, "c1", "lookup", `{}`)
	h.expect(agP(RootConversation, specReminder))
	h.advance(2 * time.Second)
	h.expect(agPH("c1"))
}
