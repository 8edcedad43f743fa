package mcp

// The layer in front of the SDK's Streamable HTTP handler (SPEC 14, "Behaving as MCP clients
// expect"). go-sdk v1.8.0 answers a request whose method it does not know, or that lacks a
// required id or params, with HTTP 400 and a plain-text body ("JSON RPC not handled"), which
// MCP clients take for a broken transport (go-sdk issue #976); it writes nothing on a request's
// stream until the request has news, so a long `wait` meets the client's read timeout; and it
// knows nothing of the task parameter of tools/call. This file checks every POSTed message
// first — answering what the SDK would refuse with a JSON-RPC error, as application/json —,
// moves a tools/call's `task` parameter into its `_meta` where the facade's middleware finds it,
// and opens the event stream of a request that may block at once, with a comment line at least
// every keepAlive.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// methodRule is how a JSON-RPC method is checked: whether it is a notification (no id) and
// whether its params may be absent.
type methodRule struct {
	notification   bool
	paramsOptional bool
}

// sdkMethods are the methods go-sdk v1.8.0's server handles (its serverMethodInfos), with the
// rules its checkRequest applies.
var sdkMethods = map[string]methodRule{
	"completion/complete":              {},
	"server/discover":                  {paramsOptional: true},
	"initialize":                       {},
	"ping":                             {paramsOptional: true},
	"prompts/list":                     {paramsOptional: true},
	"prompts/get":                      {},
	"tools/list":                       {paramsOptional: true},
	"tools/call":                       {},
	"resources/list":                   {paramsOptional: true},
	"resources/templates/list":         {paramsOptional: true},
	"resources/read":                   {},
	"logging/setLevel":                 {},
	"resources/subscribe":              {},
	"subscriptions/listen":             {},
	"resources/unsubscribe":            {},
	"notifications/cancelled":          {notification: true, paramsOptional: true},
	"notifications/initialized":        {notification: true, paramsOptional: true},
	"notifications/roots/list_changed": {notification: true, paramsOptional: true},
	"notifications/progress":           {notification: true},
}

// taskMethods are the methods of MCP Tasks (2025-11-25) the facade adds to a bound MCP session.
var taskMethods = map[string]methodRule{
	methodTasksGet:    {},
	methodTasksList:   {paramsOptional: true},
	methodTasksResult: {},
	methodTasksCancel: {},
}

// The methods of MCP Tasks.
const (
	methodTasksGet    = "tasks/get"
	methodTasksList   = "tasks/list"
	methodTasksResult = "tasks/result"
	methodTasksCancel = "tasks/cancel"
)

// taskMetaKey is where the front layer puts a tools/call's `task` parameter: in its `_meta`,
// which the SDK keeps (it drops params it does not know).
const taskMetaKey = "io.backchannel/task"

// frontOutcome is what the front layer makes of a POST body.
type frontOutcome struct {
	// body is the body to hand to the SDK (a tools/call's task moved into _meta).
	body []byte
	// answer, when set, is the whole response (application/json, HTTP 200), or — for a
	// body of notifications and responses only — nil with accepted set.
	answer   []byte
	accepted bool // answer with 202 and no body: nothing in the POST is answered
	// blocking: the POST holds a request that may wait long (tools/call, tasks/result).
	blocking bool
}

// rpcMessage is one JSON-RPC message as the front layer reads it.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// hasID reports whether the message carries an id (null counts as none).
func (m *rpcMessage) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// front checks a POST body of an MCP session against methods (the SDK's and, when tasks is
// set, those of MCP Tasks).
func front(body []byte, tasks bool) frontOutcome {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(trimmed, &batch); err != nil || len(batch) == 0 {
			return frontOutcome{answer: rpcError(nil, jsonrpc.CodeInvalidRequest, "invalid request: the body is not a JSON-RPC message or a batch of them")}
		}
		for _, raw := range batch {
			if o := front(raw, tasks); o.answer != nil {
				return frontOutcome{answer: rpcError(nil, jsonrpc.CodeInvalidRequest, "invalid request: a message of the batch is not valid")}
			}
		}
		return frontOutcome{body: body, blocking: bytes.Contains(body, []byte(`"tools/call"`)) || bytes.Contains(body, []byte(`"tasks/result"`))}
	}
	var m rpcMessage
	if json.Unmarshal(trimmed, &m) != nil {
		return frontOutcome{answer: rpcError(nil, jsonrpc.CodeInvalidRequest, "invalid request: the body is not a JSON-RPC message")}
	}
	if m.JSONRPC != "2.0" {
		return frontOutcome{answer: rpcError(idOrNull(m), jsonrpc.CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)}
	}
	if m.Method == nil {
		if m.hasID() && (m.Result != nil || m.Error != nil) {
			return frontOutcome{body: body} // a response to a request of the server's
		}
		return frontOutcome{answer: rpcError(idOrNull(m), jsonrpc.CodeInvalidRequest, `invalid request: no "method"`)}
	}
	method := *m.Method
	rule, known := sdkMethods[method]
	if !known && tasks {
		rule, known = taskMethods[method]
	}
	if !m.hasID() {
		if !known || !rule.notification {
			// A notification the server does not handle is ignored (JSON-RPC answers no
			// notification); the SDK would answer 400.
			return frontOutcome{accepted: true}
		}
		return frontOutcome{body: body}
	}
	switch {
	case !known:
		return frontOutcome{answer: rpcError(m.ID, jsonrpc.CodeMethodNotFound, fmt.Sprintf("method not found: %q", method))}
	case rule.notification:
		return frontOutcome{answer: rpcError(m.ID, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: %s is a notification and takes no id", method))}
	case !rule.paramsOptional && (len(m.Params) == 0 || string(m.Params) == "null"):
		return frontOutcome{answer: rpcError(m.ID, jsonrpc.CodeInvalidParams, fmt.Sprintf(`invalid params: %s requires "params"`, method))}
	case len(m.Params) > 0 && m.Params[0] != '{' && string(m.Params) != "null":
		return frontOutcome{answer: rpcError(m.ID, jsonrpc.CodeInvalidParams, `invalid params: "params" must be an object`)}
	}
	out := frontOutcome{body: body, blocking: method == "tools/call" || method == methodTasksResult}
	if method == "tools/call" && tasks {
		moved, err := moveTask(trimmed)
		if err != nil {
			return frontOutcome{answer: rpcError(m.ID, jsonrpc.CodeInvalidParams, "invalid params: "+err.Error())}
		}
		if moved != nil {
			out.body = moved
		}
	}
	return out
}

// moveTask returns a tools/call request with its params.task moved to params._meta under
// taskMetaKey (nil when it has no task).
func moveTask(body []byte) ([]byte, error) {
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, err
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(msg["params"], &params); err != nil {
		return nil, fmt.Errorf(`"params" must be an object`)
	}
	task, ok := params["task"]
	if !ok {
		return nil, nil
	}
	var t struct {
		TTL *json.Number `json:"ttl"`
	}
	if err := json.Unmarshal(task, &t); err != nil || bytes.TrimSpace(task)[0] != '{' {
		return nil, fmt.Errorf(`"task" must be an object`)
	}
	if t.TTL != nil {
		if _, err := t.TTL.Int64(); err != nil {
			return nil, fmt.Errorf(`"task.ttl" must be an integer number of milliseconds`)
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := params["_meta"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf(`"_meta" must be an object`)
		}
	}
	meta[taskMetaKey] = task
	delete(params, "task")
	var err error
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	if msg["params"], err = json.Marshal(params); err != nil {
		return nil, err
	}
	return json.Marshal(msg)
}

func idOrNull(m rpcMessage) json.RawMessage {
	if m.hasID() {
		return m.ID
	}
	return nil
}

// rpcError is a JSON-RPC error response (id null when id is nil).
func rpcError(id json.RawMessage, code int64, message string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: message}})
	return b
}

// writeAnswer writes the front layer's answer to a POST.
func writeAnswer(w http.ResponseWriter, o frontOutcome) {
	if o.accepted {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(o.answer)
}

// acceptsEventStream reports whether a request accepts text/event-stream.
func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			if mt = strings.TrimSpace(mt); mt == "text/event-stream" || mt == "*/*" {
				return true
			}
		}
	}
	return false
}

// streamWriter is the response writer of an event stream that the facade shares with the SDK:
// it opens the stream at once (headers written and flushed), writes a comment line when
// nothing was written for keepAlive (so no client read timeout fires while a request blocks:
// SPEC 14), and lets the facade add events of its own (notifications/tasks/status) between the
// SDK's.
type streamWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu     sync.Mutex
	last   time.Time
	closed bool
	shared bool // the SDK writes the status (shareStream)
	status int  // the status the SDK wrote (shared streams)
	stop   chan struct{}
	done   chan struct{}
}

// shareStream wraps the writer of a stream the SDK opens itself (the standalone GET stream),
// so that the facade can add events of its own, and comment lines every keepAlive, once the
// SDK answered 200.
func shareStream(w http.ResponseWriter, keepAlive time.Duration) *streamWriter {
	s := &streamWriter{w: w, rc: http.NewResponseController(w), shared: true, last: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	if keepAlive > 0 {
		go s.keepAlive(keepAlive)
	} else {
		close(s.done)
	}
	return s
}

// openStream starts the event stream of w; keepAlive <= 0 writes no comment lines.
func openStream(w http.ResponseWriter, keepAlive time.Duration) *streamWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &streamWriter{w: w, rc: http.NewResponseController(w), last: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	_ = s.rc.Flush()
	if keepAlive > 0 {
		go s.keepAlive(keepAlive)
	} else {
		close(s.done)
	}
	return s
}

func (s *streamWriter) keepAlive(every time.Duration) {
	defer close(s.done)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		next := every - time.Since(s.last)
		if s.shared && s.status != http.StatusOK {
			next = every // the SDK has not opened the stream (or refused it)
		} else if next <= 0 {
			if _, err := s.w.Write([]byte(": keepalive\n\n")); err == nil {
				_ = s.rc.Flush() // a failed write or flush ends the request, which closes s
			}
			s.last = time.Now()
			next = every
		}
		s.mu.Unlock()
		t.Reset(next)
	}
}

// Header implements http.ResponseWriter: the headers are written already.
func (s *streamWriter) Header() http.Header { return s.w.Header() }

// WriteHeader implements http.ResponseWriter: the stream's status was written (200), unless
// the SDK opens the stream itself.
func (s *streamWriter) WriteHeader(code int) {
	if !s.shared {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == 0 {
		s.status = code
		s.w.WriteHeader(code)
	}
}

// Write implements http.ResponseWriter.
func (s *streamWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, http.ErrHandlerTimeout
	}
	s.last = time.Now()
	if s.shared && s.status == 0 {
		s.status = http.StatusOK
	}
	return s.w.Write(p)
}

// Flush implements http.Flusher.
func (s *streamWriter) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		_ = s.rc.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.w }

// event writes one SSE event of the facade's own (a JSON-RPC notification) and reports whether
// it was written.
func (s *streamWriter) event(data []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.shared && s.status != http.StatusOK {
		return false
	}
	if _, err := fmt.Fprintf(s.w, "event: message\ndata: %s\n\n", data); err != nil {
		return false
	}
	s.last = time.Now()
	return s.rc.Flush() == nil
}

// close stops the comment lines; the handler is returning.
func (s *streamWriter) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
}
