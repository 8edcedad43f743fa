package frames

import "encoding/json"

// This file holds the frames the broker sends to hosts about jobs (SPEC 5–11). Every one of
// them names the job by call_id, plus handle once the job is deferred (SPEC 8).

// ToolCall dispatches a call to the host serving the tool (SPEC 5). The host answers with
// tool_result, or defers it with tool_deferred while it is pending.
type ToolCall struct {
	Reply
	// CallID is the broker's id of the call: "call_" and 20 characters of [a-z2-7].
	CallID string `json:"call_id" required:"true"`
	// Name is the tool called.
	Name string `json:"name" required:"true"`
	// Arguments are the call's arguments, already checked against the tool's parameters.
	Arguments json.RawMessage `json:"arguments" required:"true"`
	// Deferred tells whether the tool may be deferred.
	Deferred bool `json:"deferred" required:"true"`
	// TimeoutMS is the ordinary timeout of the call.
	TimeoutMS int64 `json:"timeout_ms" required:"true"`
	// SessionID is the session the call belongs to.
	SessionID string `json:"session_id" required:"true"`
}

// FrameType returns "tool_call".
func (ToolCall) FrameType() string { return "tool_call" }

// ToolDeferredAck answers every tool_deferred (SPEC 6): accepted with the job's deadline, or
// rejected with the reason of the first rule of SPEC 6 that applies. A rejected defer leaves
// the job pending.
type ToolDeferredAck struct {
	Reply
	// CallID is the call the defer named.
	CallID string `json:"call_id" required:"true"`
	// Handle is the handle the defer named.
	Handle string `json:"handle" required:"true"`
	// Accepted tells whether the job is now deferred under the handle. Always present.
	Accepted bool `json:"accepted" required:"true"`
	// Reason is why the defer was rejected.
	Reason DeferAckReason `json:"reason,omitempty"`
	// DeadlineMS is when the deferred job times out, epoch milliseconds (accepted defers).
	DeadlineMS int64 `json:"deadline_ms,omitempty"`
}

// FrameType returns "tool_deferred_ack".
func (ToolDeferredAck) FrameType() string { return "tool_deferred_ack" }

// JobCancelResult answers job.cancel (SPEC 5) with what the request did.
type JobCancelResult struct {
	Reply
	// CallID is the broker call id of the job (empty when the request named an unknown handle).
	CallID string `json:"call_id" required:"true"`
	// Handle is the job's handle once it is deferred (SPEC 8).
	Handle string `json:"handle,omitempty"`
	// Result is cancelled, already_done, already_canceled or unknown_call.
	Result CancelResult `json:"result" required:"true"`
}

// FrameType returns "job.cancel_result".
func (JobCancelResult) FrameType() string { return "job.cancel_result" }

// ToolCancel tells the host to stop a job promptly (SPEC 11). It is sent once per job, exactly
// when the job enters cancelled or timed_out.
type ToolCancel struct {
	Reply
	// CallID is the broker call id of the job.
	CallID string `json:"call_id" required:"true"`
	// Handle is the job's handle once it is deferred.
	Handle string `json:"handle,omitempty"`
	// Reason is why the job stops.
	Reason CancelReason `json:"reason" required:"true"`
}

// FrameType returns "tool_cancel".
func (ToolCancel) FrameType() string { return "tool_cancel" }

// ToolJobNarration reports a step of the lifecycle of something the broker voices about a job —
// a milestone, an interaction ask or a completion (SPEC 8). response_id is present from speaking
// on, so a UI can match it to transcript frames.
type ToolJobNarration struct {
	Reply
	// CallID is the broker call id of the job.
	CallID string `json:"call_id" required:"true"`
	// Handle is the job's handle once it is deferred.
	Handle string `json:"handle,omitempty"`
	// Kind is what is voiced: milestone, interaction or completion.
	Kind NarrationKind `json:"kind" required:"true"`
	// InteractionID names the interaction of an interaction ask.
	InteractionID string `json:"interaction_id,omitempty"`
	// State is the lifecycle step.
	State NarrationState `json:"state" required:"true"`
	// Attempt counts the tries of this item, from 1. Always present.
	Attempt int `json:"attempt" required:"true"`
	// ResponseID is the model response voicing the item, from speaking on.
	ResponseID string `json:"response_id,omitempty"`
}

// FrameType returns "tool_job_narration".
func (ToolJobNarration) FrameType() string { return "tool_job_narration" }

// ToolJobDeliveryFailed is the terminal report that a job's completion could not be voiced to
// the caller (SPEC 8), after the retry, or because the session ended first. The result stays in
// the agent's context.
type ToolJobDeliveryFailed struct {
	Reply
	// CallID is the broker call id of the job.
	CallID string `json:"call_id" required:"true"`
	// Handle is the job's handle.
	Handle string `json:"handle" required:"true"`
	// Attempts counts the attempts that reached speaking (2 after a failed retry). Always present.
	Attempts int `json:"attempts" required:"true"`
	// Reason is the reason of the last failure.
	Reason DeliveryFailureReason `json:"reason" required:"true"`
}

// FrameType returns "tool_job_delivery_failed".
func (ToolJobDeliveryFailed) FrameType() string { return "tool_job_delivery_failed" }

// ToolInteractionAnswer delivers the caller's (or text agent's) answer to an open interaction of
// the job (SPEC 9); the interaction is then closed as answered.
type ToolInteractionAnswer struct {
	Reply
	// CallID is the broker call id of the job.
	CallID string `json:"call_id" required:"true"`
	// Handle is the job's handle once it is deferred.
	Handle string `json:"handle,omitempty"`
	// InteractionID is the interaction answered.
	InteractionID string `json:"interaction_id" required:"true"`
	// Option is the option the reply matched, for an interaction with options.
	Option string `json:"option,omitempty"`
	// Text is the reply as said or written.
	Text string `json:"text" required:"true"`
}

// FrameType returns "tool_interaction_answer".
func (ToolInteractionAnswer) FrameType() string { return "tool_interaction_answer" }

// ToolInteractionUpdateAck answers every tool_interaction_update deterministically (SPEC 9): the
// same update sent twice gets applied, then already_closed.
type ToolInteractionUpdateAck struct {
	Reply
	// CallID is the broker call id of the job, when the update named a known job (SPEC 8).
	CallID string `json:"call_id,omitempty"`
	// Handle is the job's handle once it is deferred.
	Handle string `json:"handle,omitempty"`
	// InteractionID is the interaction the update named.
	InteractionID string `json:"interaction_id" required:"true"`
	// State is the state the update asked for.
	State InteractionState `json:"state" required:"true"`
	// Result is applied, already_closed or unknown_interaction.
	Result InteractionUpdateResult `json:"result" required:"true"`
}

// FrameType returns "tool_interaction_update_ack".
func (ToolInteractionUpdateAck) FrameType() string { return "tool_interaction_update_ack" }

// ToolDeferredResume lists, after a resume (and its replay), every non-terminal deferred job of
// the slot so the host can re-attach its workers (SPEC 10). It is sent to every slot that has
// declared tools, with "jobs": [] when there are none.
type ToolDeferredResume struct {
	Reply
	// Jobs are the slot's open deferred jobs. Always present, possibly empty.
	Jobs []ResumedJob `json:"jobs" required:"true"`
}

// FrameType returns "tool_deferred_resume".
func (ToolDeferredResume) FrameType() string { return "tool_deferred_resume" }

// ResumedJob is one open deferred job listed by tool_deferred_resume (SPEC 10).
type ResumedJob struct {
	// CallID is the broker call id of the job.
	CallID string `json:"call_id" required:"true"`
	// Handle is the job's handle.
	Handle string `json:"handle" required:"true"`
	// Name is the tool called.
	Name string `json:"name" required:"true"`
	// Arguments are the call's arguments.
	Arguments json.RawMessage `json:"arguments" required:"true"`
	// StatusLabel is the label given with the defer (empty when none was).
	StatusLabel string `json:"status_label" required:"true"`
	// State is the job's state (deferred).
	State JobState `json:"state" required:"true"`
	// DeadlineMS is when the job times out, epoch milliseconds.
	DeadlineMS int64 `json:"deadline_ms" required:"true"`
	// OpenInteraction is the job's open interaction, if it has one.
	OpenInteraction *Interaction `json:"open_interaction,omitempty"`
}
