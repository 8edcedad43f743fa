// Package openai is the model adapter for the OpenAI Realtime API (GA protocol) and any
// Realtime-compatible server (DESIGN: "The model boundary"; SPEC 8, 9, 11, 12).
//
// The adapter dials URL?model=MODEL over WebSocket with a bearer key and configures the
// session with G.711 µ-law audio both ways (caller audio passes through untranscoded), server
// VAD turn detection, input audio transcription, the instructions and the tools. The broker's
// commands become client events and the server's events become model.Events:
//
//   - CallerAudio → input_audio_buffer.append.
//   - CallerTurn → conversation.item.create (a user message) and response.create; a turn the
//     model already heard as audio only gets a response.create when the model did not answer
//     it on its own.
//   - SetContext → a system message per context ID (the previous one is deleted).
//   - Respond → response.create with instructions to voice exactly the request and metadata
//     naming it; it returns the id of response.created.
//   - Cancel → response.cancel and conversation.item.truncate at the estimated played length.
//   - ToolResult → a function_call_output item, and response.create when the model is to speak.
//   - SetTools / SetAutoRespond → session.update (tools / turn_detection.create_response).
//
// Only one response may be active in the default conversation: the adapter keeps one queue of
// response.create requests and sends the next one only after the active response is done, so
// conversation_already_has_active_response is never provoked by the adapter itself; when the
// server starts a response of its own at the same moment, the clashing request is sent again
// after that response ends.
//
// A requested response's instructions repeat the session's (they replace them for that
// response), say what to voice, and end with the line `Say something like: "…"` holding the
// sentence the scripted model would say (SPEC 19): a language model takes it as a suggestion,
// the simulator says it as it is. Its metadata names the request (MetaRequest, MetaKind,
// MetaLabel, MetaName, then the Request's own Metadata, within the Realtime limits); the
// adapter matches response.created to its request by MetaRequest, so the server must echo
// response metadata, as OpenAI's does.
//
// Barge-in truncates the spoken item at an estimate of what the caller heard: the time since
// the response's first audio chunk (the broker plays agent audio in real time as it arrives),
// at most the audio received.
//
// The connection lives with the session and is not re-established: a dropped connection is
// reported with Events.Error and later commands do nothing.
//
// Package sim is an in-process simulator of the Realtime server that the adapter is tested
// against.
package openai
