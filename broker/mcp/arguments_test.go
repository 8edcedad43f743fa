package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// rpcAnswer is the one JSON-RPC message of a POST's answer, application/json or SSE.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// parseAnswer reads the JSON-RPC answer of a POST from its body.
func parseAnswer(t *testing.T, resp *http.Response, body string) rpcAnswer {
	t.Helper()
	data := body
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data = ""
		for _, line := range strings.Split(body, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"id"`) {
				data = d
			}
		}
	}
	var a rpcAnswer
	if err := json.Unmarshal([]byte(data), &a); err != nil {
		t.Fatalf("the answer is not a JSON-RPC message (%v): HTTP %d %q", err, resp.StatusCode, body)
	}
	return a
}

// nest is JSON nested levels deep: objects and arrays in turn, the innermost holding "x".
func nest(levels int) string {
	var open, closing strings.Builder
	for i := range levels {
		if i%2 == 0 {
			open.WriteString(`{"k":`)
		} else {
			open.WriteString("[")
		}
	}
	for i := levels - 1; i >= 0; i-- {
		if i%2 == 0 {
			closing.WriteString("}")
		} else {
			closing.WriteString("]")
		}
	}
	return open.String() + `"x"` + closing.String()
}

// TestCallArgumentsRefused: the arguments of a tools/call become the arguments of the host's
// tool_call as they are, so they are held to the rules of SPEC 2 for frames: arguments that
// are not valid UTF-8 (raw bytes in a JSON-RPC body the SDK decodes) or that would nest the
// tool_call deeper than 64 levels are answered with JSON-RPC error -32602 (SPEC 14) and reach
// no host; the MCP session and the Backchannel session go on, and a valid call after them is
// dispatched. JSON escapes (a lone surrogate \ud800 included) and 63 levels of arguments — 64
// in the tool_call — are passed on.
func TestCallArgumentsRefused(t *testing.T) {
	eachStore(t, suiteConfig(), func(t *testing.T, e *env) {
		sid, h := e.sessionWithHost(lookupTool)
		a, _ := mustConnect(t, e, clientKinds[0], brokertest.KeyA, sid)
		setWorking(t, a)
		headers := map[string]string{"Mcp-Session-Id": a.MCPSession(), "Mcp-Protocol-Version": legacyProtocol,
			"Authorization": "Bearer " + brokertest.KeyA}
		callBody := func(id int, args string) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"lookup","arguments":%s}}`, id, args)
		}
		for i, c := range []struct {
			what, args, want string
		}{
			{"a byte FF in a string", "{\"q\":\"a\xffb\"}", "field arguments is not valid UTF-8"},
			{"the surrogate bytes ED A0 80", "{\"q\":\"\xed\xa0\x80\"}", "field arguments is not valid UTF-8"},
			{"an overlong slash C0 AF", "{\"q\":\"\xc0\xaf\"}", "field arguments is not valid UTF-8"},
			{"an invalid byte in a key", "{\"q\xfe\":\"x\"}", "field arguments is not valid UTF-8"},
			{"an invalid byte deep down", "{\"q\":\"ok\",\"r\":[{\"s\":[\"ok\",\"\xf4\x90\x80\x80\"]}]}", "field arguments is not valid UTF-8"},
			{"64 levels (65 in the tool_call)", nest(64), "field arguments nests JSON deeper than 63 levels"},
			{"900 levels (within the SDK's limit of 1,000)", strings.Repeat("[", 900) + strings.Repeat("]", 900), "field arguments nests JSON deeper than 63 levels"},
		} {
			id := 100 + i
			resp, body := mcpPost(t, e, headers, callBody(id, c.args))
			if !utf8.ValidString(body) {
				t.Errorf("%s: the answer is not valid UTF-8: %q", c.what, body)
			}
			ans := parseAnswer(t, resp, body)
			if string(ans.ID) != fmt.Sprint(id) || ans.Error == nil || ans.Error.Code != -32602 ||
				!strings.Contains(ans.Error.Message, c.want) || ans.Result != nil {
				t.Errorf("tools/call with %s: HTTP %d %.400s, want JSON-RPC error -32602 naming %q for id %d", c.what, resp.StatusCode, body, c.want, id)
			}
		}
		// None of them reached the host.
		h.expectNone("tool_call", 300*time.Millisecond)

		// The sessions go on: a valid call is dispatched and answered.
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		ch := callAsync(ctx, a, "lookup", map[string]any{"q": "after"}, nil)
		tc := h.toolCall("lookup")
		if q, _ := tc["arguments"].(map[string]any)["q"].(string); q != "after" {
			t.Errorf("the tool_call after the refused ones: %s", tc)
		}
		h.result(tc.str("call_id"), `"found after"`)
		if o := await(t, ch, "lookup after the refused calls"); o.err != nil {
			t.Fatal(o.err)
		} else {
			expectText(t, "lookup after the refused calls", o.r, "found after", false)
		}

		// Escapes and the deepest arguments allowed are passed on.
		for i, c := range []struct{ what, args string }{
			{"a lone surrogate escape", `{"q":"\ud800"}`},
			{"63 levels (64 in the tool_call)", nest(63)},
		} {
			type answer struct {
				resp *http.Response
				body string
			}
			done := make(chan answer, 1)
			go func() {
				// Not mcpPost: no t.Fatal off the test's goroutine.
				req, _ := http.NewRequest(http.MethodPost, e.mcpURL, strings.NewReader(callBody(200+i, c.args)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				for k, v := range headers {
					req.Header.Set(k, v)
				}
				resp, err := noKeepAlive.Do(req)
				if err != nil {
					done <- answer{body: err.Error()}
					return
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				done <- answer{resp, string(raw)}
			}()
			tc := h.toolCall("lookup")
			h.result(tc.str("call_id"), `"ok"`)
			select {
			case an := <-done:
				if an.resp == nil {
					t.Fatalf("tools/call with %s: %s", c.what, an.body)
				}
				if ans := parseAnswer(t, an.resp, an.body); ans.Error != nil || ans.Result == nil {
					t.Errorf("tools/call with %s: %+v, want a result", c.what, ans)
				}
			case <-time.After(waitLimit):
				t.Fatalf("tools/call with %s: no answer", c.what)
			}
		}
	})
}
