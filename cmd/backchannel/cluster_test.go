package main

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/backchannel-io/backchannel/broker/wiretest"
	"github.com/backchannel-io/backchannel/internal/redistest"
)

// TestProcessServeRedisCluster runs `serve --store redis` against a real three-node Redis
// Cluster named by a cluster URL (redis://A?addr=B&addr=C): a job goes call → defer → result →
// the agent's wait over WebSocket, and its keys are in the cluster.
func TestProcessServeRedisCluster(t *testing.T) {
	t.Parallel()
	nodes := redistest.StartCluster(t, 3)
	url := "redis://" + nodes[0].Addr + "?addr=" + nodes[1].Addr + "&addr=" + nodes[2].Addr
	_, base := startServeProc(t, "serve-cluster", "--store", "redis", "--redis-url", url)

	host := wiretest.Dial(t, wsURL(base), "host")
	w := host.Hello(map[string]any{"role": "host", "api_key": "dev", "tools": []any{map[string]any{
		"name": "export", "description": "Exports the data.", "parameters": map[string]any{"type": "object"}, "deferred": true}}})
	if w.Type != "welcome" {
		t.Fatalf("host hello: %s", w)
	}
	host.Expect("tools.declared")
	agent := wiretest.Dial(t, wsURL(base), "agent")
	if w := agent.Hello(map[string]any{"role": "agent", "session_id": w.Str("session_id"), "join_token": w.Str("join_token")}); w.Type != "welcome" {
		t.Fatalf("agent hello: %s", w)
	}
	agent.Send(map[string]any{"type": "agent.tool_call", "id": "tc-1", "call_id": "c1", "conversation_id": "root", "name": "export", "arguments": map[string]any{}})
	call := host.Expect("tool_call")
	host.Send(map[string]any{"type": "tool_deferred", "id": "d-1", "call_id": call.Str("call_id"), "handle": "export-1"})
	if ack := host.Expect("tool_deferred_ack"); !ack.Bool("accepted") {
		t.Fatalf("defer on the cluster: %s, want accepted", ack)
	}
	agent.Expect(wiretest.TypeWith("agent.tool_result", "call_id", "c1", "kind", "background_placeholder"))
	host.Send(map[string]any{"type": "tool_result", "id": "r-1", "handle": "export-1", "output": "exported"})
	agent.Send(map[string]any{"type": "agent.tool_call", "id": "tc-2", "call_id": "w1", "conversation_id": "root", "name": "wait", "arguments": map[string]any{"tool_call_id": "c1"}})
	if r := agent.Expect(wiretest.TypeWith("agent.tool_result", "call_id", "w1")); r.Str("kind") != "result" || !strings.HasSuffix(r.Str("content"), "exported") {
		t.Errorf("the agent's wait: %s, want the result exported", r)
	}

	keys := int64(0)
	for _, s := range nodes {
		c := redis.NewClient(&redis.Options{Addr: s.Addr})
		n, err := c.DBSize(context.Background()).Result()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		keys += n
	}
	if keys == 0 {
		t.Error("no keys in the cluster: serve did not use it")
	}
}
