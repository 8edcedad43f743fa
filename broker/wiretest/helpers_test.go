package wiretest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// TestMain checks that the package's tests leak no goroutine. Its tests mostly wait on the
// broker's clocks and the network, so unless -test.parallel is given they run 8 at a time rather
// than GOMAXPROCS at a time.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "8")
	}
	goleak.VerifyTestMain(m)
}

// eachStore runs fn against a fresh broker over every store, the stores in parallel.
func eachStore(t *testing.T, cfg broker.Config, fn func(t *testing.T, b *brokertest.Broker)) {
	t.Helper()
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			b := brokertest.Start(t, brokertest.Options{Store: store, Config: cfg})
			fn(t, b)
		})
	}
}

// eachStoreInTurn is eachStore with the stores one after the other (for the heaviest test).
func eachStoreInTurn(t *testing.T, cfg broker.Config, fn func(t *testing.T, b *brokertest.Broker)) {
	t.Helper()
	for _, store := range brokertest.Stores {
		t.Run(store, func(t *testing.T) {
			b := brokertest.Start(t, brokertest.Options{Store: store, Config: cfg})
			fn(t, b)
		})
	}
}

// ids mints ids for client frames, unique in the test binary.
var idCounter atomic.Int64

func nextID(prefix string) string { return fmt.Sprintf("%s%d", prefix, idCounter.Add(1)) }

// ---- HTTP ----

// decodeObject decodes a JSON object body, failing the test otherwise.
func decodeObject(t testing.TB, what string, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		t.Fatalf("%s: body is not a JSON object (%v): %q", what, err, data)
	}
	return m
}

// checkHTTPError checks an HTTP error answer: status, and the body { "code", "message" } of SPEC 3.1
// with code. It returns the message.
func checkHTTPError(t testing.TB, what string, status int, body []byte, wantStatus int, wantCode string) string {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("%s: status %d, want %d (body %q)", what, status, wantStatus, body)
	}
	m := decodeObject(t, what, body)
	if len(m) != 2 || m["code"] != wantCode {
		t.Fatalf("%s: body %s, want exactly {code: %q, message}", what, body, wantCode)
	}
	msg, ok := m["message"].(string)
	if !ok || msg == "" {
		t.Fatalf("%s: body %s has no message", what, body)
	}
	return msg
}

// createSession is POST /v1/sessions with key; it returns the session id and join token.
func createSession(t testing.TB, b *brokertest.Broker, key string) (sid, joinToken string) {
	t.Helper()
	status, _, body := HTTPDo(t, "POST", b.URL+"/v1/sessions", key, "", "")
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/sessions: status %d: %s", status, body)
	}
	m := decodeObject(t, "POST /v1/sessions", body)
	sid, _ = m["session_id"].(string)
	joinToken, _ = m["join_token"].(string)
	if sid == "" || joinToken == "" {
		t.Fatalf("POST /v1/sessions: %s", body)
	}
	return sid, joinToken
}

// Entry is one timeline entry (SPEC 16).
type Entry struct {
	AtMS   int64          `json:"at_ms"`
	Kind   string         `json:"kind"`
	CallID string         `json:"call_id"`
	Handle string         `json:"handle"`
	Detail map[string]any `json:"detail"`
}

func (e Entry) String() string {
	d, _ := json.Marshal(e.Detail)
	return fmt.Sprintf("%d %s call=%s handle=%s %s", e.AtMS, e.Kind, e.CallID, e.Handle, d)
}

// parseEntry decodes one entry and checks its shape: at_ms an integer, kind a string, detail an
// object (never null).
func parseEntry(t testing.TB, raw []byte) Entry {
	t.Helper()
	var shape map[string]json.RawMessage
	if err := json.Unmarshal(raw, &shape); err != nil {
		t.Fatalf("timeline entry %q: %v", raw, err)
	}
	d := bytes.TrimSpace(shape["detail"])
	if len(d) == 0 || d[0] != '{' {
		t.Fatalf("timeline entry %s: detail must be an object", raw)
	}
	var e Entry
	if err := json.Unmarshal(raw, &e); err != nil || e.Kind == "" || e.AtMS <= 0 {
		t.Fatalf("timeline entry %s: want at_ms, kind, detail (%v)", raw, err)
	}
	return e
}

// timeline reads GET /v1/sessions/{id}/timeline with key.
func timeline(t testing.TB, b *brokertest.Broker, sid, key string) []Entry {
	t.Helper()
	status, hdr, body := HTTPDo(t, "GET", b.URL+"/v1/sessions/"+sid+"/timeline", key, "", "")
	if status != http.StatusOK {
		t.Fatalf("timeline of %s: status %d: %s", sid, status, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("timeline: Content-Type %q", ct)
	}
	var doc struct {
		SessionID string            `json:"session_id"`
		Entries   []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("timeline: %v: %s", err, body)
	}
	if doc.SessionID != sid || doc.Entries == nil {
		t.Fatalf("timeline: want {session_id: %q, entries: [...]}, got %.300s", sid, body)
	}
	out := make([]Entry, len(doc.Entries))
	var last int64
	for i, raw := range doc.Entries {
		out[i] = parseEntry(t, raw)
		if out[i].AtMS < last {
			t.Fatalf("timeline: entries not oldest first: %v after at_ms %d", out[i], last)
		}
		last = out[i].AtMS
	}
	return out
}

// waitTimeline polls the timeline until ok accepts it (at most DefaultTimeout).
func waitTimeline(t testing.TB, b *brokertest.Broker, sid, key string, what string, ok func([]Entry) bool) []Entry {
	t.Helper()
	deadline := time.Now().Add(DefaultTimeout)
	for {
		es := timeline(t, b, sid, key)
		if ok(es) {
			return es
		}
		if time.Now().After(deadline) {
			t.Fatalf("timeline of %s: no %s within %v; entries:\n%s", sid, what, DefaultTimeout, dumpEntries(es))
		}
		time.Sleep(30 * time.Millisecond)
	}
}

func dumpEntries(es []Entry) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString("  ")
		b.WriteString(trunc(e.String(), 300))
		b.WriteByte('\n')
	}
	return b.String()
}

// find returns the entries of kind about callID ("" for any).
func find(es []Entry, kind, callID string) []Entry {
	var out []Entry
	for _, e := range es {
		if e.Kind == kind && (callID == "" || e.CallID == callID) {
			out = append(out, e)
		}
	}
	return out
}

// has reports whether an entry of kind about callID exists.
func has(kind, callID string) func([]Entry) bool {
	return func(es []Entry) bool { return len(find(es, kind, callID)) > 0 }
}

// ---- sessions, hosts and agents ----

// decl is a tool declaration: name, a description, parameters {"type":"object"}, and the flags
// given as key, value pairs.
func decl(name string, kv ...any) map[string]any {
	d := map[string]any{"name": name, "description": "test tool " + name, "parameters": map[string]any{"type": "object"}}
	for i := 0; i+1 < len(kv); i += 2 {
		d[kv[i].(string)] = kv[i+1]
	}
	return d
}

// session is one session under test with its text agent.
type session struct {
	t     *testing.T
	b     *brokertest.Broker
	key   string
	sid   string
	jt    string
	agent *Conn
}

// newSession creates a session of key's tenant with POST /v1/sessions and attaches a text agent.
func newSession(t *testing.T, b *brokertest.Broker, key string) *session {
	t.Helper()
	s := &session{t: t, b: b, key: key}
	s.sid, s.jt = createSession(t, b, key)
	s.agent = s.attach("agent", "agent", nil)
	return s
}

// attach connects with the join token in role, declaring tools (none when nil), and checks the
// welcome (and the tools.declared that follows it).
func (s *session) attach(name, role string, tools []map[string]any) *Conn {
	s.t.Helper()
	c := Dial(s.t, s.b.WSURL, name)
	id := nextID("hello-")
	m := map[string]any{"id": id, "role": role, "session_id": s.sid, "join_token": s.jt}
	if tools != nil {
		m["tools"] = tools
	}
	w := c.Hello(m)
	if w.Type != "welcome" || w.Str("session_id") != s.sid || w.Str("ref") != id {
		s.t.Fatalf("%s: hello answered %s, want a welcome with ref %q", name, w, id)
	}
	if tools != nil {
		// SPEC 3.2: answered by tools.declared right after the welcome (the slot's first frame).
		d := c.Next()
		if d.Type != "tools.declared" || d.Int("seq") != 1 || d.Str("ref") != id || len(d.Arr("names")) != len(tools) {
			s.t.Fatalf("%s: tools in hello answered %s, want tools.declared right after the welcome (seq 1) with ref %q and %d names", name, d, id, len(tools))
		}
	}
	return c
}

// host attaches a host connection declaring tools (no tools member when there are none).
func (s *session) host(name string, tools ...map[string]any) *Conn {
	s.t.Helper()
	return s.attach(name, "host", tools)
}

// call makes the agent call tool name (arguments {"n": agentID}) and returns the tool_call h
// receives for it.
func (s *session) call(h *Conn, agentID, name string) Frame {
	s.t.Helper()
	s.agentCall(agentID, name, map[string]any{"n": agentID})
	return h.Expect(callFor(agentID))
}

// agentCall sends an agent.tool_call in the root conversation.
func (s *session) agentCall(agentID, name string, args any) {
	s.t.Helper()
	s.agent.Send(map[string]any{"type": "agent.tool_call", "id": nextID("tc-"), "call_id": agentID,
		"conversation_id": "root", "name": name, "arguments": args})
}

// deferJob makes the agent call tool (see call) and h defer the job under handle with label
// (none when ""), checking that the defer is accepted; it returns the job's call id.
func (s *session) deferJob(h *Conn, agentID, tool, handle, label string) string {
	s.t.Helper()
	id := s.call(h, agentID, tool).Str("call_id")
	wantAck(s.t, deferCall(s.t, h, id, handle, label), true, "")
	return id
}

// callFor matches the tool_call made for the agent call agentID (its arguments carry n).
func callFor(agentID string) Match {
	return func(f Frame) bool { return f.Type == "tool_call" && f.Obj("arguments")["n"] == agentID }
}

// agentResult waits for the agent's final answer to its call id (not a placeholder).
func (s *session) agentResult(agentID string) Frame {
	s.t.Helper()
	return s.agent.Expect(func(f Frame) bool {
		return f.Type == "agent.tool_result" && f.Str("call_id") == agentID && f.Str("kind") != "background_placeholder"
	})
}

// waitResult calls the built-in wait for agentID and returns its answer.
func (s *session) waitResult(agentID string) Frame {
	s.t.Helper()
	wid := nextID("w-")
	s.agentCall(wid, "wait", map[string]any{"tool_call_id": agentID})
	return s.agentResult(wid)
}

// timeline reads the session's timeline with its tenant's key.
func (s *session) timeline() []Entry {
	s.t.Helper()
	return timeline(s.t, s.b, s.sid, s.key)
}

func (s *session) waitTimeline(what string, ok func([]Entry) bool) []Entry {
	s.t.Helper()
	return waitTimeline(s.t, s.b, s.sid, s.key, what, ok)
}

// deferCall sends tool_deferred on h and returns its tool_deferred_ack, checking the members
// every ack carries: ref (SPEC 2), call_id and handle as sent, accepted.
func deferCall(t testing.TB, h *Conn, callID, handle, label string) Frame {
	t.Helper()
	id := nextID("def-")
	m := map[string]any{"type": "tool_deferred", "id": id, "call_id": callID, "handle": handle}
	if label != "" {
		m["status_label"] = label
	}
	h.Send(m)
	ack := h.Expect(func(f Frame) bool { return f.Type == "tool_deferred_ack" || f.Type == "error" })
	if ack.Type != "tool_deferred_ack" {
		t.Fatalf("tool_deferred %q/%q answered %s, want tool_deferred_ack", callID, handle, ack)
	}
	if ack.Str("ref") != id {
		t.Fatalf("tool_deferred_ack %s: ref %q, want %q", ack, ack.Str("ref"), id)
	}
	if ack.Str("call_id") != callID || ack.Str("handle") != handle {
		t.Fatalf("tool_deferred_ack %s: want call_id %q, handle %q", ack, callID, handle)
	}
	if _, ok := ack.M["accepted"].(bool); !ok {
		t.Fatalf("tool_deferred_ack %s: accepted must be present", ack)
	}
	return ack
}

// wantAck checks an ack: accepted with a deadline, or rejected with reason and no deadline.
func wantAck(t testing.TB, ack Frame, accepted bool, reason string) {
	t.Helper()
	if accepted {
		if !ack.Bool("accepted") || ack.Has("reason") || ack.Int("deadline_ms") <= 0 {
			t.Fatalf("ack %s: want accepted with deadline_ms and no reason", ack)
		}
		return
	}
	if ack.Bool("accepted") || ack.Str("reason") != reason || ack.Has("deadline_ms") {
		t.Fatalf("ack %s: want accepted false, reason %q, no deadline_ms", ack, reason)
	}
}

// result sends tool_result with an output (any JSON value, given as raw JSON text) on h.
func result(h *Conn, callID, handle, rawOutput string) string {
	id := nextID("res-")
	target := fmt.Sprintf(`"call_id":%q`, callID)
	if handle != "" {
		target = fmt.Sprintf(`"handle":%q`, handle)
	}
	h.Send(fmt.Sprintf(`{"type":"tool_result","id":%q,%s,"output":%s}`, id, target, rawOutput))
	return id
}

// callIDPattern is the form of a broker call id (SPEC 5).
var callIDPattern = regexp.MustCompile(`^call_[a-z2-7]{20}$`)

// missingCallID is a well-formed broker call id no job has.
const missingCallID = "call_zzzzzzzzzzzzzzzzzzzz"

// sameAnswer reports whether two error frames say the same thing, the identifiers they name
// (given in pairs) replaced by the same placeholder: "exactly as if it did not exist".
func sameAnswer(a, b Frame, aIDs, bIDs []string) string {
	norm := func(f Frame, ids []string) map[string]any {
		out := map[string]any{}
		for k, v := range f.M {
			if k == "seq" {
				continue
			}
			if s, ok := v.(string); ok {
				for _, id := range ids {
					if id != "" {
						s = strings.ReplaceAll(s, id, "ID")
					}
				}
				v = s
			}
			out[k] = v
		}
		return out
	}
	na, nb := norm(a, aIDs), norm(b, bIDs)
	ja, _ := json.Marshal(na)
	jb, _ := json.Marshal(nb)
	if !bytes.Equal(ja, jb) {
		return fmt.Sprintf("%s\n  vs %s", ja, jb)
	}
	return ""
}

var headerLine = regexp.MustCompile(`^[a-z_]+: `)

// bodyOf returns the body of a result content (SPEC 13): what follows the header lines and the
// empty line, or all of it when it has no headers.
func bodyOf(content string) string {
	head, body, ok := strings.Cut(content, "\n\n")
	if !ok {
		return content
	}
	for _, l := range strings.Split(head, "\n") {
		if !headerLine.MatchString(l) {
			return content
		}
	}
	return body
}
