// Package openai is the model adapter for the OpenAI Realtime API (GA protocol) and any
// Realtime-compatible server (DESIGN: "The model boundary"; SPEC 8, 9, 11, 12).
//
// The adapter dials URL?model=MODEL over WebSocket with a bearer key and configures the
// session with G.711 µ-law audio both ways (caller audio passes through untranscoded), server
// VAD turn detection, input audio transcription, the instructions and the tools. The broker's
// commands become client events and the server's events become model.Events:
//
//   - CallerAudio → input_audio_buffer.append.
//   - CallerTurn → conversation.item.create (a user message) and response.create, sent together
//     when the response may go (turns that arrive while a response is active are not added ahead
//     of its output); a turn the model already heard as audio only gets a response.create when
//     the model did not answer it on its own.
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
// # Dropped connections
//
// A connection that drops — a read error, the server closing it, a write that fails or
// stalls — is redialled at once, then with exponential backoff and jitter
// (cenkalti/backoff: Options.ReconnectInterval doubling up to MaxReconnectInterval, ±50 %),
// for at most Options.ReconnectTimeout (2 minutes by default); an HTTP 4xx answer other than
// 408 and 429 (a bad key, model or URL) ends it at once. A connection that drops again within
// 10 seconds of being re-established goes on with the same backoff and bound, so a server
// that accepts and drops at once is not redialled in a tight loop. (A negative
// ReconnectTimeout turns redialling off: the drop is reported, the responses it cut off fail,
// and the model stays closed.) What the broker sees:
//
//   - Events.Error with an error wrapping ErrConnectionLost reports the drop (its message
//     ends with "; reconnecting").
//   - Caller speech the server's VAD reported started is reported stopped (the new session's
//     VAD starts afresh).
//   - Every response the drop cut off is reported failed, so that the broker's failure
//     contract counts it as a failed attempt (model_error) and retries completions:
//     ResponseDone(id, false, err) with err wrapping ErrConnectionLost, for the active
//     response and for every requested response that was queued or being created — Respond
//     returns those an id of the adapter's own (LostResponsePrefix) and they are reported
//     started and failed at once. Responses the adapter requested on its own (answers to
//     caller turns and tool results) that had not started are not requested again.
//   - On the new connection the Realtime session is restored before anything else is sent:
//     one session.update with formats, VAD with the current auto-respond setting,
//     transcription, instructions, voice and the current tools; a function_call item for every
//     call of the model still waiting for its output; and every context item set with
//     SetContext (the open-jobs list, pending decisions, progress notes…), in the order they
//     were set. The rest of the old conversation (turns, spoken responses, answered calls) is
//     not carried over.
//   - Events.Error with a *Reconnected (message "openai: reconnected …") reports the restored
//     connection: a notice on the broker's timeline, not a failure.
//   - When the bound passes, Events.Error with an error wrapping ErrConnectionLost reports
//     that the model gave up; it stays closed: waiting requests fail and later commands do
//     nothing.
//
// While the adapter reconnects: caller audio is dropped; Respond waits (bounded by
// RespondTimeout) and is sent on the new connection, or fails; caller turns and tool results
// wait and are passed on the new connection (a turn as a typed user message); SetContext,
// SetTools and SetAutoRespond change what the restore sends; Cancel has nothing to cancel.
// A ToolResult for a call made on the old connection answers the re-created call with a
// function_call_output; should the new conversation not hold the call (the server refused to
// re-create it), the output goes in as a system message naming the call instead of failing.
//
// Package sim is an in-process simulator of the Realtime server that the adapter is tested
// against.
package openai
