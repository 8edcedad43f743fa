package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/jobs/memstore"
)

// A node in the test's process, driven through Node.Hello and Client.Receive as a transport
// drives it, with connections that record what the broker sends them.

const testKey = "key-t"

func testNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	cfg.APIKeys = map[string]string{testKey: "tenant-t"}
	n := NewNode(cfg, memstore.New(nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = n.Shutdown(sctx, true)
		cancel()
		<-done
	})
	return n
}

// testConn is a connection: a Transport that queues what it is sent.
type testConn struct {
	t      *testing.T
	c      *Client
	frames chan map[string]any
}

func (tc *testConn) Send(frame []byte) {
	var m map[string]any
	if err := json.Unmarshal(frame, &m); err != nil {
		tc.t.Errorf("the broker sent %q: %v", frame, err)
		return
	}
	select {
	case tc.frames <- m:
	default:
		tc.t.Errorf("a test connection's queue is full")
	}
}
func (tc *testConn) SendAudio([]byte)  {}
func (tc *testConn) Close(int, string) {}
func (tc *testConn) Abort()            {}

// connect sends hello (with the fields given) and returns the connection after its welcome.
func connect(t *testing.T, n *Node, hello map[string]any) (*testConn, map[string]any) {
	t.Helper()
	hello["type"], hello["protocol"] = "hello", "backchannel.v1"
	if hello["role"] == nil {
		hello["role"] = "host"
	}
	tc := &testConn{t: t, frames: make(chan map[string]any, 1024)}
	data, _ := json.Marshal(hello)
	tc.c = localHello(n, tc, data)
	w := tc.next()
	if tc.c == nil || w["type"] != "welcome" {
		t.Fatalf("hello answered %v", w)
	}
	return tc, w
}

// hostAndAgentCall starts a session of n with a host declaring tool (nil: export, any
// arguments) and a text agent whose call a1 of it the host has received; it returns the
// session, both connections and the host's tool_call.
func hostAndAgentCall(t *testing.T, n *Node, tool map[string]any) (s *Session, host, agent *testConn, call map[string]any) {
	t.Helper()
	if tool == nil {
		tool = map[string]any{"name": "export", "description": "d", "parameters": map[string]any{"type": "object"}}
	}
	s, err := n.CreateSession("tenant-t", ModelConfig{})
	if err != nil {
		t.Fatal(err)
	}
	host, _ = connect(t, n, map[string]any{"session_id": s.ID(), "join_token": s.JoinToken()})
	host.declare([]map[string]any{tool})
	agent, _ = connect(t, n, map[string]any{"role": "agent", "session_id": s.ID(), "join_token": s.JoinToken()})
	agent.send(map[string]any{"type": "agent.tool_call", "id": "tc1", "call_id": "a1", "conversation_id": "root", "name": tool["name"], "arguments": map[string]any{"n": 1}})
	if call = host.next(); call["type"] != "tool_call" {
		t.Fatalf("the host got %v, want the tool_call", call)
	}
	return s, host, agent, call
}

// localHello is Node.Hello for a session this node holds: the Client it attached (nil after a
// refusal).
func localHello(n *Node, tr Transport, data []byte) *Client {
	c, _ := n.Hello(tr, data).(*Client)
	return c
}

// next is the next frame the connection got.
func (tc *testConn) next() map[string]any {
	tc.t.Helper()
	select {
	case f := <-tc.frames:
		return f
	case <-time.After(10 * time.Second):
		tc.t.Fatal("no frame within 10 s")
		return nil
	}
}

// send hands a frame to the connection's Client as its reader goroutine would.
func (tc *testConn) send(f map[string]any) {
	data, err := json.Marshal(f)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.c.Receive(data)
}

// declare sends tools.declare and returns its answer.
func (tc *testConn) declare(tools []map[string]any) map[string]any {
	tc.t.Helper()
	id := fmt.Sprintf("d%d", time.Now().UnixNano())
	tc.send(map[string]any{"type": "tools.declare", "id": id, "tools": tools})
	f := tc.next()
	if f["ref"] != id {
		tc.t.Fatalf("tools.declare answered %v, want ref %s", f, id)
	}
	return f
}

// bigSchema is a distinct schema of 100 typed properties, about 10 KiB.
func bigSchema(tag string) map[string]any {
	props := map[string]any{}
	for i := range 100 {
		props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string", "description": tag + " property for the test", "maxLength": 40}
	}
	return map[string]any{"type": "object", "properties": props}
}

func tools(prefix string, n int, schema func(i int) map[string]any) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{"name": fmt.Sprintf("%s%d", prefix, i), "description": "d", "parameters": schema(i)}
	}
	return out
}

func wantError(t *testing.T, f map[string]any, code string, words ...string) {
	t.Helper()
	if f["type"] != "error" || f["code"] != code {
		t.Fatalf("answered %v, want error %s", f, code)
	}
	for _, w := range words {
		if !strings.Contains(f["message"].(string), w) {
			t.Errorf("message %q does not name %q", f["message"], w)
		}
	}
}

// TestToolCountBeforeCompiling: a declaration over the session's tool limit (SPEC 4) is refused
// before any of its schemas is compiled — 65 tools in one declaration, in a hello, or too many
// new names next to another connection's.
func TestToolCountBeforeCompiling(t *testing.T) {
	n := testNode(t, Config{})
	schema := func(tag string) func(int) map[string]any {
		return func(i int) map[string]any { return bigSchema(fmt.Sprintf("%s-%d", tag, i)) }
	}

	// 65 tools in the hello that creates the session: welcome, then limit_exceeded.
	before := schemaCompiles.Load()
	tc := &testConn{t: t, frames: make(chan map[string]any, 1024)}
	hello, _ := json.Marshal(map[string]any{"type": "hello", "protocol": "backchannel.v1", "role": "host", "api_key": testKey,
		"id": "h0", "tools": tools("h", 65, schema("hello"))})
	if tc.c = localHello(n, tc, hello); tc.c == nil {
		t.Fatal("hello refused")
	}
	if w := tc.next(); w["type"] != "welcome" {
		t.Fatalf("hello answered %v", w)
	}
	wantError(t, tc.next(), "limit_exceeded", "65 tools")
	if got := schemaCompiles.Load() - before; got != 0 {
		t.Errorf("a hello with 65 tools compiled %d schemas", got)
	}
	sid := tc.c.SessionID()

	// 65 tools in tools.declare.
	over := tools("t", 65, schema("declare"))
	before = schemaCompiles.Load()
	wantError(t, tc.declare(over), "limit_exceeded", "65 tools", "64")
	if got := schemaCompiles.Load() - before; got != 0 {
		t.Errorf("a declaration of 65 tools compiled %d schemas", got)
	}

	// 40 tools here, then 30 new names on another connection: 70 in the session.
	first := tools("a", 40, schema("first"))
	before = schemaCompiles.Load()
	if d := tc.declare(first); d["type"] != "tools.declared" {
		t.Fatalf("40 tools: %v", d)
	}
	if got := schemaCompiles.Load() - before; got != 40 {
		t.Errorf("40 new schemas: %d compilations", got)
	}
	h2, _ := connect(t, n, map[string]any{"session_id": sid, "api_key": testKey})
	second := tools("b", 30, schema("second"))
	before = schemaCompiles.Load()
	wantError(t, h2.declare(second), "limit_exceeded", "70 tools")
	if got := schemaCompiles.Load() - before; got != 0 {
		t.Errorf("a declaration that makes 70 tools in the session compiled %d schemas", got)
	}
	// The same schemas in a hello of a third connection.
	before = schemaCompiles.Load()
	h3 := &testConn{t: t, frames: make(chan map[string]any, 1024)}
	hello, _ = json.Marshal(map[string]any{"type": "hello", "protocol": "backchannel.v1", "role": "host", "api_key": testKey,
		"session_id": sid, "id": "h3", "tools": second})
	if h3.c = localHello(n, h3, hello); h3.c == nil || h3.next()["type"] != "welcome" {
		t.Fatal("hello refused")
	}
	wantError(t, h3.next(), "limit_exceeded", "70 tools")
	if got := schemaCompiles.Load() - before; got != 0 {
		t.Errorf("a hello that makes 70 tools in the session compiled %d schemas", got)
	}

	// 24 new names fit: 64 in all.
	before = schemaCompiles.Load()
	if d := h2.declare(second[:24]); d["type"] != "tools.declared" {
		t.Fatalf("24 more tools: %v", d)
	}
	if got := schemaCompiles.Load() - before; got != 24 {
		t.Errorf("24 new schemas: %d compilations", got)
	}

	// A bad schema among 65 tools: the count comes first, so nothing is compiled either.
	bad := tools("x", 65, schema("bad"))
	bad[0]["parameters"] = map[string]any{"type": 17}
	before = schemaCompiles.Load()
	wantError(t, tc.declare(bad), "limit_exceeded")
	if got := schemaCompiles.Load() - before; got != 0 {
		t.Errorf("65 tools with a bad schema: %d compilations", got)
	}
}

// TestResumeToolsNeedTheToken: a hello that resumes with a token that is not the slot's compiles
// none of its tools (the session answers resume_invalid).
func TestResumeToolsNeedTheToken(t *testing.T) {
	n := testNode(t, Config{})
	tc, w := connect(t, n, map[string]any{"api_key": testKey})
	token := w["resume_token"].(string)
	slotID, _, _ := parseResumeToken(token)
	before := schemaCompiles.Load()
	h := &testConn{t: t, frames: make(chan map[string]any, 16)}
	hello, _ := json.Marshal(map[string]any{"type": "hello", "protocol": "backchannel.v1", "role": "host",
		"session_id": tc.c.SessionID(), "resume_token": slotID + "-" + strings.Repeat("A", 22), "tools": tools("r", 3, func(i int) map[string]any { return bigSchema(fmt.Sprint("resume", i)) })})
	if h.c = localHello(n, h, hello); h.c != nil {
		t.Fatal("a wrong resume token was accepted")
	}
	wantError(t, h.next(), "resume_invalid")
	if got := schemaCompiles.Load() - before; got != 0 {
		t.Errorf("a resume with a wrong token compiled %d schemas", got)
	}
}
