package backchannel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/backchannel-io/backchannel/frames"
)

// Call is one call of a tool, as the broker dispatched it (tool_call, SPEC 5). Its handler
// answers it by returning, or defers it with Defer.
type Call struct {
	// CallID is the broker's id of the call ("call_" and 20 characters a-z2-7).
	CallID string
	// Name is the tool called.
	Name string
	// Arguments are the call's arguments, already checked against the tool's parameters.
	Arguments json.RawMessage
	// Deferrable tells whether the tool was declared deferred, so that Defer may be accepted.
	Deferrable bool
	// Timeout is the call's ordinary timeout: the broker cancels a call that stays silent that
	// long (Progress re-arms it).
	Timeout time.Duration
	// SessionID is the session the call belongs to.
	SessionID string

	h      *Host
	ctx    context.Context
	cancel context.CancelCauseFunc
	// Guarded by h.mu.
	job       *Job // set once a defer is accepted
	cancelled bool // a tool_cancel arrived
	// resumed is set when tool_deferred_resume lists this call as a job deferred before (a
	// tool_call replayed to a restarted process): the handler takes it over by deferring it
	// again with the same handle; otherwise it goes to Options.OnResume when the handler
	// returns, and the handler's result is not sent.
	resumed *resumedJob
}

// resumedJob is a job listed by tool_deferred_resume.
type resumedJob struct {
	job  *Job
	info frames.ResumedJob
}

// errHandlerReturned is the cause of a handler's context after it returned.
var errHandlerReturned = errors.New("backchannel: the handler returned")

func newCall(h *Host, f *frames.ToolCall) *Call {
	c := &Call{CallID: f.CallID, Name: f.Name, Arguments: f.Arguments, Deferrable: f.Deferred,
		Timeout: time.Duration(f.TimeoutMS) * time.Millisecond, SessionID: f.SessionID, h: h}
	c.ctx, c.cancel = context.WithCancelCause(h.ctx)
	return c
}

// Host returns the host that received the call.
func (c *Call) Host() *Host { return c.h }

func (c *Call) wasCancelled() bool {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	return c.cancelled
}

// Defer acknowledges that the call will finish in the background under handle, a name unique
// in the tenant and never reusable (tool_deferred, SPEC 6), and waits for the broker's
// tool_deferred_ack. The agent is told at once that the job runs in the background under
// statusLabel ("" means the tool's name).
//
// Accepted, it returns the *Job: the handler then returns (its return values are ignored)
// and the job is finished with Job.Result or Job.Fail, from any goroutine, until its deadline.
// Deferring again with the same handle returns the same *Job. Rejected, it returns a
// *DeferRejectedError with the broker's reason; the call stays pending on its ordinary
// timeout, so the handler may still answer it or defer it under another handle. Defer must
// be called before the handler returns.
func (c *Call) Defer(ctx context.Context, handle, statusLabel string) (*Job, error) {
	h := c.h
	r, err := h.newRequest(&frames.ToolDeferred{CallID: c.CallID, Handle: handle, StatusLabel: statusLabel}, answered, resendNever)
	if err != nil {
		return nil, err
	}
	r.onReply = func(f frames.Frame, err error) (frames.Frame, error) {
		if err != nil {
			return nil, err
		}
		ack, ok := f.(*frames.ToolDeferredAck)
		if !ok {
			return nil, fmt.Errorf("backchannel: tool_deferred answered with %s", f.FrameType())
		}
		if !ack.Accepted {
			return nil, &DeferRejectedError{CallID: c.CallID, Handle: handle, Reason: ack.Reason}
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.stopped {
			return nil, h.err
		}
		j := h.jobs[c.CallID]
		if j == nil {
			j = h.newJobLocked(c.CallID, handle, c.Name, c.Arguments, statusLabel, ack.DeadlineMS)
		}
		c.job = j
		return f, nil
	}
	if _, err := h.do(ctx, r); err != nil {
		return nil, wrapBroker("tool_deferred of call "+c.CallID, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return c.job, nil
}

// Progress sends a progress note about the call (tool_progress, SPEC 7): silent telemetry for
// the agent's context that also re-arms the call's ordinary timeout. It returns once the
// broker applied it, or with the broker's error (call_finished when the call is over).
func (c *Call) Progress(ctx context.Context, note string) error {
	return c.h.silentRequest(ctx, "tool_progress", &frames.ToolProgress{CallID: c.CallID, Note: note}, resendAlways)
}

// silentRequest sends a frame the broker answers only when it fails, and waits until the
// broker confirmed it (request.go).
func (h *Host) silentRequest(ctx context.Context, what string, f frames.Frame, rule resendRule) error {
	r, err := h.newRequest(f, silent, rule)
	if err != nil {
		return err
	}
	_, err = h.do(ctx, r)
	return wrapBroker(what, err)
}
