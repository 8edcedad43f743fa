// Package model is the boundary between the broker and a conversational voice model (DESIGN:
// "The model boundary"): the commands the broker gives a model and the events a model reports,
// nothing more. Adapters: package scripted (the deterministic local model of SPEC 19) and
// package openai (an OpenAI-Realtime-compatible server).
package model

import (
	"context"
	"encoding/json"
)

// Model is one session's conversational voice model. Commands never block on the model's
// speech: what it says arrives as events. Implementations are safe for concurrent use.
type Model interface {
	// CallerAudio passes 20 ms of caller audio (G.711 µ-law, 8 kHz, mono). The chunk is the
	// broker's only during the call (its buffer is reused for a later packet): a model that
	// keeps it copies it.
	CallerAudio(chunk []byte)
	// CallerTurn passes a final caller turn that the broker did not consume itself. Clarify,
	// when set, says the turn was an unmatched answer to the open interaction with these
	// options: the agent asks the caller to choose one of them (SPEC 9).
	CallerTurn(text string, clarify []string)
	// SetContext adds or replaces (by ID) a silent context item: no response is requested.
	SetContext(item ContextItem)
	// Respond requests one response that voices exactly the request and returns its id.
	Respond(req Request) (responseID string, err error)
	// Cancel cancels a response (barge-in).
	Cancel(responseID string)
	// ToolResult answers a tool call of the model with its output (or, with isError, its error
	// message); with respond set the model speaks about it on its own (an instant result),
	// otherwise it is silent context (a hand-off, a cancel_job answer).
	ToolResult(callID, output string, isError, respond bool)
	// SetTools declares the tools the model may call (the host tools plus cancel_job).
	SetTools(tools []Tool)
	// SetAutoRespond turns the model's own responses to caller turns on or off (off while a
	// permission ask waits for its reply, which goes only to the verifier: SPEC 12).
	SetAutoRespond(on bool)
	// Close stops the model; no event follows.
	Close() error
}

// Tool is a tool declared to the model.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// ContextItem is a silent item of the model's context.
type ContextItem struct {
	ID   string // items with the same ID replace each other
	Text string
}

// Kind says what a requested response voices (SPEC 8, 12, 19).
type Kind string

// The kinds of requested responses.
const (
	HandOff        Kind = "hand_off"
	Milestone      Kind = "milestone"
	InteractionAsk Kind = "interaction"
	Completion     Kind = "completion"
	Inject         Kind = "inject"
	PermissionAsk  Kind = "permission_ask"
	Clarification  Kind = "clarification"
	Decline        Kind = "decline"
)

// Request is what a response must voice. The scripted model renders it with the sentences of
// SPEC 19; a language model is instructed with it.
type Request struct {
	Kind     Kind
	Label    string          // the status_label, or the tool name
	Name     string          // the tool name
	State    string          // completion: completed, failed or timed_out
	Output   json.RawMessage // completion: the output
	Error    string          // completion: the error
	Segment  json.RawMessage // milestone
	Prompt   string          // interaction ask
	Options  []string        // interaction ask
	Text     string          // inject
	Args     json.RawMessage // permission ask, clarification
	Metadata map[string]string
}

// Events receives what a model reports. Calls may come from the model's own goroutines; the
// receiver serializes them.
type Events interface {
	// SpeechStarted / SpeechStopped: the caller started or stopped speaking (the model's VAD).
	SpeechStarted()
	SpeechStopped()
	// CallerTranscript is the model's transcript of the caller (final or partial).
	CallerTranscript(text string, final bool)
	// ResponseStarted: a response began (requested, or the model's own).
	ResponseStarted(responseID string)
	// Audio is agent audio of a response: G.711 µ-law, 8 kHz, any length (the broker paces it).
	Audio(responseID string, chunk []byte)
	// Transcript is the text of a response's speech.
	Transcript(responseID, text string, final bool)
	// ResponseDone: the model finished producing a response; err is set when it failed.
	ResponseDone(responseID string, cancelled bool, err error)
	// ToolCall: the model calls a tool.
	ToolCall(callID, name string, arguments json.RawMessage)
	// Error reports a failure of the model connection itself.
	Error(err error)
}

// Factory starts a model for a session.
type Factory func(ctx context.Context, cfg Config, events Events) (Model, error)

// Config is what a session asks of its model (SPEC 3.1 ModelConfig).
type Config struct {
	Kind         string
	Instructions string
	Voice        string
}

// CancelJobTool is the built-in tool the voice agent cancels jobs with (SPEC 11).
var CancelJobTool = Tool{
	Name:        "cancel_job",
	Description: "Cancel a running job the caller asked to stop. ref is the job's handle or call id, as listed in the open jobs.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"ref":{"type":"string"}},"required":["ref"]}`),
}
