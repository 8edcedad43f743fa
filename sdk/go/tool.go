package backchannel

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/backchannel-io/backchannel/frames"
)

// Tool is one tool a host serves: its declaration (SPEC 4) and the handler that runs each
// call of it.
type Tool struct {
	// Decl is the declaration sent to the broker: name, description, parameters (a JSON
	// Schema object) and the flags of SPEC 4 (Deferred, DeferredTimeout, Timeout, …).
	Decl frames.ToolDecl
	// Handler runs each call of the tool.
	Handler Handler
}

// Handler runs one call of a tool, on a goroutine of its own. Its ctx is cancelled when the
// broker cancels the call (tool_cancel: context.Cause is a *CancelledError with the reason),
// when the host stops, and when the handler returns.
//
// A handler answers at once by returning: (output, nil) sends tool_result with output —
// any value encoding/json can encode, a json.RawMessage as it is, nil as the empty string —
// and (nil, err) sends tool_result with error err.Error(). Or it defers the call with
// call.Defer and, once the defer is accepted, returns: the SDK then sends no result, and the
// job is finished later through the *Job (Job.Result, Job.Fail). Nothing is sent for a call
// the broker cancelled. A handler that panics fails the call.
type Handler func(ctx context.Context, call *Call) (output any, err error)

// decls returns the declarations of tools.
func decls(tools []Tool) []frames.ToolDecl {
	out := make([]frames.ToolDecl, len(tools))
	for i, t := range tools {
		out[i] = t.Decl
	}
	return out
}

// Declare replaces the host's tool set with tools (tools.declare, SPEC 4) and returns once the
// broker confirmed it with tools.declared. A rejected declaration changes nothing and is
// returned as an error wrapping the broker's *frames.Error (code bad_frame naming the tool and
// field, or limit_exceeded). Calls already running keep their handlers.
func (h *Host) Declare(ctx context.Context, tools ...Tool) error {
	if err := checkTools(tools); err != nil {
		return err
	}
	handlers := make(map[string]Handler, len(tools))
	for _, t := range tools {
		handlers[t.Decl.Name] = t.Handler
	}
	r, err := h.declareRequest(decls(tools))
	if err != nil {
		return err
	}
	onReply := r.onReply
	r.onReply = func(f frames.Frame, err error) (frames.Frame, error) {
		if err == nil {
			h.mu.Lock()
			h.handlers = handlers
			h.mu.Unlock()
		}
		return onReply(f, err)
	}
	_, err = h.do(ctx, r)
	return wrapBroker("tools.declare", err)
}

// declareRequest returns a tools.declare request for ds that records the declared set when
// the broker confirms it. It takes no lock, so it may be called with h.mu held.
func (h *Host) declareRequest(ds []frames.ToolDecl) (*request, error) {
	r, err := h.newRequest(&frames.ToolsDeclare{Tools: ds}, answered, resendNever)
	if err != nil {
		return nil, err
	}
	r.onReply = func(f frames.Frame, err error) (frames.Frame, error) {
		if err != nil {
			return nil, err
		}
		if _, ok := f.(*frames.ToolsDeclared); !ok {
			return nil, fmt.Errorf("backchannel: tools.declare answered with %s", f.FrameType())
		}
		h.mu.Lock()
		h.decls, h.declared = ds, true
		h.mu.Unlock()
		return f, nil
	}
	return r, nil
}

// runCall runs a call's handler and sends its result (unless it deferred or was cancelled).
func (h *Host) runCall(c *Call, handler Handler) {
	out, err := callHandler(c, handler, h)
	h.mu.Lock()
	delete(h.calls, c.CallID)
	deferred, cancelled, resumed := c.job != nil, c.cancelled, c.resumed
	h.mu.Unlock()
	c.cancel(errHandlerReturned)
	switch {
	case !deferred && resumed != nil && !cancelled:
		h.log.Debug("backchannel: a replayed call's handler did not take its deferred job over; passing it to OnResume", "call_id", c.CallID, "err", err)
		h.resumeJob(*resumed)
		return
	case deferred:
		if out != nil || err != nil {
			h.log.Debug("backchannel: a deferred call's handler returned a value; finish the job with Job.Result or Job.Fail", "call_id", c.CallID, "err", err)
		}
		return
	case cancelled, h.ctx.Err() != nil:
		return
	}
	f := &frames.ToolResult{CallID: c.CallID}
	if err != nil {
		f.Error = errorText(err)
	} else if f.Output, err = encodeValue(out); err != nil {
		f.Output, f.Error = nil, "the tool's output could not be encoded as JSON: "+err.Error()
	}
	r, err := h.newRequest(f, silent, resendResult)
	if err != nil {
		f.Output, f.Error = nil, "the tool's output is too large: "+err.Error()
		if r, err = h.newRequest(f, silent, resendResult); err != nil {
			h.log.Error("backchannel: cannot send a tool result", "call_id", c.CallID, "err", err)
			return
		}
	}
	r.onReply = resultRule(r, func() bool { return c.wasCancelled() }, nil)
	if _, err := h.do(h.ctx, r); err != nil && h.ctx.Err() == nil {
		h.log.Warn("backchannel: the broker refused a tool result", "call_id", c.CallID, "tool", c.Name, "err", err)
	}
}

// callHandler runs handler, turning a panic (or a missing handler) into an error.
func callHandler(c *Call, handler Handler, h *Host) (out any, err error) {
	if handler == nil {
		return nil, fmt.Errorf("tool %s has no handler in this host", c.Name)
	}
	defer func() {
		if p := recover(); p != nil {
			h.log.Error("backchannel: tool handler panicked", "tool", c.Name, "call_id", c.CallID, "panic", p, "stack", string(debug.Stack()))
			out, err = nil, fmt.Errorf("tool %s failed", c.Name)
		}
	}()
	return handler(c.ctx, c)
}

// resultRule is the onReply of a tool_result: call_finished for a result sent again after a
// drop means the first one was applied — unless the job was cancelled meanwhile (the broker
// sends tool_cancel exactly when a job enters cancelled or timed_out, so a job that got none
// was finished by that first result). done runs when the job is over either way.
func resultRule(r *request, cancelled func() bool, done func()) func(frames.Frame, error) (frames.Frame, error) {
	return func(f frames.Frame, err error) (frames.Frame, error) {
		if err != nil && r.resent && isCode(err, frames.CodeCallFinished) && !cancelled() {
			err = nil
		}
		if done != nil && (err == nil || isCode(err, frames.CodeCallFinished) || isCode(err, frames.CodeUnknownCall)) {
			done()
		}
		return f, err
	}
}

// errorText is the error string of a failed call.
func errorText(err error) string {
	if s := err.Error(); s != "" {
		return s
	}
	return "tool failed"
}

// encodeValue renders an output or segment: a json.RawMessage as it is, nil (or JSON null) as
// the empty string (null counts as absent on the wire), anything else with encoding/json.
func encodeValue(v any) (json.RawMessage, error) {
	var raw json.RawMessage
	switch v := v.(type) {
	case nil:
	case json.RawMessage:
		if !json.Valid(v) {
			return nil, fmt.Errorf("json.RawMessage %.40q is not valid JSON", v)
		}
		raw = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		raw = b
	}
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`""`), nil
	}
	return raw, nil
}
