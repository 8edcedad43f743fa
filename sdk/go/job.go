package backchannel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/backchannel-io/backchannel/frames"
)

// Job is a deferred call: the broker's durable job, addressed by its handle (SPEC 6–9). A
// *Job comes from Call.Defer, or from Options.OnResume for a job this process did not defer
// itself. Its methods are safe for concurrent use; each returns once the broker applied the
// frame, or with the broker's error wrapping a *frames.Error (call_finished once the job is
// over, for example).
type Job struct {
	// CallID is the broker's id of the call.
	CallID string
	// Handle is the name the job was deferred under.
	Handle string
	// Name is the tool called.
	Name string
	// Arguments are the call's arguments.
	Arguments json.RawMessage
	// StatusLabel is the label given with the defer.
	StatusLabel string
	// Deadline is when the job times out (its deferred_timeout, which nothing extends).
	Deadline time.Time

	h         *Host
	ctx       context.Context
	cancel    context.CancelCauseFunc
	cancelled chan struct{}
	answers   *pump[InteractionAnswer]
	// Guarded by h.mu.
	reason frames.CancelReason
}

// InteractionAnswer is the answer to a job's interaction (tool_interaction_answer, SPEC 9),
// by the caller or a text agent; the interaction is closed as answered.
type InteractionAnswer struct {
	// InteractionID is the interaction answered.
	InteractionID string
	// Option is the option the reply matched, for an interaction with options.
	Option string
	// Text is the reply as said or written.
	Text string
}

// errJobEnded is the cause of a job's context once it finished.
var errJobEnded = errors.New("backchannel: the job has ended")

// newJobLocked creates and registers a job. h.mu is held.
func (h *Host) newJobLocked(callID, handle, name string, args json.RawMessage, label string, deadlineMS int64) *Job {
	j := &Job{CallID: callID, Handle: handle, Name: name, Arguments: args, StatusLabel: label,
		h: h, cancelled: make(chan struct{}), answers: newPump[InteractionAnswer]()}
	if deadlineMS > 0 {
		j.Deadline = time.UnixMilli(deadlineMS)
	}
	j.ctx, j.cancel = context.WithCancelCause(h.ctx)
	h.jobs[callID] = j
	h.handles[handle] = j
	return j
}

// forgetJobLocked unregisters j. h.mu is held.
func (h *Host) forgetJobLocked(j *Job) {
	if h.jobs[j.CallID] == j {
		delete(h.jobs, j.CallID)
	}
	if h.handles[j.Handle] == j {
		delete(h.handles, j.Handle)
	}
}

// end cancels the job's context and closes its answers.
func (j *Job) end(cause error) {
	j.cancel(cause)
	j.answers.stop()
}

// finished unregisters a job that reached its end through this host.
func (j *Job) finished() {
	j.h.mu.Lock()
	j.h.forgetJobLocked(j)
	j.h.mu.Unlock()
	j.end(errJobEnded)
}

// Context is done when the job is over for this host: cancelled by the broker (Cancelled),
// finished with Result or Fail, or the host stopped. Give it to the job's worker.
func (j *Job) Context() context.Context { return j.ctx }

// Cancelled is closed when the broker cancels the job (tool_cancel, SPEC 11): the worker
// should stop promptly; CancelReason tells why. A result sent after that gets call_finished.
func (j *Job) Cancelled() <-chan struct{} { return j.cancelled }

// CancelReason is the tool_cancel reason (timeout, discard, agent_request, caller_request,
// host_request, parent_cancelled) once Cancelled is closed, else "".
func (j *Job) CancelReason() frames.CancelReason {
	j.h.mu.Lock()
	defer j.h.mu.Unlock()
	return j.reason
}

// Answers delivers the answers to the job's interactions (see Ask), in order. It is closed
// when the job is over.
func (j *Job) Answers() <-chan InteractionAnswer { return j.answers.out }

// Progress sends a progress note (tool_progress, SPEC 7): silent telemetry added to the
// agent's context, never spoken on its own.
func (j *Job) Progress(ctx context.Context, note string) error {
	return j.h.silentRequest(ctx, "tool_progress for job "+j.Handle, &frames.ToolProgress{Handle: j.Handle, Note: note}, resendAlways)
}

// Milestone sends a piece of the eventual answer that the broker narrates proactively when
// the floor is free (tool_partial_result with reply: true, SPEC 7–8). segment is any value
// encoding/json can encode (a json.RawMessage as it is).
func (j *Job) Milestone(ctx context.Context, segment any) error {
	return j.partial(ctx, segment, true, "")
}

// Partial sends a piece of the eventual answer for the agent's context only
// (tool_partial_result, SPEC 7); phase, if not empty, names the stage it belongs to.
func (j *Job) Partial(ctx context.Context, segment any, phase string) error {
	return j.partial(ctx, segment, false, phase)
}

func (j *Job) partial(ctx context.Context, segment any, reply bool, phase string) error {
	if segment == nil {
		return errors.New("backchannel: a partial result needs a segment")
	}
	raw, err := encodeValue(segment)
	if err != nil {
		return fmt.Errorf("backchannel: encoding the segment: %w", err)
	}
	rule := resendAlways // context only: a repeat is harmless
	if reply {
		rule = resendNever // a repeat would be narrated twice
	}
	f := &frames.ToolPartialResult{Handle: j.Handle, Segment: raw, Reply: reply, Phase: phase}
	return j.h.silentRequest(ctx, "tool_partial_result for job "+j.Handle, f, rule)
}

// Ask puts a decision to the caller (tool_partial_result with an interaction, SPEC 9) and
// returns the interaction's id: ia.ID, or a fresh "ia_…" id when it is empty. A job has at
// most one open interaction; a new one supersedes the previous. The answer arrives on
// Answers; close the interaction yourself with UpdateInteraction when it becomes moot.
func (j *Job) Ask(ctx context.Context, ia frames.Interaction) (string, error) {
	if ia.ID == "" {
		ia.ID = "ia_" + randomString(20)
	}
	segment, err := json.Marshal(ia.Prompt)
	if err != nil {
		return "", err
	}
	f := &frames.ToolPartialResult{Handle: j.Handle, Segment: segment, Interaction: &ia}
	if err := j.h.silentRequest(ctx, "interaction ask for job "+j.Handle, f, resendNever); err != nil {
		return "", err
	}
	return ia.ID, nil
}

// UpdateInteraction closes an open interaction of the job (tool_interaction_update, SPEC 9) as
// resolved, cancelled or superseded; the job keeps running. The result is applied the first
// time, already_closed after that, unknown_interaction for an id the job never had.
func (j *Job) UpdateInteraction(ctx context.Context, interactionID string, state frames.InteractionState) (frames.InteractionUpdateResult, error) {
	h := j.h
	r, err := h.newRequest(&frames.ToolInteractionUpdate{Handle: j.Handle, InteractionID: interactionID, State: state}, answered, resendNever)
	if err != nil {
		return "", err
	}
	f, err := h.do(ctx, r)
	if err != nil {
		return "", wrapBroker("tool_interaction_update for job "+j.Handle, err)
	}
	ack, ok := f.(*frames.ToolInteractionUpdateAck)
	if !ok {
		return "", fmt.Errorf("backchannel: tool_interaction_update answered with %s", f.FrameType())
	}
	return ack.Result, nil
}

// Result completes the job with output (tool_result by handle, SPEC 5): any value
// encoding/json can encode, a json.RawMessage as it is, nil as the empty string.
//
// When the transport dropped right after the result was sent, the host sends it again after
// the resume; if the broker then answers call_finished although the job was not cancelled,
// the first result was the one applied and Result returns nil.
func (j *Job) Result(ctx context.Context, output any) error {
	raw, err := encodeValue(output)
	if err != nil {
		return fmt.Errorf("backchannel: encoding the output: %w", err)
	}
	return j.finish(ctx, &frames.ToolResult{Handle: j.Handle, Output: raw})
}

// Fail completes the job as failed with message (tool_result with error, SPEC 5). It resends
// after a drop like Result.
func (j *Job) Fail(ctx context.Context, message string) error {
	if message == "" {
		message = "tool failed"
	}
	return j.finish(ctx, &frames.ToolResult{Handle: j.Handle, Error: message})
}

func (j *Job) finish(ctx context.Context, f *frames.ToolResult) error {
	h := j.h
	r, err := h.newRequest(f, silent, resendResult)
	if err != nil {
		return err
	}
	r.onReply = resultRule(r, func() bool {
		select {
		case <-j.cancelled:
			return true
		default:
			return false
		}
	}, j.finished)
	_, err = h.do(ctx, r)
	return wrapBroker("tool_result for job "+j.Handle, err)
}
