package frames

import "encoding/json"

// This file holds the frames a host sends about the calls it serves (SPEC 5–9).

// ToolDeferred is the host's acknowledgement that a pending call will finish in the background
// under a unique handle (SPEC 6). The broker always answers tool_deferred_ack.
type ToolDeferred struct {
	Request
	// CallID is the broker call id of the pending call.
	CallID string `json:"call_id" required:"true"`
	// Handle is the host-chosen name of the job: unique per tenant, never reusable.
	Handle string `json:"handle" required:"true"`
	// StatusLabel is how the agent names the running job ("booking your table").
	StatusLabel string `json:"status_label,omitempty"`
}

// FrameType returns "tool_deferred".
func (ToolDeferred) FrameType() string { return "tool_deferred" }

// ToolProgress is silent telemetry about a running job (SPEC 7): the note is added to the
// agent's context and never spoken on its own. It re-arms the ordinary timeout of a pending job.
type ToolProgress struct {
	Request
	// CallID is the broker call id of the job; exactly one of call_id and handle is required.
	CallID string `json:"call_id,omitempty"`
	// Handle is the handle of the deferred job; exactly one of call_id and handle is required.
	Handle string `json:"handle,omitempty"`
	// Note is the progress text for the agent's context.
	Note string `json:"note" required:"true"`
}

// FrameType returns "tool_progress".
func (ToolProgress) FrameType() string { return "tool_progress" }

// Validate checks that exactly one of call_id and handle is set.
func (f ToolProgress) Validate() error { return validateTarget(f.CallID, f.Handle) }

// ToolPartialResult is a structured piece of a job's eventual answer (SPEC 7), always added to
// the agent's context; with reply it is narrated as a milestone at the next free floor, and with
// interaction it asks the caller for a decision (SPEC 9). It re-arms the ordinary timeout.
type ToolPartialResult struct {
	Request
	// CallID is the broker call id of the job; exactly one of call_id and handle is required.
	CallID string `json:"call_id,omitempty"`
	// Handle is the handle of the deferred job; exactly one of call_id and handle is required.
	Handle string `json:"handle,omitempty"`
	// Segment is the partial answer: any JSON value.
	Segment json.RawMessage `json:"segment" required:"true"`
	// Reply asks the broker to narrate the segment proactively when the floor is free.
	Reply bool `json:"reply,omitempty"`
	// Phase names the stage of the job the segment belongs to.
	Phase string `json:"phase,omitempty"`
	// Interaction asks the caller for a decision.
	Interaction *Interaction `json:"interaction,omitempty"`
}

// FrameType returns "tool_partial_result".
func (ToolPartialResult) FrameType() string { return "tool_partial_result" }

// Validate checks that exactly one of call_id and handle is set.
func (f ToolPartialResult) Validate() error { return validateTarget(f.CallID, f.Handle) }

// Interaction is a question a running job puts to the caller (SPEC 9): a prompt and, optionally,
// the options the answer must match. The broker assigns an id ("ia_…") when none is given.
type Interaction struct {
	// ID identifies the interaction; absent, the broker assigns one.
	ID string `json:"id,omitempty"`
	// Prompt is the question asked.
	Prompt string `json:"prompt" required:"true"`
	// Options are the accepted answers; absent, any non-empty reply answers.
	Options []string `json:"options,omitempty"`
}

// ToolResult finishes a job (SPEC 5): with output it becomes completed, with error failed. It
// addresses the job by exactly one of call_id and handle and carries exactly one of output and
// error (a JSON null output counts as absent, and so does an empty error).
type ToolResult struct {
	Request
	// CallID is the broker call id of the job; exactly one of call_id and handle is required.
	CallID string `json:"call_id,omitempty"`
	// Handle is the handle of the deferred job; exactly one of call_id and handle is required.
	Handle string `json:"handle,omitempty"`
	// Output is the tool's result: any JSON value.
	Output json.RawMessage `json:"output,omitempty"`
	// Error is the failure message.
	Error string `json:"error,omitempty"`
}

// FrameType returns "tool_result".
func (ToolResult) FrameType() string { return "tool_result" }

// Validate checks the exactly-one rules of call_id/handle and output/error.
func (f ToolResult) Validate() error {
	if err := validateTarget(f.CallID, f.Handle); err != nil {
		return err
	}
	return exactlyOne("output", present(f.Output), "error", f.Error != "")
}

// JobCancel asks the broker to cancel a job of the session (SPEC 5 and 11), answered by
// job.cancel_result. The tool_cancel reason follows the sender's role.
type JobCancel struct {
	Request
	// CallID is the broker call id of the job; exactly one of call_id and handle is required.
	CallID string `json:"call_id,omitempty"`
	// Handle is the handle of the deferred job; exactly one of call_id and handle is required.
	Handle string `json:"handle,omitempty"`
}

// FrameType returns "job.cancel".
func (JobCancel) FrameType() string { return "job.cancel" }

// Validate checks that exactly one of call_id and handle is set.
func (f JobCancel) Validate() error { return validateTarget(f.CallID, f.Handle) }

// ToolInteractionUpdate closes an open interaction from the host side (SPEC 9): its pending or
// in-flight narration stops, the agent is told the ask is moot, and the job keeps running. It is
// always answered by tool_interaction_update_ack.
type ToolInteractionUpdate struct {
	Request
	// CallID is the broker call id of the job; exactly one of call_id and handle is required.
	CallID string `json:"call_id,omitempty"`
	// Handle is the handle of the deferred job; exactly one of call_id and handle is required.
	Handle string `json:"handle,omitempty"`
	// InteractionID is the id of the interaction to close.
	InteractionID string `json:"interaction_id" required:"true"`
	// State is how it closes: resolved, cancelled or superseded.
	State InteractionState `json:"state" required:"true"`
}

// FrameType returns "tool_interaction_update".
func (ToolInteractionUpdate) FrameType() string { return "tool_interaction_update" }

// Validate checks call_id/handle and the state.
func (f ToolInteractionUpdate) Validate() error {
	if err := validateTarget(f.CallID, f.Handle); err != nil {
		return err
	}
	if !f.State.Valid() {
		return badEnum("state", interactionStates)
	}
	return nil
}

// Inject asks the agent to take a turn about text at the next free floor, queued like a
// hand-off (SPEC 8); with speak false the text is only added to the agent's context. An inject
// that arrives while a response is in flight is answered with error inject_rejected.
type Inject struct {
	Request
	// Text is what the agent should talk about.
	Text string `json:"text" required:"true"`
	// Speak, when false, only adds the text to the agent's context; nil means true.
	Speak *bool `json:"speak,omitempty"`
}

// FrameType returns "inject".
func (Inject) FrameType() string { return "inject" }

// Spoken reports whether the inject asks for a spoken turn (speak absent or true).
func (f Inject) Spoken() bool { return f.Speak == nil || *f.Speak }
