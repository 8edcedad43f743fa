package mcp_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The texts of SPEC 13.
const (
	textCancelRequested = "Tool cancellation requested"
	textCanceled        = "error: Tool call canceled"
	textConsumed        = "error: Tool call result already consumed"
	textBeingWaited     = "error: Tool call result is already being waited for"
	textReminder        = "Reminder: when working on a task use `status` tool to acknowledge it."
	testTitle           = "Testing the MCP facade"
	textStatusWorking   = "Status set to `working`: " + testTitle
)

// placeholder is the background placeholder of call id (SPEC 13).
func placeholder(id string) string {
	return "internal: true\n\nTool call `" + id + "` is running in the background."
}

// completionPrompt is the completion prompt of the background call id (SPEC 13).
func completionPrompt(id string) string {
	return "[internal] Tool call `" + id + "` completed. Its result is queued; use `wait` to consume it."
}

// brokerCallID is the form of a broker call id (SPEC 5).
var brokerCallID = regexp.MustCompile(`^call_[a-z2-7]{20}$`)

// outcome is how a call made in the background of a scenario ended.
type outcome struct {
	r   result
	err error
}

// callAsync runs a call on its own goroutine.
func callAsync(ctx context.Context, a agent, name string, args map[string]any, progress func(note)) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		r, err := a.Call(ctx, name, args, progress)
		ch <- outcome{r, err}
	}()
	return ch
}

// call runs a call that must answer (with any result) within waitLimit.
func call(t *testing.T, a agent, name string, args map[string]any) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	r, err := a.Call(ctx, name, args, nil)
	if err != nil {
		t.Fatalf("tools/call %s %v: %v", name, args, err)
	}
	return r
}

// await returns the outcome of an asynchronous call.
func await(t *testing.T, ch <-chan outcome, what string) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(waitLimit):
		t.Fatalf("%s: no answer within %v", what, waitLimit)
		return outcome{}
	}
}

// expectText checks that a result is one text content, exactly want, with isError.
func expectText(t *testing.T, what string, r result, want string, isError bool) {
	t.Helper()
	got := r.text(t)
	if got != want || r.IsError != isError {
		t.Errorf("%s:\n got (isError %v)\n%s\n---\nwant (isError %v)\n%s\n---", what, r.IsError, got, isError, want)
	}
}

// expectCall checks that a call answers exactly want with isError.
func expectCall(t *testing.T, a agent, name string, args map[string]any, want string, isError bool) {
	t.Helper()
	expectText(t, fmt.Sprintf("%s %v", name, args), call(t, a, name, args), want, isError)
}

// setWorking sets the root conversation's status to working (no status reminder follows).
func setWorking(t *testing.T, a agent) {
	t.Helper()
	expectCall(t, a, "status", map[string]any{"state": "working", "title": testTitle}, textStatusWorking, false)
}

// startBackground makes a call of the deferred tool slow, has the host defer it, checks the
// placeholder and returns the call's broker id (the agent-facing id: SPEC 14).
func startBackground(t *testing.T, a agent, h *host, n int) string {
	t.Helper()
	ch := callAsync(context.Background(), a, "slow", map[string]any{"n": n}, nil)
	tc := h.toolCall("slow")
	id := tc.str("call_id")
	if !brokerCallID.MatchString(id) {
		t.Fatalf("tool_call call_id %q is not a broker call id", id)
	}
	h.deferCall(id, newHandle())
	o := await(t, ch, "the call of slow")
	if o.err != nil {
		t.Fatalf("the call of slow: %v", o.err)
	}
	expectText(t, "the call of slow, deferred by its host", o.r, placeholder(id), false)
	return id
}

// openWait starts `wait {"tool_call_id": id}` with a progress token and returns once the
// broker holds it open: the host sends progress notes until one reaches the wait as
// notifications/progress (a wait that was answered "already being waited for" because an
// earlier waiter was still being removed is made again). It returns the wait's outcome and the
// notes that arrive after the first one.
func openWait(t *testing.T, ctx context.Context, a agent, h *host, id string) (<-chan outcome, <-chan note, note) {
	t.Helper()
	notes := make(chan note, 256)
	start := func() <-chan outcome {
		return callAsync(ctx, a, "wait", map[string]any{"tool_call_id": id}, func(n note) {
			select {
			case notes <- n:
			default:
			}
		})
	}
	ch := start()
	deadline := time.Now().Add(waitLimit)
	for i := 1; ; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("wait for %s: no notifications/progress within %v of the host's progress notes", id, waitLimit)
		}
		h.progress(id, fmt.Sprintf("step %d", i))
		select {
		case n := <-notes:
			if !strings.HasPrefix(n.Message, "step ") || n.Progress <= 0 {
				t.Errorf("first notifications/progress of the wait for %s: %+v, want a message \"step N\" and progress > 0", id, n)
			}
			return ch, notes, n
		case o := <-ch:
			if o.err == nil && len(o.r.Texts) == 1 && o.r.Texts[0] == textBeingWaited {
				ch = start() // the previous waiter is still being removed
				continue
			}
			t.Fatalf("wait for %s answered before its result: %+v %v", id, o.r, o.err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// awaitTools polls tools/list until want(names) holds.
func awaitTools(t *testing.T, a agent, what string, want func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		names, err := a.Tools(ctx)
		cancel()
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		if want(names) {
			return names
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools/list: %s: still %v after %v", what, names, waitLimit)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// has reports whether names lists name.
func has(names []string, name string) bool { return slices.Contains(names, name) }

// pendingPrompts is the pending_prompts header line of prompts, as SPEC 13/14 render it: the
// JSON array of the texts, header-escaped. It is written out here by hand (JSON escapes of
// quotes, backslashes and LF; then the header escape doubles every backslash), independent
// of the broker's rendering code.
func pendingPrompts(prompts ...string) string {
	quoted := make([]string, len(prompts))
	for i, p := range prompts {
		p = strings.ReplaceAll(p, `\`, `\\`)
		p = strings.ReplaceAll(p, `"`, `\"`)
		p = strings.ReplaceAll(p, "\n", `\n`)
		quoted[i] = `"` + p + `"`
	}
	value := "[" + strings.Join(quoted, ",") + "]"
	return "pending_prompts: " + strings.ReplaceAll(value, `\`, `\\`)
}
