package main

// Process-level tests: the binary is built once (TestMain) and run as real processes on real
// loopback sockets — `serve` over the memory store and over a private redis-server, and
// `serve --model openai` against `simulate-realtime` — and driven only through its stdout, its
// HTTP routes, its WebSocket protocol and signals (SPEC 18).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/broker/wiretest"
	"github.com/backchannel-io/backchannel/internal/redistest"
)

// binPath is the backchannel binary TestMain built.
var binPath string

// TestMain builds the binary once for every process test (with -race when the tests run with
// -race, so that the processes are checked too).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "backchannel-process-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "process tests:", err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "backchannel")
	args := []string{"build", "-o", binPath}
	if raceEnabled() {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "process tests: go %s: %v\n%s", strings.Join(args, " "), err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// startTimeout bounds how long a process may take to print its start-up line; exitTimeout how
// long it may take to exit after a signal (SPEC 18: a graceful shutdown).
const (
	startTimeout = 20 * time.Second
	exitTimeout  = 10 * time.Second
)

// proc is one running backchannel process.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd

	mu     sync.Mutex
	stdout []string      // every line printed, in order
	notify chan struct{} // closed and replaced on each new line and at EOF
	eof    bool
	stderr bytes.Buffer

	exited  chan struct{} // closed once Wait returned
	waitErr error
}

// lockedWriter serializes writes into a buffer that is read under the same mutex.
type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// startProc runs the binary with args, in an environment without BACKCHANNEL_* variables (so
// only the flags configure it). It is killed when the test ends if it still runs.
func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, name, nil, args...)
}

// startProcEnv is startProc with the BACKCHANNEL_* variables of env ("NAME=VALUE") set.
func startProcEnv(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	return startBinary(t, name, binPath, env, args...)
}

// startBinary runs the program at path like startProcEnv runs the backchannel binary.
func startBinary(t *testing.T, name, path string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, notify: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BACKCHANNEL_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: start %s: %v", name, path, err)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.stdout = append(p.stdout, sc.Text())
			close(p.notify)
			p.notify = make(chan struct{})
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, out)
		p.mu.Lock()
		p.eof = true
		close(p.notify)
		p.notify = make(chan struct{})
		p.mu.Unlock()
	}()
	go func() {
		<-readDone // Wait closes the pipe: read everything first
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s stdout:\n%s\n%s stderr:\n%s", name, strings.Join(p.lines(), "\n"), name, p.stderrText())
		}
	})
	return p
}

func (p *proc) lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.stdout...)
}

func (p *proc) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// waitLine waits for a stdout line re matches and returns its submatches.
func (p *proc) waitLine(re *regexp.Regexp) []string {
	p.t.Helper()
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		for _, l := range p.stdout {
			if m := re.FindStringSubmatch(l); m != nil {
				p.mu.Unlock()
				return m
			}
		}
		ch, eof := p.notify, p.eof
		p.mu.Unlock()
		if eof {
			<-p.exited
			p.t.Fatalf("%s exited (%v) without printing a line matching %s", p.name, p.waitErr, re)
		}
		select {
		case <-ch:
		case <-deadline.C:
			p.t.Fatalf("%s printed no line matching %s within %v", p.name, re, startTimeout)
		}
	}
}

// signal sends sig to the process.
func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
}

// expectExit0 waits for the process to exit (at most exitTimeout) and fails unless it exited 0.
func (p *proc) expectExit0() {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(exitTimeout):
		p.t.Fatalf("%s still runs %v after the signal", p.name, exitTimeout)
	}
	if p.waitErr != nil {
		p.t.Fatalf("%s: %v, want exit status 0; stderr:\n%s", p.name, p.waitErr, p.stderrText())
	}
}

// expectExitFailure waits for the process to exit by itself (at most startTimeout), fails
// unless its status is non-zero, and returns what it wrote to stderr.
func (p *proc) expectExitFailure() string {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(startTimeout):
		p.t.Fatalf("%s still runs after %v, want it to refuse to start", p.name, startTimeout)
	}
	if p.waitErr == nil {
		p.t.Fatalf("%s exited 0, want a non-zero status", p.name)
	}
	return p.stderrText()
}

var listeningLine = regexp.MustCompile(`^backchannel listening on http://127\.0\.0\.1:(\d+)$`)

// startServeProc runs `backchannel serve --addr 127.0.0.1:0 ARGS...`, waits for its start-up line
// and returns the process and its base URL http://127.0.0.1:PORT.
func startServeProc(t *testing.T, name string, args ...string) (*proc, string) {
	t.Helper()
	p := startProc(t, name, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	m := p.waitLine(listeningLine)
	if m[1] == "0" {
		t.Fatalf("%s: the start-up line shows port 0, not the real port", name)
	}
	return p, "http://127.0.0.1:" + m[1]
}

// expectOneListeningLine checks, once the process has exited, that it printed exactly one
// start-up line (SPEC 18), and that it logged no error.
func (p *proc) expectOneListeningLine() {
	p.t.Helper()
	var got []string
	for _, l := range p.lines() {
		if strings.Contains(l, "listening on") {
			got = append(got, l)
		}
	}
	if len(got) != 1 || !listeningLine.MatchString(got[0]) {
		p.t.Errorf("%s printed %d start-up lines %q, want exactly one `backchannel listening on http://127.0.0.1:PORT`", p.name, len(got), got)
	}
	if strings.Contains(p.stderrText(), "level=ERROR") {
		p.t.Errorf("%s logged errors:\n%s", p.name, p.stderrText())
	}
}

func wsURL(base string) string { return "ws" + strings.TrimPrefix(base, "http") + "/v1/ws" }

// lookupTool is an instant tool the hosts declare.
var lookupTool = map[string]any{
	"name":        "lookup",
	"description": "Looks something up.",
	"parameters": map[string]any{
		"type":       "object",
		"properties": map[string]any{"q": map[string]any{"type": "string"}},
		"required":   []any{"q"},
	},
}

// helloHost attaches a host that creates a session with the dev tenant's key and declares
// lookup; it returns the connection (its Welcome set).
func helloHost(t *testing.T, base string) *wiretest.Conn {
	t.Helper()
	host := wiretest.Dial(t, wsURL(base), "host")
	w := host.Hello(map[string]any{"role": "host", "api_key": "dev", "tools": []any{lookupTool}})
	if w.Type != "welcome" || w.Str("session_id") == "" || w.Str("join_token") == "" || w.Str("resume_token") == "" {
		t.Fatalf("host hello: got %s, want a welcome with session_id, join_token and resume_token", w)
	}
	if d := host.Expect("tools.declared"); d.Compact("names") != `["lookup"]` {
		t.Fatalf("host: tools.declared %s, want names [\"lookup\"]", d)
	}
	return host
}

// noFrame fails the test if the connection ever received a frame of type typ.
func noFrame(t *testing.T, c *wiretest.Conn, typ string) {
	t.Helper()
	for _, f := range c.History() {
		if f.Type == typ {
			t.Errorf("%s received %s", c.Name, f)
		}
	}
}

// TestProcessServeMemorySIGTERM: with the memory store, serve prints one start-up line with the
// real port and answers /healthz; SIGTERM ends every session (session.ended reason ended as
// the last frame, then close 1000) and the process exits 0.
func TestProcessServeMemorySIGTERM(t *testing.T) {
	t.Parallel()
	p, base := startServeProc(t, "serve")

	status, _, body := wiretest.HTTPDo(t, "GET", base+"/healthz", "", "", "")
	var health map[string]any
	if status != http.StatusOK || json.Unmarshal(body, &health) != nil || health["status"] != "ok" {
		t.Fatalf("GET /healthz: %d %q, want 200 {\"status\":\"ok\"}", status, body)
	}

	host := helloHost(t, base)
	p.signal(syscall.SIGTERM)
	host.Expect(wiretest.TypeWith("session.ended", "reason", "ended"))
	host.ExpectClosed(websocket.StatusNormalClosure)
	if h := host.History(); h[len(h)-1].Type != "session.ended" {
		t.Errorf("host: the last frame is %s, want session.ended", h[len(h)-1])
	}
	p.expectExit0()
	p.expectOneListeningLine()
}

// TestProcessServeRedisSIGTERM: with the Redis store, SIGTERM closes every connection with 1012
// and sends no session.ended (nor tool_cancel); the process exits 0. The session lives on: the
// host resumes it on another serve process on the same Redis (SPEC 10, 18), with its frames
// replayed and tool_deferred_resume.
func TestProcessServeRedisSIGTERM(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t, redistest.Options{})
	p, base := startServeProc(t, "serve-redis", "--store", "redis", "--redis-url", rs.URL())
	status, _, body := wiretest.HTTPDo(t, "GET", base+"/healthz", "", "", "")
	if status != http.StatusOK {
		t.Fatalf("GET /healthz: %d %q", status, body)
	}

	host := helloHost(t, base)
	p.signal(syscall.SIGTERM)
	host.ExpectClosed(websocket.StatusServiceRestart)
	noFrame(t, host, "session.ended")
	noFrame(t, host, "tool_cancel")
	p.expectExit0()
	p.expectOneListeningLine()

	_, other := startServeProc(t, "serve-redis-2", "--store", "redis", "--redis-url", rs.URL())
	again := wiretest.Dial(t, wsURL(other), "host on the other node")
	w := again.Hello(map[string]any{"role": "host", "session_id": host.Welcome.Str("session_id"),
		"resume_token": host.Welcome.Str("resume_token"), "last_seq": 0})
	if w.Type != "welcome" {
		t.Fatalf("SPEC 10: resume on the other serve process: %s", w)
	}
	if d := again.Next(); d.Type != "tools.declared" || d.Int("seq") != 1 {
		t.Errorf("SPEC 10: replay after last_seq 0: %s, want tools.declared at seq 1", d)
	}
	if r := again.Next(); r.Type != "tool_deferred_resume" {
		t.Errorf("SPEC 10: after the replay %s, want tool_deferred_resume", r)
	}
}

// TestProcessServeRedisSIGKILL covers SPEC 15, "killing a node loses no job: its sessions resume
// on another node", with real processes: a serve process on Redis has a session whose host
// deferred a job; it is killed with SIGKILL (nothing parked, connections cut). The host resumes
// on another serve process on the same Redis, which takes the session over once the dead
// process's lease (10 s) has run out: every frame is replayed, then tool_deferred_resume lists
// the job, whose result the host then sends there.
func TestProcessServeRedisSIGKILL(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t, redistest.Options{})
	p, base := startServeProc(t, "serve-redis", "--store", "redis", "--redis-url", rs.URL())
	exportTool := map[string]any{"name": "export", "description": "Exports the data.", "deferred": true,
		"parameters": map[string]any{"type": "object"}}
	host := wiretest.Dial(t, wsURL(base), "host")
	w := host.Hello(map[string]any{"role": "host", "api_key": "dev", "tools": []any{exportTool}})
	if w.Type != "welcome" {
		t.Fatalf("host hello: %s", w)
	}
	host.Expect("tools.declared")
	sid := w.Str("session_id")
	agent := wiretest.Dial(t, wsURL(base), "agent")
	if w := agent.Hello(map[string]any{"role": "agent", "session_id": sid, "join_token": w.Str("join_token")}); w.Type != "welcome" {
		t.Fatalf("agent hello: %s", w)
	}
	agent.Send(map[string]any{"type": "agent.tool_call", "id": "tc-1", "call_id": "a1", "conversation_id": "root",
		"name": "export", "arguments": map[string]any{}})
	call := host.Expect("tool_call")
	host.Send(map[string]any{"type": "tool_deferred", "id": "d-1", "call_id": call.Str("call_id"), "handle": "h-kill-1",
		"status_label": "exporting"})
	if ack := host.Expect("tool_deferred_ack"); !ack.Bool("accepted") {
		t.Fatalf("the defer: %s", ack)
	}
	seen := host.LastSeq()

	p.signal(syscall.SIGKILL)
	<-p.exited
	_, other := startServeProc(t, "serve-redis-2", "--store", "redis", "--redis-url", rs.URL())
	deadline := time.Now().Add(30 * time.Second)
	var again *wiretest.Conn
	for again == nil {
		c := wiretest.Dial(t, wsURL(other), "host on the other node")
		c.SendHello(map[string]any{"role": "host", "session_id": sid, "resume_token": host.Welcome.Str("resume_token"), "last_seq": 0})
		f, err := c.Wait(15*time.Second, func(f wiretest.Frame) bool { return f.Type == "welcome" || f.Type == "error" })
		switch {
		case err == nil && f.Type == "welcome":
			again = c
			continue
		case err == nil && !f.Bool("retryable"):
			t.Fatalf("SPEC 15: a resume on the other serve process answered %s, want a welcome or a retryable error", f)
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("SPEC 15: the killed process's session was not taken over within 30 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i, want := range []string{"tools.declared", "tool_call", "tool_deferred_ack"} {
		if f := again.Next(); f.Type != want || f.Int("seq") != int64(i+1) {
			t.Fatalf("SPEC 10: replay after last_seq 0, frame %d: %s, want %s", i+1, f, want)
		}
	}
	r := again.Next()
	if r.Type != "tool_deferred_resume" || r.Int("seq") != seen+1 || r.Compact("jobs") == "[]" {
		t.Fatalf("SPEC 10: after the replay %s, want tool_deferred_resume with the job", r)
	}
	again.Send(map[string]any{"type": "tool_result", "id": "r-1", "handle": "h-kill-1", "output": map[string]any{"rows": 3}})
	deadline = time.Now().Add(10 * time.Second)
	for {
		status, _, body := wiretest.HTTPDo(t, "GET", other+"/v1/sessions/"+sid+"/timeline", "dev", "", "")
		if status == http.StatusOK && strings.Contains(string(body), `"kind":"result"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no result on the timeline of the other serve process: %d %s", status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestProcessServeOpenAISimulator runs `simulate-realtime` and `serve --model openai` against
// it as two processes: a caller's text turns reach the simulated model through the adapter,
// which speaks (an agent transcript) and calls the host's tool, whose result it then voices.
func TestProcessServeOpenAISimulator(t *testing.T) {
	t.Parallel()
	sim := startProc(t, "simulate-realtime", "simulate-realtime", "--addr", "127.0.0.1:0", "--key", "test")
	m := sim.waitLine(regexp.MustCompile(`^realtime simulator listening on (ws://127\.0\.0\.1:(\d+)/v1/realtime)$`))
	if m[2] == "0" {
		t.Fatalf("simulate-realtime shows port 0: %s", m[0])
	}
	p, base := startServeProc(t, "serve-openai", "--model", "openai", "--openai-url", m[1], "--openai-key", "test")

	host := helloHost(t, base)
	caller := wiretest.Dial(t, wsURL(base), "caller")
	if w := caller.Hello(map[string]any{"role": "caller", "session_id": host.Welcome.Str("session_id"),
		"join_token": host.Welcome.Str("join_token")}); w.Type != "welcome" || w.Str("session_id") != host.Welcome.Str("session_id") {
		t.Fatalf("caller: welcome %s, want session %s", w, host.Welcome.Str("session_id"))
	}

	agentSays := func(text string) wiretest.Match {
		return func(f wiretest.Frame) bool {
			return f.Type == "transcript" && f.Str("role") == "agent" && f.Bool("final") && f.Str("text") == text
		}
	}
	// The response ids are the Realtime server's (resp_…); the scripted model would name its
	// responses sc_resp_N: the words came through the simulator, not a fallback.
	fromRealtime := func(f wiretest.Frame) {
		t.Helper()
		if id := f.Str("response_id"); !strings.HasPrefix(id, "resp_") {
			t.Errorf("caller: agent transcript %s: response_id %q is not a Realtime response's (resp_…)", f, id)
		}
	}
	caller.Send(map[string]any{"type": "caller.text", "text": "say hello from the simulator"})
	caller.Expect(func(f wiretest.Frame) bool {
		return f.Type == "transcript" && f.Str("role") == "caller" && f.Bool("final") && f.Str("text") == "say hello from the simulator"
	})
	fromRealtime(caller.Expect(agentSays("hello from the simulator")))
	if caller.Audio() == 0 {
		t.Errorf("caller: no agent audio (binary messages) came with the spoken response")
	}

	caller.Send(map[string]any{"type": "caller.text", "text": `call lookup {"q": "weather"}`})
	call := host.Expect("tool_call")
	if call.Str("name") != "lookup" || call.Compact("arguments") != `{"q":"weather"}` || call.Str("session_id") != host.Welcome.Str("session_id") {
		t.Fatalf("host: tool_call %s, want lookup {\"q\":\"weather\"} of the session", call)
	}
	host.Send(map[string]any{"type": "tool_result", "call_id": call.Str("call_id"), "output": map[string]any{"temp": 21}})
	fromRealtime(caller.Expect(agentSays(`lookup returned: {"temp":21}`)))

	p.signal(syscall.SIGTERM)
	host.Expect(wiretest.TypeWith("session.ended", "reason", "ended"))
	host.ExpectClosed(websocket.StatusNormalClosure)
	caller.Expect(wiretest.TypeWith("session.ended", "reason", "ended"))
	caller.ExpectClosed(websocket.StatusNormalClosure)
	p.expectExit0()
	p.expectOneListeningLine()
	sim.signal(syscall.SIGTERM)
	sim.expectExit0()
}

// TestProcessServeAsyncAPI: /asyncapi.json served by the binary is the checked-in
// docs/asyncapi.json; SIGINT shuts the process down like SIGTERM (exit 0).
func TestProcessServeAsyncAPI(t *testing.T) {
	t.Parallel()
	p, base := startServeProc(t, "serve-asyncapi")
	status, hdr, body := wiretest.HTTPDo(t, "GET", base+"/asyncapi.json", "", "", "")
	if status != http.StatusOK {
		t.Fatalf("GET /asyncapi.json: status %d: %.300s", status, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("GET /asyncapi.json: Content-Type %q, want application/json", ct)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "asyncapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var served, checkedIn any
	if err := json.Unmarshal(body, &served); err != nil {
		t.Fatalf("GET /asyncapi.json: not JSON: %v", err)
	}
	if err := json.Unmarshal(doc, &checkedIn); err != nil {
		t.Fatalf("docs/asyncapi.json: not JSON: %v", err)
	}
	if !reflect.DeepEqual(served, checkedIn) {
		t.Errorf("GET /asyncapi.json differs from docs/asyncapi.json: %s", firstDiff("", served, checkedIn))
	}
	p.signal(syscall.SIGINT)
	p.expectExit0()
	p.expectOneListeningLine()
}

// firstDiff names the first JSON path where a (served) and b (checked in) differ.
func firstDiff(path string, a, b any) string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		for k, x := range av {
			y, ok := bv[k]
			if !ok {
				return fmt.Sprintf("%s/%s is served but not checked in", path, k)
			}
			if !reflect.DeepEqual(x, y) {
				return firstDiff(path+"/"+k, x, y)
			}
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				return fmt.Sprintf("%s/%s is checked in but not served", path, k)
			}
		}
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			break
		}
		for i := range av {
			if !reflect.DeepEqual(av[i], bv[i]) {
				return firstDiff(fmt.Sprintf("%s/%d", path, i), av[i], bv[i])
			}
		}
	}
	sa, _ := json.Marshal(a)
	sb, _ := json.Marshal(b)
	return fmt.Sprintf("at %q served %.200s, checked in %.200s", path, sa, sb)
}

// TestProcessServeBadConfiguration: serve refuses a bad configuration — an unknown store, no API
// keys off loopback, an unreachable Redis, a malformed environment variable — before it listens:
// it exits non-zero with a one-line reason and prints no start-up line (SPEC 18).
func TestProcessServeBadConfiguration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown store", nil, []string{"serve", "--store", "etcd"}, `--store "etcd": want memory or redis`},
		{"no keys off loopback", nil, []string{"serve", "--addr", "0.0.0.0:0"}, "refusing to start without API keys"},
		{"no keys from the environment off loopback", []string{"BACKCHANNEL_ADDR=0.0.0.0:0"}, []string{"serve"}, "refusing to start without API keys"},
		{"unreachable redis", nil, []string{"serve", "--addr", "127.0.0.1:0", "--store", "redis", "--redis-url", "redis://127.0.0.1:1/0"}, "is not reachable"},
		{"malformed environment", []string{"BACKCHANNEL_RESUME_WINDOW=forever"}, []string{"serve", "--addr", "127.0.0.1:0"}, "BACKCHANNEL_RESUME_WINDOW"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := startProcEnv(t, "serve", c.env, c.args...)
			stderr := p.expectExitFailure()
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "backchannel serve: ") || !strings.Contains(lines[0], c.want) {
				t.Errorf("stderr %q, want one line `backchannel serve: …%s…`", stderr, c.want)
			}
			for _, l := range p.lines() {
				if strings.Contains(l, "listening on") {
					t.Errorf("printed %q although it refused to start", l)
				}
			}
		})
	}
}

// TestProcessServeEnvironment: with no flags, serve takes its listen address and API keys from
// BACKCHANNEL_ADDR and BACKCHANNEL_API_KEYS (SPEC 18): the given key creates sessions, the
// loopback default key dev does not exist, and no dev key is announced.
func TestProcessServeEnvironment(t *testing.T) {
	t.Parallel()
	p := startProcEnv(t, "serve-env", []string{"BACKCHANNEL_ADDR=127.0.0.1:0", "BACKCHANNEL_API_KEYS=acme=k-acme"}, "serve")
	m := p.waitLine(listeningLine)
	base := "http://127.0.0.1:" + m[1]
	if status, _, body := wiretest.HTTPDo(t, "POST", base+"/v1/sessions", "k-acme", "application/json", "{}"); status != http.StatusCreated {
		t.Errorf("POST /v1/sessions with the key of BACKCHANNEL_API_KEYS: %d %s, want 201", status, body)
	}
	status, _, body := wiretest.HTTPDo(t, "POST", base+"/v1/sessions", "dev", "application/json", "{}")
	var e struct{ Code string }
	if status != http.StatusUnauthorized || json.Unmarshal(body, &e) != nil || e.Code != "unauthorized" {
		t.Errorf("POST /v1/sessions with key dev: %d %s, want 401 unauthorized", status, body)
	}
	p.signal(syscall.SIGTERM)
	p.expectExit0()
	p.expectOneListeningLine()
	for _, l := range p.lines() {
		if strings.Contains(l, "dev") {
			t.Errorf("printed %q with API keys given", l)
		}
	}
}

// TestProcessServeGCPercent: serve runs the collector at --gc-percent, 200 by default, and leaves
// a GOGC of the environment alone when the flag is not given (SPEC 18), as its /metrics shows
// (go_gc_gogc_percent, the runtime's /gc/gogc:percent).
func TestProcessServeGCPercent(t *testing.T) {
	t.Parallel()
	def := "200"
	if v, ok := os.LookupEnv("GOGC"); ok {
		def = v // this test's own environment sets it: serve leaves it alone
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"default", nil, nil, def},
		{"flag", nil, []string{"--gc-percent", "300"}, "300"},
		{"variable", []string{"BACKCHANNEL_GC_PERCENT=250"}, nil, "250"},
		{"GOGC", []string{"GOGC=150"}, nil, "150"},
		{"GOGC and flag", []string{"GOGC=150"}, []string{"--gc-percent", "300"}, "300"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := startProcEnv(t, "serve-gc-"+c.name, c.env, append([]string{"serve", "--addr", "127.0.0.1:0"}, c.args...)...)
			m := p.waitLine(listeningLine)
			status, _, body := wiretest.HTTPDo(t, "GET", "http://127.0.0.1:"+m[1]+"/metrics", "", "", "")
			got := ""
			for _, l := range strings.Split(string(body), "\n") {
				if v, ok := strings.CutPrefix(l, "go_gc_gogc_percent "); ok {
					got = v
				}
			}
			if status != http.StatusOK || got != c.want {
				t.Errorf("env %v, args %v: /metrics %d, go_gc_gogc_percent %q; want %s", c.env, c.args, status, got, c.want)
			}
			p.signal(syscall.SIGTERM)
			p.expectExit0()
		})
	}
}

// TestProcessServeProfiles (SPEC 18 --pprof-addr, --cpuprofile): the profiles are served on
// their own address, not on the broker's, with the block and mutex profiles on; the CPU profile
// is written to its file when serve exits.
func TestProcessServeProfiles(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pprofAddr := ln.Addr().String()
	_ = ln.Close()
	cpu := filepath.Join(t.TempDir(), "cpu.pprof")
	p, base := startServeProc(t, "serve-profiles", "--pprof-addr", pprofAddr, "--cpuprofile", cpu)
	if status, _, body := wiretest.HTTPDo(t, "GET", "http://"+pprofAddr+"/debug/pprof/", "", "", ""); status != http.StatusOK ||
		!strings.Contains(string(body), "block") || !strings.Contains(string(body), "mutex") {
		t.Errorf("--pprof-addr: /debug/pprof/ answered %d:\n%s", status, body)
	}
	// The mutex profile names its sampling period; the block profile, off, has no records (and
	// serve's goroutines have blocked on their selects since it started).
	if _, _, body := wiretest.HTTPDo(t, "GET", "http://"+pprofAddr+"/debug/pprof/mutex?debug=1", "", "", ""); !strings.Contains(string(body), "sampling period=100") {
		t.Errorf("the mutex profile is not on:\n%.300s", body)
	}
	if _, _, body := wiretest.HTTPDo(t, "GET", "http://"+pprofAddr+"/debug/pprof/block?debug=1", "", "", ""); !regexp.MustCompile(`(?m)^\d+ \d+ @`).Match(body) {
		t.Errorf("the block profile is not on:\n%.300s", body)
	}
	if status, _, _ := wiretest.HTTPDo(t, "GET", base+"/debug/pprof/", "", "", ""); status == http.StatusOK {
		t.Errorf("the broker's own address serves the profiles too")
	}
	p.signal(syscall.SIGTERM)
	p.expectExit0()
	data, err := os.ReadFile(cpu)
	if err != nil || len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Errorf("--cpuprofile: %d bytes, err %v; want a gzipped profile", len(data), err)
	}
}
