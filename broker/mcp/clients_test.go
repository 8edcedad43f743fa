package mcp_test

// This file is the two MCP clients the scenarios run with, behind one interface: the official
// Go SDK's client in process, and the official TypeScript SDK's client in a Node.js process
// (testdata/client.mjs) that the test drives with JSON lines.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/mcp"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// result is a tools/call result as the client got it.
type result struct {
	Texts   []string // the text of each content item ("" for a non-text item)
	Types   []string // the type of each content item
	IsError bool
}

// text is the result's only text content; it fails the test when the result is not exactly one
// text item.
func (r result) text(t *testing.T) string {
	t.Helper()
	if len(r.Types) != 1 || r.Types[0] != "text" {
		t.Fatalf("the result is not one text content: types %v, texts %q", r.Types, r.Texts)
	}
	return r.Texts[0]
}

// note is one notifications/progress a client received for a request.
type note struct {
	Progress float64
	Message  string
}

// agent is an MCP client connected to /mcp: the session's root conversation.
type agent interface {
	// Call runs tools/call. progress, if set, gives the request a progress token and receives
	// its notifications/progress. Cancelling ctx cancels the request the client's way.
	Call(ctx context.Context, name string, args map[string]any, progress func(note)) (result, error)
	// Tools runs tools/list and returns the names, sorted.
	Tools(ctx context.Context) ([]string, error)
	// Close ends the MCP session (DELETE) and releases the client.
	Close()
	// MCPSession is the client's Mcp-Session-Id.
	MCPSession() string
}

// connectInfo is what the client saw of its initialize request.
type connectInfo struct {
	Status  int    // HTTP status of the initialize POST (0 if none was seen)
	Session string // its Backchannel-Session response header
	Body    string // its body when the status is not 200 (Go client only)
}

// clientKind is one of the two clients.
type clientKind struct {
	name string
	// connect runs initialize with key and, when session is not "", Backchannel-Session.
	connect func(t *testing.T, e *env, key, session string) (agent, connectInfo, error)
}

var clientKinds = []clientKind{
	{name: "go", connect: connectGo},
	{name: "ts", connect: connectTS},
}

// each runs fn for each client against a fresh broker over each store, all in parallel.
func each(t *testing.T, cfg broker.Config, fn func(t *testing.T, e *env, k clientKind)) {
	t.Helper()
	for _, k := range clientKinds {
		for _, store := range brokertest.Stores {
			t.Run(k.name+"/"+store, func(t *testing.T) {
				t.Parallel()
				fn(t, startEnv(t, store, cfg), k)
			})
		}
	}
}

// mustConnect connects a client that must succeed.
func mustConnect(t *testing.T, e *env, k clientKind, key, session string) (agent, connectInfo) {
	t.Helper()
	a, info, err := k.connect(t, e, key, session)
	if err != nil {
		t.Fatalf("%s client: initialize with session %q: %v (HTTP %d %s)", k.name, session, err, info.Status, info.Body)
	}
	return a, info
}

// ---- The Go SDK's client ----

// goAgent is github.com/modelcontextprotocol/go-sdk's client over StreamableClientTransport.
type goAgent struct {
	cs    *sdk.ClientSession
	tr    *http.Transport
	seq   atomic.Int64
	mu    sync.Mutex
	notes map[string]func(note) // by progress token
	once  sync.Once
}

// keyTransport adds the API key to every request and Backchannel-Session to every POST without
// Mcp-Session-Id — the initialize (and, with goOptions.discover, the server/discover before it)
// — and records what the last of those answered.
type keyTransport struct {
	base    http.RoundTripper
	key     string
	session string

	mu   sync.Mutex
	info connectInfo
}

func (k *keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	initialize := r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == ""
	if initialize && k.session != "" {
		r.Header.Set(mcp.SessionHeader, k.session)
	}
	resp, err := k.base.RoundTrip(r)
	if initialize && err == nil {
		k.mu.Lock()
		k.info = connectInfo{Status: resp.StatusCode, Session: resp.Header.Get(mcp.SessionHeader)}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			k.info.Body = string(body)
		}
		k.mu.Unlock()
	}
	return resp, err
}

// legacyProtocol is the MCP protocol version the Go client of the scenarios asks for: the
// newest one that starts with initialize.
const legacyProtocol = "2025-11-25"

// goOptions tune the Go client.
type goOptions struct {
	// noStandaloneSSE: the client opens no standalone SSE stream (GET); it gets only what the
	// server sends on the streams of its own requests.
	noStandaloneSSE bool
	// discover: the client connects with its default protocol version, 2026-07-28, which
	// probes the server with server/discover (SEP-2575) before falling back to initialize.
	// The scenarios pin 2025-11-25 (initialize first) instead: see TestGoClientDefaultHandshake.
	discover bool
	// transport, when set, is the client's HTTP transport.
	transport *http.Transport
}

func connectGo(t *testing.T, e *env, key, session string) (agent, connectInfo, error) {
	return connectGoWith(t, e, key, session, goOptions{})
}

func connectGoWith(t *testing.T, e *env, key, session string, opts goOptions) (agent, connectInfo, error) {
	t.Helper()
	a := &goAgent{tr: &http.Transport{}, notes: make(map[string]func(note))}
	if opts.transport != nil {
		a.tr = opts.transport
	}
	kt := &keyTransport{base: a.tr, key: key, session: session}
	client := sdk.NewClient(&sdk.Implementation{Name: "backchannel-mcp-go-test", Version: "1.0.0"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			a.mu.Lock()
			fn := a.notes[fmt.Sprint(req.Params.ProgressToken)]
			a.mu.Unlock()
			if fn != nil {
				fn(note{Progress: req.Params.Progress, Message: req.Params.Message})
			}
		},
	})
	sessionOpts := &sdk.ClientSessionOptions{ProtocolVersion: legacyProtocol}
	if opts.discover {
		sessionOpts = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: e.mcpURL,
		HTTPClient: &http.Client{Transport: kt}, MaxRetries: -1, DisableStandaloneSSE: opts.noStandaloneSSE}, sessionOpts)
	kt.mu.Lock()
	info := kt.info
	kt.mu.Unlock()
	if err != nil {
		a.tr.CloseIdleConnections()
		return nil, info, err
	}
	a.cs = cs
	t.Cleanup(a.Close)
	return a, info, nil
}

func (a *goAgent) Call(ctx context.Context, name string, args map[string]any, progress func(note)) (result, error) {
	if args == nil {
		args = map[string]any{}
	}
	p := &sdk.CallToolParams{Name: name, Arguments: args}
	if progress != nil {
		tok := fmt.Sprintf("go-%d", a.seq.Add(1))
		a.mu.Lock()
		a.notes[tok] = progress
		a.mu.Unlock()
		defer func() {
			a.mu.Lock()
			delete(a.notes, tok)
			a.mu.Unlock()
		}()
		p.SetProgressToken(tok)
	}
	res, err := a.cs.CallTool(ctx, p)
	if err != nil {
		return result{}, err
	}
	var r result
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			r.Types, r.Texts = append(r.Types, "text"), append(r.Texts, c.Text)
		default:
			r.Types, r.Texts = append(r.Types, fmt.Sprintf("%T", c)), append(r.Texts, "")
		}
	}
	r.IsError = res.IsError
	return r, nil
}

func (a *goAgent) Tools(ctx context.Context) ([]string, error) {
	res, err := a.cs.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	return names, nil
}

func (a *goAgent) MCPSession() string { return a.cs.ID() }

func (a *goAgent) Close() {
	a.once.Do(func() {
		_ = a.cs.Close()
		a.tr.CloseIdleConnections()
	})
}

// ---- The TypeScript SDK's client ----

// nodeDir is the Node.js project of the TypeScript client.
const nodeDir = "testdata"

// nodeHint tells how to get Node.js and npm.
const nodeHint = "the MCP facade is tested with the official TypeScript SDK (@modelcontextprotocol/sdk), " +
	"which needs Node.js 20 or later with npm: install them (Debian/Ubuntu: `apt-get install nodejs npm`, " +
	"or a release from https://nodejs.org/) and run the test again"

var nodeSetup struct {
	once sync.Once
	node string
	err  error
}

// ensureNode finds node and npm and installs the locked packages of testdata (npm ci) when
// node_modules does not hold the locked @modelcontextprotocol/sdk yet. It runs once per test
// binary; every TypeScript scenario fails with the same reason when it cannot.
func ensureNode(t *testing.T) string {
	t.Helper()
	nodeSetup.once.Do(func() {
		nodeSetup.node, nodeSetup.err = setupNode()
	})
	if nodeSetup.err != nil {
		t.Fatal(nodeSetup.err)
	}
	return nodeSetup.node
}

func setupNode() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("node not found: %s", nodeHint)
	}
	out, err := exec.Command(node, "-p", "process.versions.node.split('.')[0]").Output()
	if err != nil {
		return "", fmt.Errorf("node -p: %v: %s", err, nodeHint)
	}
	var major int
	if _, err := fmt.Sscan(string(out), &major); err != nil || major < 20 {
		return "", fmt.Errorf("node %s is too old: %s", out, nodeHint)
	}
	want, err := lockedSDKVersion()
	if err != nil {
		return "", fmt.Errorf("%s/package-lock.json: %v", nodeDir, err)
	}
	if have, err := installedSDKVersion(); err == nil && have == want {
		return node, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm not found: %s", nodeHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = nodeDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci in %s: %v\n%s\n(%s)", nodeDir, err, out, nodeHint)
	}
	if have, err := installedSDKVersion(); err != nil || have != want {
		return "", fmt.Errorf("after npm ci, node_modules has @modelcontextprotocol/sdk %q (%v), want %s", have, err, want)
	}
	return node, nil
}

// lockedSDKVersion reads the version of @modelcontextprotocol/sdk package-lock.json pins.
func lockedSDKVersion() (string, error) {
	b, err := os.ReadFile(filepath.Join(nodeDir, "package-lock.json"))
	if err != nil {
		return "", err
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return "", err
	}
	v := lock.Packages["node_modules/@modelcontextprotocol/sdk"].Version
	if v == "" {
		return "", errors.New("no version of @modelcontextprotocol/sdk")
	}
	return v, nil
}

func installedSDKVersion() (string, error) {
	b, err := os.ReadFile(filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	if err != nil {
		return "", err
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return "", err
	}
	return pkg.Version, nil
}

// tsEvent is one JSON line client.mjs prints.
type tsEvent struct {
	Event    string         `json:"event"`
	ID       string         `json:"id"`
	OK       bool           `json:"ok"`
	Status   int            `json:"status"`
	Session  string         `json:"session"`
	MCP      string         `json:"mcp_session"`
	Code     *int           `json:"code"`
	Name     string         `json:"name"`
	Message  string         `json:"message"`
	Progress float64        `json:"progress"`
	Tools    []string       `json:"tools"`
	Kind     string         `json:"kind"`
	Task     *tsTask        `json:"task"`
	Tasks    []tsTask       `json:"tasks"`
	Meta     map[string]any `json:"meta"`
	Schema   map[string]any `json:"schema"`
	Result   *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
}

// tsAgent is the TypeScript SDK's Client over StreamableHTTPClientTransport, in a Node.js
// process: commands go to its stdin, events come from its stdout, one JSON object a line.
type tsAgent struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *syncBuffer
	exited  chan struct{} // the reader saw the end of stdout and the process was waited for
	init    chan tsEvent
	elicits chan tsEvent // the elicitation/create requests the client answered
	mcpID   string
	quiet   bool // do not show stderr on failure

	mu      sync.Mutex
	seq     int
	waiters map[string]chan tsEvent
	notes   map[string]func(note)
	once    sync.Once
}

// tsTask is a task as the TypeScript client got it.
type tsTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

// tsError is an error a request of the TypeScript client ended with.
type tsError struct {
	Code    *int
	Name    string
	Message string
}

func (e *tsError) Error() string {
	if e.Code != nil {
		return fmt.Sprintf("%s (code %d): %s", e.Name, *e.Code, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Name, e.Message)
}

func connectTS(t *testing.T, e *env, key, session string) (agent, connectInfo, error) {
	t.Helper()
	node := ensureNode(t)
	a := &tsAgent{t: t, stderr: &syncBuffer{}, exited: make(chan struct{}), init: make(chan tsEvent, 1), elicits: make(chan tsEvent, 16),
		waiters: make(map[string]chan tsEvent), notes: make(map[string]func(note))}
	a.cmd = exec.Command(node, "client.mjs", e.mcpURL, key, session)
	a.cmd.Dir = nodeDir
	a.cmd.Stderr = a.stderr
	stdin, err := a.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	a.stdin = stdin
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("node client.mjs: %v (%s)", err, nodeHint)
	}
	go a.read(stdout)
	t.Cleanup(a.Close)
	select {
	case ev := <-a.init:
		info := connectInfo{Status: ev.Status, Session: ev.Session}
		a.mcpID = ev.MCP
		if !ev.OK {
			a.quiet = true // the error is the answer; its stderr echo is noise
			a.Close()
			return nil, info, &tsError{Code: ev.Code, Name: ev.Name, Message: ev.Message}
		}
		return a, info, nil
	case <-a.exited:
		t.Fatalf("node client.mjs exited before initialize: %s", a.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("node client.mjs: no initialize within 60 s: %s", a.stderr)
	}
	return nil, connectInfo{}, nil
}

// read dispatches the events of the client's stdout.
func (a *tsAgent) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var ev tsEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			fmt.Fprintf(a.stderr, "unparsable line on stdout: %s\n", sc.Bytes())
			continue
		}
		a.mu.Lock()
		switch ev.Event {
		case "init":
			a.init <- ev
		case "progress", "streamed":
			if fn := a.notes[ev.ID]; fn != nil {
				msg := ev.Message
				if ev.Event == "streamed" {
					msg = ev.Kind
					if ev.Task != nil {
						msg += " " + ev.Task.Status
					}
				}
				a.mu.Unlock()
				fn(note{Progress: ev.Progress, Message: msg})
				a.mu.Lock()
			}
		case "elicit":
			select {
			case a.elicits <- ev:
			default:
			}
		default:
			if ch := a.waiters[ev.ID]; ch != nil {
				delete(a.waiters, ev.ID)
				ch <- ev
			}
		}
		a.mu.Unlock()
	}
	_ = a.cmd.Wait()
	close(a.exited)
}

// command sends one command line to the client.
func (a *tsAgent) command(c map[string]any) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = a.stdin.Write(append(b, '\n'))
	return err
}

// request sends a command that answers with an event of the same id, and waits for it; when
// ctx ends first, abort (if set) is sent and the answer still awaited.
func (a *tsAgent) request(ctx context.Context, c map[string]any, progress func(note), abort bool) (tsEvent, error) {
	a.mu.Lock()
	a.seq++
	id := fmt.Sprintf("r%d", a.seq)
	ch := make(chan tsEvent, 1)
	a.waiters[id] = ch
	if progress != nil {
		a.notes[id] = progress
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.waiters, id)
		delete(a.notes, id)
		a.mu.Unlock()
	}()
	c["id"] = id
	if err := a.command(c); err != nil {
		return tsEvent{}, fmt.Errorf("node client.mjs: %v: %s", err, a.stderr)
	}
	done := ctx.Done()
	for {
		select {
		case ev := <-ch:
			return ev, nil
		case <-done:
			done = nil
			if !abort {
				return tsEvent{}, ctx.Err()
			}
			if err := a.command(map[string]any{"op": "abort", "id": id}); err != nil {
				return tsEvent{}, err
			}
		case <-a.exited:
			return tsEvent{}, fmt.Errorf("node client.mjs exited: %s", a.stderr)
		case <-time.After(2 * waitLimit):
			return tsEvent{}, fmt.Errorf("node client.mjs: no answer to %v within %v", c, 2*waitLimit)
		}
	}
}

func (a *tsAgent) Call(ctx context.Context, name string, args map[string]any, progress func(note)) (result, error) {
	if args == nil {
		args = map[string]any{}
	}
	ev, err := a.request(ctx, map[string]any{"op": "call", "name": name, "arguments": args, "progress": progress != nil}, progress, true)
	if err != nil {
		return result{}, err
	}
	if ev.Event == "error" {
		err := &tsError{Code: ev.Code, Name: ev.Name, Message: ev.Message}
		if ctx.Err() != nil {
			return result{}, fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return result{}, err
	}
	if ev.Event != "result" || ev.Result == nil {
		return result{}, fmt.Errorf("node client.mjs: unexpected answer %+v", ev)
	}
	var r result
	for _, c := range ev.Result.Content {
		r.Types, r.Texts = append(r.Types, c.Type), append(r.Texts, c.Text)
	}
	r.IsError = ev.Result.IsError
	return r, nil
}

func (a *tsAgent) Tools(ctx context.Context) ([]string, error) {
	ev, err := a.request(ctx, map[string]any{"op": "list"}, nil, false)
	if err != nil {
		return nil, err
	}
	if ev.Event == "error" {
		return nil, &tsError{Code: ev.Code, Name: ev.Name, Message: ev.Message}
	}
	sort.Strings(ev.Tools)
	return ev.Tools, nil
}

func (a *tsAgent) MCPSession() string { return a.mcpID }

// Close asks the client to end its MCP session (DELETE) and exit, and waits for the process.
func (a *tsAgent) Close() {
	a.once.Do(func() {
		_ = a.command(map[string]any{"op": "close"})
		_ = a.stdin.Close()
		select {
		case <-a.exited:
		case <-time.After(waitLimit):
			_ = a.cmd.Process.Kill()
			<-a.exited
			a.t.Errorf("node client.mjs did not exit within %v after close: %s", waitLimit, a.stderr)
		}
		if a.t.Failed() && !a.quiet {
			if s := a.stderr.String(); s != "" {
				a.t.Logf("node client.mjs stderr:\n%s", s)
			}
		}
	})
}
