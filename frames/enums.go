package frames

// This file holds the closed sets of strings that docs/spec.md names for frame fields. Every group
// is its own string type with a Valid method (is the value one of the group?) and an Enum
// method listing the values in SPEC order; Enum has the signature of the Enum interface of
// github.com/swaggest/jsonschema-go, so generated schemas list the allowed values.

// Role is the part a connection plays in a session (SPEC 1), named in hello and, for agent and
// caller, in transcript frames.
type Role string

// Roles of SPEC 1.
const (
	// RoleHost is developer code that declares tools and executes calls.
	RoleHost Role = "host"
	// RoleCaller is the person talking to the agent (browser, phone bridge).
	RoleCaller Role = "caller"
	// RoleAgent is a text agent connected over WebSocket; in transcripts, the voice agent.
	RoleAgent Role = "agent"
)

var roles = []Role{RoleHost, RoleCaller, RoleAgent}

// Valid reports whether r is one of the roles of SPEC 1.
func (r Role) Valid() bool { return oneOf(r, roles) }

// Enum lists the roles in SPEC order.
func (Role) Enum() []any { return enumOf(roles) }

// JobState is the state of a job in the broker's state machine (SPEC 5).
type JobState string

// Job states of SPEC 5. The first three are open; the others are terminal.
const (
	// StateAwaitingPermission: the call waits for the caller's spoken approval (SPEC 12).
	StateAwaitingPermission JobState = "awaiting_permission"
	// StatePending: the call was dispatched to a host and runs on its ordinary timeout.
	StatePending JobState = "pending"
	// StateDeferred: the host deferred the call; it runs on its deferred_timeout.
	StateDeferred JobState = "deferred"
	// StateCompleted: the call ended with an output.
	StateCompleted JobState = "completed"
	// StateFailed: the call ended with an error.
	StateFailed JobState = "failed"
	// StateCancelled: the call was cancelled.
	StateCancelled JobState = "cancelled"
	// StateTimedOut: one of the call's clocks expired.
	StateTimedOut JobState = "timed_out"
	// StateDeclined: the caller declined the call, or never clearly approved it.
	StateDeclined JobState = "declined"
)

var jobStates = []JobState{
	StateAwaitingPermission, StatePending, StateDeferred,
	StateCompleted, StateFailed, StateCancelled, StateTimedOut, StateDeclined,
}

// Valid reports whether s is one of the job states of SPEC 5.
func (s JobState) Valid() bool { return oneOf(s, jobStates) }

// Enum lists the job states in SPEC order.
func (JobState) Enum() []any { return enumOf(jobStates) }

// Terminal reports whether s is a terminal state: completed, failed, cancelled, timed_out or
// declined.
func (s JobState) Terminal() bool {
	switch s {
	case StateCompleted, StateFailed, StateCancelled, StateTimedOut, StateDeclined:
		return true
	}
	return false
}

// CancelReason says why a tool_cancel was sent (SPEC 11).
type CancelReason string

// Reasons of tool_cancel (SPEC 11).
const (
	// CancelTimeout: the ordinary or the deferred timeout expired.
	CancelTimeout CancelReason = "timeout"
	// CancelDiscard: the session ended or the serving slot's resume window expired.
	CancelDiscard CancelReason = "discard"
	// CancelCallerRequest: the caller asked (cancel_job by the voice model, or job.cancel from a
	// caller connection).
	CancelCallerRequest CancelReason = "caller_request"
	// CancelAgentRequest: a text agent's cancel, or an MCP cancellation.
	CancelAgentRequest CancelReason = "agent_request"
	// CancelHostRequest: job.cancel from a host connection.
	CancelHostRequest CancelReason = "host_request"
	// CancelParentCancelled: the parent call of the call's conversation ended (SPEC 11).
	CancelParentCancelled CancelReason = "parent_cancelled"
)

var cancelReasons = []CancelReason{
	CancelTimeout, CancelDiscard, CancelCallerRequest, CancelAgentRequest, CancelHostRequest, CancelParentCancelled,
}

// Valid reports whether r is one of the tool_cancel reasons of SPEC 11.
func (r CancelReason) Valid() bool { return oneOf(r, cancelReasons) }

// Enum lists the cancel reasons in SPEC order.
func (CancelReason) Enum() []any { return enumOf(cancelReasons) }

// CancelResult is the outcome of a cancel request, reported by job.cancel_result (SPEC 5).
type CancelResult string

// Results of job.cancel_result (SPEC 5).
const (
	// CancelResultCancelled: the job was open and is now cancelled.
	CancelResultCancelled CancelResult = "cancelled"
	// CancelResultAlreadyDone: the job had already reached another terminal state.
	CancelResultAlreadyDone CancelResult = "already_done"
	// CancelResultAlreadyCanceled: the job had already been cancelled.
	CancelResultAlreadyCanceled CancelResult = "already_canceled"
	// CancelResultUnknownCall: no job of the session has that call id or handle.
	CancelResultUnknownCall CancelResult = "unknown_call"
)

var cancelResults = []CancelResult{
	CancelResultCancelled, CancelResultAlreadyDone, CancelResultAlreadyCanceled, CancelResultUnknownCall,
}

// Valid reports whether r is one of the job.cancel_result values of SPEC 5.
func (r CancelResult) Valid() bool { return oneOf(r, cancelResults) }

// Enum lists the cancel results in SPEC order.
func (CancelResult) Enum() []any { return enumOf(cancelResults) }

// DeferAckReason says why a tool_deferred was not accepted (SPEC 6).
type DeferAckReason string

// Reasons of a rejected tool_deferred_ack, in the order SPEC 6 checks them.
const (
	// AckInvalidHandle: the handle is empty, over 128 bytes, or has control characters.
	AckInvalidHandle DeferAckReason = "invalid_handle"
	// AckUnknownCall: no job of the session has that call id.
	AckUnknownCall DeferAckReason = "unknown_call"
	// AckCallNotPending: the job is not pending (already deferred, finished, awaiting permission).
	AckCallNotPending DeferAckReason = "call_not_pending"
	// AckNotDeferrable: the tool was not declared deferred.
	AckNotDeferrable DeferAckReason = "not_deferrable"
	// AckHandleReserved: the handle has the form of a broker call id.
	AckHandleReserved DeferAckReason = "handle_reserved"
	// AckHandleInUse: the handle is held by a live job.
	AckHandleInUse DeferAckReason = "handle_in_use"
	// AckHandleBurned: the handle was accepted before and its job has ended.
	AckHandleBurned DeferAckReason = "handle_burned"
)

var deferAckReasons = []DeferAckReason{
	AckInvalidHandle, AckUnknownCall, AckCallNotPending, AckNotDeferrable,
	AckHandleReserved, AckHandleInUse, AckHandleBurned,
}

// Valid reports whether r is one of the defer rejection reasons of SPEC 6.
func (r DeferAckReason) Valid() bool { return oneOf(r, deferAckReasons) }

// Enum lists the defer rejection reasons in SPEC order.
func (DeferAckReason) Enum() []any { return enumOf(deferAckReasons) }

// NarrationKind is what a narration voices (SPEC 8).
type NarrationKind string

// Kinds of tool_job_narration (SPEC 8).
const (
	// NarrationMilestone voices a tool_partial_result sent with reply: true.
	NarrationMilestone NarrationKind = "milestone"
	// NarrationInteraction voices an interaction ask (SPEC 9).
	NarrationInteraction NarrationKind = "interaction"
	// NarrationCompletion voices the outcome of a deferred job.
	NarrationCompletion NarrationKind = "completion"
)

var narrationKinds = []NarrationKind{NarrationMilestone, NarrationInteraction, NarrationCompletion}

// Valid reports whether k is one of the narration kinds of SPEC 8.
func (k NarrationKind) Valid() bool { return oneOf(k, narrationKinds) }

// Enum lists the narration kinds in SPEC order.
func (NarrationKind) Enum() []any { return enumOf(narrationKinds) }

// NarrationState is a step of a narration's lifecycle (SPEC 8): queued → speaking →
// delivered | interrupted | failed, or queued → skipped | stopped, or speaking → stopped.
type NarrationState string

// States of tool_job_narration (SPEC 8).
const (
	// NarrationQueued: the item waits for a free floor.
	NarrationQueued NarrationState = "queued"
	// NarrationSpeaking: the model response voicing it has started.
	NarrationSpeaking NarrationState = "speaking"
	// NarrationDelivered: audible speech for it reached the caller.
	NarrationDelivered NarrationState = "delivered"
	// NarrationInterrupted: the caller barged in while it was spoken.
	NarrationInterrupted NarrationState = "interrupted"
	// NarrationSkipped: it was dropped unspoken (replaced, or no free floor in time).
	NarrationSkipped NarrationState = "skipped"
	// NarrationStopped: it was withdrawn because its subject became moot.
	NarrationStopped NarrationState = "stopped"
	// NarrationFailed: its response ended with no audible speech.
	NarrationFailed NarrationState = "failed"
)

var narrationStates = []NarrationState{
	NarrationQueued, NarrationSpeaking, NarrationDelivered, NarrationInterrupted,
	NarrationSkipped, NarrationStopped, NarrationFailed,
}

// Valid reports whether s is one of the narration states of SPEC 8.
func (s NarrationState) Valid() bool { return oneOf(s, narrationStates) }

// Enum lists the narration states in SPEC order.
func (NarrationState) Enum() []any { return enumOf(narrationStates) }

// DeliveryFailureReason says why a completion could not be voiced (SPEC 8): the reason of the
// last failed attempt.
type DeliveryFailureReason string

// Reasons of tool_job_delivery_failed (SPEC 8).
const (
	// DeliveryNoAudibleSpeech: the response produced no audible speech.
	DeliveryNoAudibleSpeech DeliveryFailureReason = "no_audible_speech"
	// DeliveryModelError: the model failed the response.
	DeliveryModelError DeliveryFailureReason = "model_error"
	// DeliverySessionEnded: the session ended before the completion was voiced.
	DeliverySessionEnded DeliveryFailureReason = "session_ended"
	// DeliveryFloorTimeout: no free floor within narration_max_wait_ms.
	DeliveryFloorTimeout DeliveryFailureReason = "floor_timeout"
)

var deliveryFailureReasons = []DeliveryFailureReason{
	DeliveryNoAudibleSpeech, DeliveryModelError, DeliverySessionEnded, DeliveryFloorTimeout,
}

// Valid reports whether r is one of the delivery failure reasons of SPEC 8.
func (r DeliveryFailureReason) Valid() bool { return oneOf(r, deliveryFailureReasons) }

// Enum lists the delivery failure reasons in SPEC order.
func (DeliveryFailureReason) Enum() []any { return enumOf(deliveryFailureReasons) }

// InteractionState is how a host closes an interaction with tool_interaction_update (SPEC 9).
type InteractionState string

// States a host may set with tool_interaction_update (SPEC 9).
const (
	// InteractionResolved: the host settled the question itself.
	InteractionResolved InteractionState = "resolved"
	// InteractionCancelled: the question no longer applies.
	InteractionCancelled InteractionState = "cancelled"
	// InteractionSuperseded: a newer interaction replaces it.
	InteractionSuperseded InteractionState = "superseded"
)

var interactionStates = []InteractionState{InteractionResolved, InteractionCancelled, InteractionSuperseded}

// Valid reports whether s is one of the update states of SPEC 9.
func (s InteractionState) Valid() bool { return oneOf(s, interactionStates) }

// Enum lists the interaction update states in SPEC order.
func (InteractionState) Enum() []any { return enumOf(interactionStates) }

// InteractionUpdateResult is the deterministic outcome of a tool_interaction_update (SPEC 9).
type InteractionUpdateResult string

// Results of tool_interaction_update_ack (SPEC 9).
const (
	// UpdateApplied: the interaction was open and is now closed.
	UpdateApplied InteractionUpdateResult = "applied"
	// UpdateAlreadyClosed: the interaction had already been closed.
	UpdateAlreadyClosed InteractionUpdateResult = "already_closed"
	// UpdateUnknownInteraction: the job has no interaction with that id.
	UpdateUnknownInteraction InteractionUpdateResult = "unknown_interaction"
)

var interactionUpdateResults = []InteractionUpdateResult{UpdateApplied, UpdateAlreadyClosed, UpdateUnknownInteraction}

// Valid reports whether r is one of the update results of SPEC 9.
func (r InteractionUpdateResult) Valid() bool { return oneOf(r, interactionUpdateResults) }

// Enum lists the interaction update results in SPEC order.
func (InteractionUpdateResult) Enum() []any { return enumOf(interactionUpdateResults) }

// EndReason says why a session ended, in session.ended (SPEC 3.6).
type EndReason string

// Reasons of session.ended (SPEC 3.6).
const (
	// EndReasonEnded: a participant sent session.end, or the broker shut down with the memory store.
	EndReasonEnded EndReason = "ended"
	// EndReasonHungUp: the caller hung up explicitly.
	EndReasonHungUp EndReason = "hung_up"
	// EndReasonResumeExpired: no connection was attached for the whole resume window.
	EndReasonResumeExpired EndReason = "resume_expired"
)

var endReasons = []EndReason{EndReasonEnded, EndReasonHungUp, EndReasonResumeExpired}

// Valid reports whether r is one of the session.ended reasons of SPEC 3.6.
func (r EndReason) Valid() bool { return oneOf(r, endReasons) }

// Enum lists the end reasons in SPEC order.
func (EndReason) Enum() []any { return enumOf(endReasons) }

// ToolResultKind is the kind of an agent.tool_result (SPEC 13).
type ToolResultKind string

// Kinds of agent.tool_result (SPEC 13).
const (
	// ResultKindResult: a successful result; content is the rendered output.
	ResultKindResult ToolResultKind = "result"
	// ResultKindBackgroundPlaceholder: the call went to the background.
	ResultKindBackgroundPlaceholder ToolResultKind = "background_placeholder"
	// ResultKindError: the content has an error header.
	ResultKindError ToolResultKind = "error"
)

var toolResultKinds = []ToolResultKind{ResultKindResult, ResultKindBackgroundPlaceholder, ResultKindError}

// Valid reports whether k is one of the agent.tool_result kinds of SPEC 13.
func (k ToolResultKind) Valid() bool { return oneOf(k, toolResultKinds) }

// Enum lists the result kinds in SPEC order.
func (ToolResultKind) Enum() []any { return enumOf(toolResultKinds) }

// ExpectedDuration tells the agent how long a tool usually takes, so it phrases hand-offs
// accordingly (SPEC 4).
type ExpectedDuration string

// Values of ToolDecl.ExpectedDuration (SPEC 4).
const (
	// ExpectInstant: answers at once.
	ExpectInstant ExpectedDuration = "instant"
	// ExpectSeconds: takes seconds.
	ExpectSeconds ExpectedDuration = "seconds"
	// ExpectMinutes: takes minutes.
	ExpectMinutes ExpectedDuration = "minutes"
	// ExpectHours: takes hours.
	ExpectHours ExpectedDuration = "hours"
)

var expectedDurations = []ExpectedDuration{ExpectInstant, ExpectSeconds, ExpectMinutes, ExpectHours}

// Valid reports whether d is one of the expected durations of SPEC 4.
func (d ExpectedDuration) Valid() bool { return oneOf(d, expectedDurations) }

// Enum lists the expected durations in SPEC order.
func (ExpectedDuration) Enum() []any { return enumOf(expectedDurations) }

// oneOf reports whether v is in values.
func oneOf[T ~string](v T, values []T) bool {
	for _, x := range values {
		if v == x {
			return true
		}
	}
	return false
}

// enumOf returns values as plain strings in a []any (the shape JSON Schema tools expect).
func enumOf[T ~string](values []T) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// enumList renders values as "a, b, c" for error messages.
func enumList[T ~string](values []T) string {
	n := 0
	for _, v := range values {
		n += len(v) + 2
	}
	b := make([]byte, 0, n)
	for i, v := range values {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, v...)
	}
	return string(b)
}
