package faulttest

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// frame is one decoded frame; a message that is not a JSON object has Type "".
type frame struct {
	Raw  []byte
	Type string
	m    map[string]json.RawMessage
}

func parseFrame(raw []byte) *frame {
	f := &frame{Raw: raw}
	if err := json.Unmarshal(raw, &f.m); err == nil && f.m != nil {
		f.Type = f.str("type")
	}
	return f
}

func (f *frame) has(k string) bool { _, ok := f.m[k]; return ok }

func (f *frame) str(k string) string {
	var s string
	_ = json.Unmarshal(f.m[k], &s)
	return s
}

// int returns member k as an integer and whether it is one.
func (f *frame) int(k string) (int64, bool) {
	raw, ok := f.m[k]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	return n, err == nil
}

func (f *frame) bool(k string) bool {
	var b bool
	_ = json.Unmarshal(f.m[k], &b)
	return b
}

// obj returns member k as an object (nil when it is not one).
func (f *frame) obj(k string) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(f.m[k], &m)
	return m
}

// arr returns member k as an array (nil when it is not one).
func (f *frame) arr(k string) []json.RawMessage {
	var a []json.RawMessage
	_ = json.Unmarshal(f.m[k], &a)
	return a
}

// seq returns the frame's seq, or -1 when it has none.
func (f *frame) seq() int64 {
	if n, ok := f.int("seq"); ok {
		return n
	}
	return -1
}

func rawStr(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// encode marshals a frame built as a map (the harness's frames are small and simple).
func encode(m map[string]any) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic("faulttest: encoding a frame: " + err.Error())
	}
	return b
}

// content is an agent.tool_result content (SPEC 13): header lines, then a body.
type content struct {
	headers map[string]string
	body    string
}

// headerNames are the header names of SPEC 13, in their order.
var headerNames = map[string]bool{"internal": true, "wait_outcome": true, "wait_reason": true, "wait_mode": true,
	"original_tool_call_id": true, "error": true, "tool_call_id": true, "duration_seconds": true,
	"input_available": true, "timed_out": true, "advice": true, "pending_prompts": true}

// parseContent reads a content by the rule of docs/textagent.md 1.3: leading `name: value`
// lines with a known name are headers, up to the first empty line; the rest is the body.
func parseContent(s string) content {
	c := content{headers: map[string]string{}}
	rest := s
	for rest != "" {
		line, after, more := strings.Cut(rest, "\n")
		if line == "" && len(c.headers) > 0 {
			c.body = after
			return c
		}
		name, value, ok := strings.Cut(line, ": ")
		if !ok || !headerNames[name] {
			if len(c.headers) == 0 {
				c.body = s
			} else {
				c.body = rest
			}
			return c
		}
		c.headers[name] = value
		if !more {
			break
		}
		rest = after
	}
	return c
}

// The texts of SPEC 13 the checker and the harness read.
const (
	msgCanceled         = "Tool call canceled"
	msgTimedOut         = "Tool call timed out"
	msgStartFailed      = "Tool call could not be started: the job store failed"
	msgAlreadyConsumed  = "Tool call result already consumed"
	msgAlreadyWaited    = "Tool call result is already being waited for"
	msgUnknownID        = "Unknown tool call id"
	msgNoBackground     = "No background tool call to wait for"
	msgBarePending      = "A wait for the next background completion is already pending"
	msgCancelRequested  = "Tool cancellation requested"
	msgAlreadyDone      = "Tool call is already done"
	msgAlreadyCanceled  = "Tool call already canceled"
	msgCannotCancel     = "Tool call cannot be canceled"
	msgCancelFailed     = "Tool call cancellation failed; try again"
	completionPromptPre = "[internal] Tool call `"
	completionPromptSuf = "` completed. Its result is queued; use `wait` to consume it."
	// barrierCallID can never be a broker call id ('0' is not in a-z2-7): job.cancel of it is
	// the sync barrier of docs/protocol.md section 2.
	barrierCallID = "call_00000000000000000000"
)

// waitErrors are the errors of `wait` itself (not outcomes of the waited call).
var waitErrors = map[string]bool{msgAlreadyConsumed: true, msgAlreadyWaited: true, msgUnknownID: true,
	msgNoBackground: true, msgBarePending: true, "timeout_minutes must be a positive integer": true}

// outcomeClass sorts an outcome content of a host call.
type outcomeClass int

const (
	outCompleted outcomeClass = iota + 1
	outFailed
	outCanceled
	outTimedOut
	outStartFailed
	outUnavailable
)

func (o outcomeClass) String() string {
	return [...]string{"?", "completed", "failed", "canceled", "timed_out", "start_failed", "unavailable"}[o]
}

// classify sorts the outcome content of a host call; detail is the output body or the error.
func classify(c content) (outcomeClass, string) {
	e, isErr := c.headers["error"]
	if !isErr {
		return outCompleted, c.body
	}
	switch {
	case e == msgCanceled:
		return outCanceled, e
	case e == msgTimedOut:
		return outTimedOut, e
	case e == msgStartFailed:
		return outStartFailed, e
	case strings.HasPrefix(e, "Tool ") && strings.HasSuffix(e, " is not available"):
		return outUnavailable, e
	}
	return outFailed, e
}

// completionPromptCall returns the call id of a completion prompt's text, or "".
func completionPromptCall(text string) string {
	if strings.HasPrefix(text, completionPromptPre) && strings.HasSuffix(text, completionPromptSuf) {
		return strings.TrimSuffix(strings.TrimPrefix(text, completionPromptPre), completionPromptSuf)
	}
	return ""
}
