package broker

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/cluster"
)

// TestDurableStateRoundTrip: a session's durable state — what parking and the journal write
// (snapshot) and what a node rebuilds the session from (restore) — survives the trip: encoded,
// decoded and rebuilt, the session's snapshot is byte for byte the one it was made from, with
// its slots, tokens, tools, outboxes, dispatched calls and text agent's state.
func TestDurableStateRoundTrip(t *testing.T) {
	n := testNode(t, Config{BackgroundAfter: 30 * time.Second, ResumeWindow: 30 * time.Second})
	s, host, agent, _ := hostAndAgentCall(t, n, nil)
	agent.send(map[string]any{"type": "agent.tool_call", "id": "tc2", "call_id": "s1", "conversation_id": "root", "name": "status", "arguments": map[string]any{"state": "working", "title": "exporting"}})
	for f := agent.next(); f["call_id"] != "s1"; f = agent.next() { // a reminder prompt may come first
		if f["type"] != "agent.prompt" {
			t.Fatalf("the agent got %v, want the status answer", f)
		}
	}
	host.c.Dropped() // one slot detached, one attached
	now := time.UnixMilli(time.Now().UnixMilli())
	encode := func(st parkedState) []byte {
		t.Helper()
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	got := make(chan []byte, 1)
	s.post(func() { got <- encode(s.snapshot(now, true)) })
	first := <-got
	var st parkedState
	if err := json.Unmarshal(first, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Slots) != 2 || len(st.CallSeq) != 1 || st.Text == nil || len(st.Open) != 1 {
		t.Fatalf("the snapshot lacks what the test made: %s", first)
	}
	again := n.restore(&cluster.ParkedSession{Tenant: s.tenant, SessionID: s.id}, &st)
	if second := encode(again.snapshot(now, true)); !bytes.Equal(first, second) {
		t.Errorf("the rebuilt session's state differs:\n  %s\nvs %s", first, second)
	}
}
