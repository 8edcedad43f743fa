package mcp_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestMCPOnAnotherNode covers SPEC 14 and 15 with two nodes on one Redis: an MCP client talks
// to node B about a session node A holds. Node B passes its requests on to node A — the
// initialize, which binds the MCP session there, and every later request of the MCP session,
// whose id names the Backchannel session — so the client lists the host's tools on A, and
// calls one, through B.
func TestMCPOnAnotherNode(t *testing.T) {
	t.Parallel()
	opts := brokertest.SharedRedis(t)
	opts.Config = suiteConfig()
	a := startEnvOpts(t, opts, nil)
	b := startEnvOpts(t, opts, nil)
	a.b.WaitRelaying(t)
	b.b.WaitRelaying(t)
	sid, h := a.sessionWithHost(lookupTool)
	ag, info := mustConnect(t, b, clientKinds[0], brokertest.KeyA, sid)
	if info.Status != http.StatusOK || (info.Session != "" && info.Session != sid) {
		t.Errorf("initialize through node B: HTTP %d, Backchannel-Session %q; want 200 and %s", info.Status, info.Session, sid)
	}
	if mid := ag.MCPSession(); !strings.HasPrefix(mid, sid+".") {
		t.Errorf("MCP session id %q does not name its Backchannel session %s", mid, sid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	want := []string{"cancel", "lookup", "status", "wait"}
	if names, err := ag.Tools(ctx); err != nil || !slices.Equal(names, want) {
		t.Fatalf("tools/list through node B: %v (%v), want %v", names, err, want)
	}
	setWorking(t, ag)
	ch := callAsync(ctx, ag, "lookup", map[string]any{"q": "x"}, nil)
	tc := h.toolCall("lookup")
	h.result(tc.str("call_id"), `"found"`)
	o := await(t, ch, "lookup through node B")
	if o.err != nil {
		t.Fatalf("lookup through node B: %v", o.err)
	}
	expectText(t, "lookup through node B", o.r, "found", false)
}

// TestTaskSurvivesNodeDeath covers SPEC 14 and 15: a task created on node A, whose node then
// dies, is found on node B — the next MCP client's initialize on B continues the conversation
// that A journaled, tasks/get and tasks/list read the task from the job record, and the host,
// resumed on B, completes it for tasks/result.
func TestTaskSurvivesNodeDeath(t *testing.T) {
	t.Parallel()
	opts := brokertest.SharedRedis(t)
	opts.Config = suiteConfig()
	opts.Config.HoldTTL = time.Second
	opts.Config.ResumeWindow = time.Minute
	a := startEnvOpts(t, opts, nil)
	b := startEnvOpts(t, opts, nil)
	a.b.WaitRelaying(t)
	b.b.WaitRelaying(t)
	sid, h := a.sessionWithHost(slowTool)
	ag, _ := mustConnect(t, a, clientKinds[1], brokertest.KeyA, sid)
	ta := ag.(*tsAgent)
	setWorking(t, ta)
	tk := tsTaskOf(t, ta, map[string]any{"op": "taskcall", "name": "slow", "arguments": map[string]any{"n": 5}})
	id := tk.TaskID
	if tc := h.toolCall("slow"); tc.str("call_id") != id {
		t.Fatalf("tool_call %s, task %s", tc, id)
	}
	h.deferCall(id, newHandle())
	token := h.welcome.str("resume_token")

	// Node A dies: its node stops, the host's connection drops, and so does the MCP client.
	a.b.Node.Halt()
	_ = a.srv.Close()
	h.drop()
	ta.quiet = true
	_ = ta.cmd.Process.Kill()

	deadline := time.Now().Add(waitLimit)
	var tb *tsAgent
	for tb == nil {
		time.Sleep(300 * time.Millisecond)
		if ag, info, err := clientKinds[1].connect(t, b, brokertest.KeyA, sid); err == nil {
			tb = ag.(*tsAgent)
		} else if time.Now().After(deadline) {
			t.Fatalf("initialize on node B after node A died: HTTP %d %v", info.Status, err)
		}
	}
	if got := tsTaskOf(t, tb, map[string]any{"op": "taskget", "taskId": id}); got.Status != "working" || got.TaskID != id {
		t.Errorf("tasks/get on node B: %+v, want task %s working", got, id)
	}
	if ev := tsRequest(t, tb, map[string]any{"op": "tasklist"}, nil); len(ev.Tasks) != 1 || ev.Tasks[0].TaskID != id {
		t.Errorf("tasks/list on node B: %+v, want task %s", ev.Tasks, id)
	}
	time.Sleep(2 * opts.Config.HoldTTL) // the host's hello answers "moving" (retryable) until then
	h2 := b.dialHost(map[string]any{"session_id": sid, "resume_token": token, "last_seq": 0})
	h2.expect("tool_deferred_resume")
	h2.result(id, `"finished on B"`)
	ev := tsRequest(t, tb, map[string]any{"op": "taskresult", "taskId": id}, nil)
	if ev.Event != "result" || ev.Result == nil || len(ev.Result.Content) != 1 || !strings.HasSuffix(ev.Result.Content[0].Text, "finished on B") {
		t.Errorf("tasks/result on node B: %+v", ev)
	}
}
