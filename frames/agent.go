package frames

import "encoding/json"

// This file holds the frames of text agents (SPEC 13): tool calls, turns, messages between
// conversations, local calls, and conversations for sub-agents.

// AgentToolCall is a text agent's tool call (SPEC 13): of a host tool, of a built-in (wait,
// cancel, status), or a local call the agent runs itself. It is answered by agent.tool_result,
// possibly first with a background placeholder.
type AgentToolCall struct {
	Request
	// CallID is the agent's own id for the call, unique within its conversation.
	CallID string `json:"call_id" required:"true"`
	// ConversationID is the conversation making the call.
	ConversationID string `json:"conversation_id" required:"true"`
	// Name is the tool called.
	Name string `json:"name" required:"true"`
	// Arguments are the call's arguments.
	Arguments json.RawMessage `json:"arguments" required:"true"`
	// Local marks a call the agent harness runs itself and reports with agent.local_result.
	Local bool `json:"local,omitempty"`
}

// FrameType returns "agent.tool_call".
func (AgentToolCall) FrameType() string { return "agent.tool_call" }

// AgentTurnStart tells the broker a conversation's turn has begun (SPEC 13): prompts queue until
// its end.
type AgentTurnStart struct {
	Request
	// ConversationID is the conversation whose turn begins.
	ConversationID string `json:"conversation_id" required:"true"`
}

// FrameType returns "agent.turn_start".
func (AgentTurnStart) FrameType() string { return "agent.turn_start" }

// AgentTurnEnd tells the broker a conversation's turn has ended (SPEC 13): the conversation is
// idle and queued prompts are delivered.
type AgentTurnEnd struct {
	Request
	// ConversationID is the conversation whose turn ends.
	ConversationID string `json:"conversation_id" required:"true"`
}

// FrameType returns "agent.turn_end".
func (AgentTurnEnd) FrameType() string { return "agent.turn_end" }

// AgentMessage sends text from one conversation to another (SPEC 13). It is answered by
// agent.message_committed and reaches the target as the prompt "Message from CONVERSATION_ID:".
type AgentMessage struct {
	Request
	// ConversationID is the sending conversation.
	ConversationID string `json:"conversation_id" required:"true"`
	// ToConversationID is the target conversation.
	ToConversationID string `json:"to_conversation_id" required:"true"`
	// Text is the message.
	Text string `json:"text" required:"true"`
}

// FrameType returns "agent.message".
func (AgentMessage) FrameType() string { return "agent.message" }

// AgentLocalResult reports the outcome of a local call (SPEC 13) with exactly one of output and
// error (a JSON null output counts as absent, and so does an empty error).
type AgentLocalResult struct {
	Request
	// CallID is the agent's id of the local call.
	CallID string `json:"call_id" required:"true"`
	// ConversationID is the conversation that made the call.
	ConversationID string `json:"conversation_id" required:"true"`
	// Output is the call's result: any JSON value.
	Output json.RawMessage `json:"output,omitempty"`
	// Error is the failure message.
	Error string `json:"error,omitempty"`
}

// FrameType returns "agent.local_result".
func (AgentLocalResult) FrameType() string { return "agent.local_result" }

// Validate checks that exactly one of output and error is set.
func (f AgentLocalResult) Validate() error {
	return exactlyOne("output", present(f.Output), "error", f.Error != "")
}

// AgentInteractionAnswer is a text agent's answer to an interaction prompt of its conversation
// (SPEC 9), matched against the options as a caller's reply would be.
type AgentInteractionAnswer struct {
	Request
	// ConversationID is the answering conversation.
	ConversationID string `json:"conversation_id" required:"true"`
	// InteractionID is the interaction answered.
	InteractionID string `json:"interaction_id" required:"true"`
	// Option is the option chosen.
	Option string `json:"option,omitempty"`
	// Text is the answer.
	Text string `json:"text" required:"true"`
}

// FrameType returns "agent.interaction_answer".
func (AgentInteractionAnswer) FrameType() string { return "agent.interaction_answer" }

// AgentFinal is a child conversation's final response (SPEC 13); it reaches the watching parent
// as the prompt "Watched agent CONVERSATION_ID final response:".
type AgentFinal struct {
	Request
	// ConversationID is the conversation giving its final response.
	ConversationID string `json:"conversation_id" required:"true"`
	// Text is the final response.
	Text string `json:"text" required:"true"`
}

// FrameType returns "agent.final".
func (AgentFinal) FrameType() string { return "agent.final" }

// ConversationCreate creates a child conversation for a sub-agent (SPEC 13), optionally tied to
// the parent's call that stands for the sub-agent; answered by conversation.created.
type ConversationCreate struct {
	Request
	// ParentConversationID is the conversation that watches the new one.
	ParentConversationID string `json:"parent_conversation_id" required:"true"`
	// ParentCallID is the parent's call that stands for the sub-agent: when it is cancelled or
	// times out, the child's calls are cancelled too (SPEC 11).
	ParentCallID string `json:"parent_call_id,omitempty"`
}

// FrameType returns "conversation.create".
func (ConversationCreate) FrameType() string { return "conversation.create" }

// ConversationCancel cancels a child conversation (SPEC 11 and 13): every open call of it and of
// its descendants closes with reason parent_cancelled.
type ConversationCancel struct {
	Request
	// ConversationID is the conversation to cancel.
	ConversationID string `json:"conversation_id" required:"true"`
}

// FrameType returns "conversation.cancel".
func (ConversationCancel) FrameType() string { return "conversation.cancel" }

// AgentToolResult answers an agent.tool_call (SPEC 13) with content in the result text format:
// header lines, then an empty line and the body. kind is error exactly when the content has an
// error header, and background_placeholder when the call went to the background.
type AgentToolResult struct {
	Reply
	// CallID is the agent's id of the call answered.
	CallID string `json:"call_id" required:"true"`
	// Kind is result, background_placeholder or error.
	Kind ToolResultKind `json:"kind" required:"true"`
	// Content is the result text.
	Content string `json:"content" required:"true"`
}

// FrameType returns "agent.tool_result".
func (AgentToolResult) FrameType() string { return "agent.tool_result" }

// AgentPrompt delivers a prompt to an idle conversation (SPEC 13): a completion notice, a
// message, a watched child's status or final response, an interaction, or a reminder.
type AgentPrompt struct {
	Reply
	// PromptID identifies the prompt.
	PromptID string `json:"prompt_id" required:"true"`
	// ConversationID is the conversation the prompt is for.
	ConversationID string `json:"conversation_id" required:"true"`
	// Internal marks a prompt generated by the broker rather than sent by someone. Always present.
	Internal bool `json:"internal" required:"true"`
	// Text is the prompt.
	Text string `json:"text" required:"true"`
}

// FrameType returns "agent.prompt".
func (AgentPrompt) FrameType() string { return "agent.prompt" }

// AgentMessageCommitted answers agent.message (SPEC 13): the message was delivered to the
// target's queue (not a promise of a response).
type AgentMessageCommitted struct {
	Reply
	// MessageID identifies the committed message.
	MessageID string `json:"message_id" required:"true"`
}

// FrameType returns "agent.message_committed".
func (AgentMessageCommitted) FrameType() string { return "agent.message_committed" }

// AgentLocalCancel passes the cancellation of a local call to the agent that runs it (SPEC 13).
type AgentLocalCancel struct {
	Reply
	// CallID is the agent's id of the local call.
	CallID string `json:"call_id" required:"true"`
	// ConversationID is the conversation that made the call.
	ConversationID string `json:"conversation_id" required:"true"`
}

// FrameType returns "agent.local_cancel".
func (AgentLocalCancel) FrameType() string { return "agent.local_cancel" }

// ConversationCreated answers conversation.create with the new conversation's id (SPEC 13).
type ConversationCreated struct {
	Reply
	// ConversationID is the id of the new child conversation.
	ConversationID string `json:"conversation_id" required:"true"`
}

// FrameType returns "conversation.created".
func (ConversationCreated) FrameType() string { return "conversation.created" }
