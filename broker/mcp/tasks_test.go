package mcp_test

// MCP Tasks (SPEC 14, the 2025-11-25 form) driven by the official TypeScript SDK's client and
// its experimental tasks API.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// tsRequest runs one command of client.mjs that answers with an event of its id.
func tsRequest(t *testing.T, a *tsAgent, cmd map[string]any, progress func(note)) tsEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	ev, err := a.request(ctx, cmd, progress, false)
	if err != nil {
		t.Fatalf("client.mjs %v: %v", cmd, err)
	}
	return ev
}

// tsTaskOf runs a task command that must answer a task.
func tsTaskOf(t *testing.T, a *tsAgent, cmd map[string]any) tsTask {
	t.Helper()
	ev := tsRequest(t, a, cmd, nil)
	if ev.Event != "task" || ev.Task == nil {
		t.Fatalf("client.mjs %v: %+v, want a task", cmd, ev)
	}
	return *ev.Task
}

// awaitTaskStatus polls tasks/get until the task has status (and, when set, message).
func awaitTaskStatus(t *testing.T, a *tsAgent, id, status, message string) tsTask {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		tk := tsTaskOf(t, a, map[string]any{"op": "taskget", "taskId": id})
		if tk.Status == status && (message == "" || tk.StatusMessage == message) {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks/get %s: %+v after %v, want status %s message %q", id, tk, waitLimit, status, message)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTasksTypeScript: a task-augmented tools/call of a host tool is a background call whose
// task id is its broker call id; tasks/get follows the job (working, its progress note as
// statusMessage, completed), tasks/result answers the CallToolResult any number of times and
// consumes it as wait would, tasks/cancel cancels once (tool_cancel agent_request) and refuses a
// terminal task, tasks/list lists the session's tasks, and an interaction of a task is asked
// with elicitation/create, whose answer reaches the host (SPEC 14).
func TestTasksTypeScript(t *testing.T) {
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			e := startEnv(t, store, suiteConfig())
			sid, h := e.sessionWithHost(slowTool, lookupTool)
			ag, _ := mustConnect(t, e, clientKinds[1], brokertest.KeyA, sid)
			a := ag.(*tsAgent)
			setWorking(t, a)

			// A task of the deferred tool: the ttl asked for is clamped to its deferred_timeout
			// (the default, 2 h).
			tk := tsTaskOf(t, a, map[string]any{"op": "taskcall", "name": "slow", "arguments": map[string]any{"n": 1}, "ttl": 999999999})
			tc := h.toolCall("slow")
			id := tc.str("call_id")
			if tk.TaskID != id || tk.Status != "working" || tk.TTL != 7200000 || tk.PollInterval != 1000 || tk.CreatedAt == "" {
				t.Errorf("CreateTaskResult %+v, want task id %s (the broker call id), working, ttl 7200000, pollInterval 1000", tk, id)
			}
			h.deferCall(id, newHandle())
			h.progress(id, "half way")
			awaitTaskStatus(t, a, id, "working", "half way")
			h.result(id, `{"rows":3}`)
			awaitTaskStatus(t, a, id, "completed", "")
			for i := range 2 {
				ev := tsRequest(t, a, map[string]any{"op": "taskresult", "taskId": id}, nil)
				if ev.Event != "result" || ev.Result == nil || len(ev.Result.Content) != 1 || ev.Result.Content[0].Text != `{"rows":3}` || ev.Result.IsError {
					t.Errorf("tasks/result #%d: %+v, want the text {\"rows\":3}", i+1, ev)
				}
			}
			expectCall(t, a, "wait", map[string]any{"tool_call_id": id}, textConsumed, true)

			// A task cancelled: the host hears tool_cancel agent_request; a second cancel is
			// refused (-32602); its tasks/result is the cancelled call's error.
			tk2 := tsTaskOf(t, a, map[string]any{"op": "taskcall", "name": "slow", "arguments": map[string]any{"n": 2}})
			tc2 := h.toolCall("slow")
			if tk2.TaskID != tc2.str("call_id") {
				t.Errorf("second task %s, tool_call %s", tk2.TaskID, tc2.str("call_id"))
			}
			h.deferCall(tk2.TaskID, newHandle())
			if got := tsTaskOf(t, a, map[string]any{"op": "taskcancel", "taskId": tk2.TaskID}); got.Status != "cancelled" {
				t.Errorf("tasks/cancel: %+v, want status cancelled", got)
			}
			cancelFrame := h.expect("tool_cancel")
			if cancelFrame.str("call_id") != tk2.TaskID || cancelFrame.str("reason") != "agent_request" {
				t.Errorf("tool_cancel %s, want call %s reason agent_request", cancelFrame, tk2.TaskID)
			}
			if ev := tsRequest(t, a, map[string]any{"op": "taskcancel", "taskId": tk2.TaskID}, nil); ev.Event != "error" || ev.Code == nil || *ev.Code != -32602 {
				t.Errorf("tasks/cancel of a cancelled task: %+v, want JSON-RPC error -32602", ev)
			}
			h.expectNone("tool_cancel", 200*time.Millisecond)
			if ev := tsRequest(t, a, map[string]any{"op": "taskresult", "taskId": tk2.TaskID}, nil); ev.Event != "result" || ev.Result == nil || !ev.Result.IsError || !strings.HasPrefix(ev.Result.Content[0].Text, textCanceled) {
				t.Errorf("tasks/result of the cancelled task: %+v, want isError and %q", ev, textCanceled)
			}

			// An interaction of a task is asked with elicitation/create (the client declared
			// elicitation) while callToolStream reads tasks/result; the answer goes to the host.
			_ = a.command(map[string]any{"op": "elicitanswer", "answer": "window"})
			statuses := make(chan string, 64)
			streamed := make(chan tsEvent, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
				defer cancel()
				ev, err := a.request(ctx, map[string]any{"op": "taskstream", "name": "slow", "arguments": map[string]any{"n": 3}},
					func(n note) { statuses <- n.Message }, false)
				if err != nil {
					ev = tsEvent{Event: "error", Message: err.Error()}
				}
				streamed <- ev
			}()
			tc3 := h.toolCall("slow")
			id3 := tc3.str("call_id")
			h.deferCall(id3, newHandle())
			h.send(map[string]any{"type": "tool_partial_result", "call_id": id3, "segment": "choose",
				"interaction": map[string]any{"id": "ia-seat", "prompt": "Window or aisle?", "options": []string{"window", "aisle"}}})
			var el tsEvent
			select {
			case el = <-a.elicits:
			case <-time.After(waitLimit):
				t.Fatalf("no elicitation/create for the task's interaction within %v", waitLimit)
			}
			rel, _ := el.Meta["io.modelcontextprotocol/related-task"].(map[string]any)
			if el.Message != "Window or aisle?" || rel["taskId"] != id3 {
				t.Errorf("elicitation/create: message %q, _meta %v; want the prompt, related to task %s", el.Message, el.Meta, id3)
			}
			ans := h.expect("tool_interaction_answer")
			if ans.str("call_id") != id3 || ans.str("interaction_id") != "ia-seat" || ans.str("option") != "window" {
				t.Errorf("tool_interaction_answer %s, want option window of ia-seat", ans)
			}
			h.result(id3, `"seat 12A"`)
			select {
			case ev := <-streamed:
				// The interaction's prompt was queued for the session too: this first answer
				// delivers it (pending_prompts) with the result.
				want := pendingPrompts("Tool call `"+id3+"` asks (ia-seat): Window or aisle?\nOptions: window, aisle") + "\n\nseat 12A"
				if ev.Event != "result" || ev.Result == nil || len(ev.Result.Content) != 1 || ev.Result.Content[0].Text != want {
					t.Errorf("callToolStream's result: %+v %+v, want %q", ev, ev.Result, want)
				}
			case <-time.After(waitLimit):
				t.Fatal("callToolStream gave no result")
			}
			sawInput := false
			for len(statuses) > 0 {
				if s := <-statuses; s == "taskStatus input_required" {
					sawInput = true
				}
			}
			if !sawInput {
				t.Errorf("callToolStream never saw the task input_required")
			}

			ev := tsRequest(t, a, map[string]any{"op": "tasklist"}, nil)
			var listed []string
			for _, tk := range ev.Tasks {
				listed = append(listed, tk.TaskID+":"+tk.Status)
			}
			if want := []string{id + ":completed", tk2.TaskID + ":cancelled", id3 + ":completed"}; fmt.Sprint(listed) != fmt.Sprint(want) {
				t.Errorf("tasks/list: %v, want %v", listed, want)
			}
			// An unknown task answers -32602.
			if ev := tsRequest(t, a, map[string]any{"op": "taskget", "taskId": "call_aaaaaaaaaaaaaaaaaaaa"}, nil); ev.Event != "error" || ev.Code == nil || *ev.Code != -32602 {
				t.Errorf("tasks/get of an unknown task: %+v, want -32602", ev)
			}
		})
	}
}
