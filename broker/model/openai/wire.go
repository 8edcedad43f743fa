package openai

import "encoding/json"

// The Realtime (GA) events the adapter speaks, written out by hand (the names and fields of
// testdata/openai-realtime/events.schema.json, from OpenAI's published OpenAPI document) rather
// than imported from openai-go.

// Client event types.
const (
	evSessionUpdate  = "session.update"
	evAudioAppend    = "input_audio_buffer.append"
	evItemCreate     = "conversation.item.create"
	evItemDelete     = "conversation.item.delete"
	evItemTruncate   = "conversation.item.truncate"
	evResponseCreate = "response.create"
	evResponseCancel = "response.cancel"
)

// Server event types.
const (
	evSessionCreated         = "session.created"
	evSessionUpdated         = "session.updated"
	evError                  = "error"
	evSpeechStarted          = "input_audio_buffer.speech_started"
	evSpeechStopped          = "input_audio_buffer.speech_stopped"
	evCommitted              = "input_audio_buffer.committed"
	evTranscriptionDelta     = "conversation.item.input_audio_transcription.delta"
	evTranscriptionCompleted = "conversation.item.input_audio_transcription.completed"
	evTranscriptionFailed    = "conversation.item.input_audio_transcription.failed"
	evResponseCreated        = "response.created"
	evResponseDone           = "response.done"
	evAudioDelta             = "response.output_audio.delta"
	evAudioTranscriptDelta   = "response.output_audio_transcript.delta"
	evAudioTranscriptDone    = "response.output_audio_transcript.done"
	evFunctionCallArgsDone   = "response.function_call_arguments.done"
)

// Values of fields.
const (
	sessionTypeRealtime       = "realtime"
	formatPCMU                = "audio/pcmu"
	outputModalityAudio       = "audio"
	turnDetectionServerVAD    = "server_vad"
	toolTypeFunction          = "function"
	toolChoiceAuto            = "auto"
	toolChoiceNone            = "none"
	itemTypeMessage           = "message"
	itemTypeFunctionCall      = "function_call"
	itemTypeFunctionCallOut   = "function_call_output"
	contentTypeInputText      = "input_text"
	roleUser                  = "user"
	roleSystem                = "system"
	responseStatusCancelled   = "cancelled"
	responseStatusFailed      = "failed"
	codeActiveResponse        = "conversation_already_has_active_response"
	defaultToolParametersJSON = `{"type":"object","properties":{}}`
)

// sessionUpdate is session.update.
type sessionUpdate struct {
	Type    string        `json:"type"`
	EventID string        `json:"event_id,omitempty"`
	Session sessionConfig `json:"session"`
}

// sessionConfig is the session object of session.update (RealtimeSessionCreateRequestGA).
type sessionConfig struct {
	Type             string          `json:"type"`
	OutputModalities []string        `json:"output_modalities,omitempty"`
	Instructions     string          `json:"instructions,omitempty"`
	Audio            *audioConfig    `json:"audio,omitempty"`
	Tools            *[]functionTool `json:"tools,omitempty"`
	ToolChoice       string          `json:"tool_choice,omitempty"`
}

type audioConfig struct {
	Input  *audioInput  `json:"input,omitempty"`
	Output *audioOutput `json:"output,omitempty"`
}

type audioInput struct {
	Format        *audioFormat   `json:"format,omitempty"`
	Transcription *transcription `json:"transcription,omitempty"`
	TurnDetection *turnDetection `json:"turn_detection,omitempty"`
}

type audioOutput struct {
	Format *audioFormat `json:"format,omitempty"`
	Voice  string       `json:"voice,omitempty"`
}

type audioFormat struct {
	Type string `json:"type"`
}

type transcription struct {
	Model string `json:"model,omitempty"`
}

type turnDetection struct {
	Type              string `json:"type"`
	CreateResponse    bool   `json:"create_response"`
	InterruptResponse bool   `json:"interrupt_response"`
}

type functionTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// audioAppend is input_audio_buffer.append.
type audioAppend struct {
	Type  string `json:"type"`
	Audio string `json:"audio"`
}

// itemCreate is conversation.item.create.
type itemCreate struct {
	Type    string `json:"type"`
	EventID string `json:"event_id,omitempty"`
	Item    any    `json:"item"`
}

// messageItem is a user or system message item.
type messageItem struct {
	ID      string        `json:"id,omitempty"`
	Type    string        `json:"type"`
	Role    string        `json:"role"`
	Content []contentPart `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// functionCallOutputItem is a function_call_output item.
type functionCallOutputItem struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

// functionCallItem is a function_call item (a call of the model, re-created on a new
// connection).
type functionCallItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// itemDelete is conversation.item.delete.
type itemDelete struct {
	Type    string `json:"type"`
	EventID string `json:"event_id,omitempty"`
	ItemID  string `json:"item_id"`
}

// itemTruncate is conversation.item.truncate.
type itemTruncate struct {
	Type         string `json:"type"`
	EventID      string `json:"event_id,omitempty"`
	ItemID       string `json:"item_id"`
	ContentIndex int    `json:"content_index"`
	AudioEndMS   int64  `json:"audio_end_ms"`
}

// responseCreate is response.create.
type responseCreate struct {
	Type     string          `json:"type"`
	EventID  string          `json:"event_id,omitempty"`
	Response *responseParams `json:"response,omitempty"`
}

// responseParams are the parameters of response.create (RealtimeResponseCreateParams).
type responseParams struct {
	Instructions string            `json:"instructions,omitempty"`
	ToolChoice   string            `json:"tool_choice,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
}

// responseCancel is response.cancel.
type responseCancel struct {
	Type       string `json:"type"`
	EventID    string `json:"event_id,omitempty"`
	ResponseID string `json:"response_id,omitempty"`
}

// serverEvent holds the fields of every server event the adapter reads.
type serverEvent struct {
	Type         string          `json:"type"`
	EventID      string          `json:"event_id"`
	ItemID       string          `json:"item_id"`
	ResponseID   string          `json:"response_id"`
	ContentIndex int             `json:"content_index"`
	Delta        string          `json:"delta"`
	Transcript   string          `json:"transcript"`
	CallID       string          `json:"call_id"`
	Name         string          `json:"name"`
	Arguments    string          `json:"arguments"`
	Response     *serverResponse `json:"response"`
	Error        *serverError    `json:"error"`
}

// audioDeltaEvent is response.output_audio.delta, the most frequent server event, decoded on
// its own: encoding/json decodes the base64 delta straight into the chunk's bytes.
type audioDeltaEvent struct {
	Type         string `json:"type"`
	ResponseID   string `json:"response_id"`
	ItemID       string `json:"item_id"`
	ContentIndex int    `json:"content_index"`
	Delta        []byte `json:"delta"`
}

// audioDeltaType is how the type of response.output_audio.delta appears in its JSON.
var audioDeltaType = []byte(`"` + evAudioDelta + `"`)

// serverResponse is the response object of response.created / response.done.
type serverResponse struct {
	ID            string          `json:"id"`
	Status        string          `json:"status"`
	StatusDetails *statusDetails  `json:"status_details"`
	Metadata      json.RawMessage `json:"metadata"`
}

// metadata returns the value of key in the response's metadata ("" when absent or not a
// string).
func (r *serverResponse) metadata(key string) string {
	var m map[string]any
	if json.Unmarshal(r.Metadata, &m) != nil {
		return ""
	}
	s, _ := m[key].(string)
	return s
}

type statusDetails struct {
	Type   string `json:"type"`
	Reason string `json:"reason"`
	Error  *struct {
		Type string `json:"type"`
		Code string `json:"code"`
	} `json:"error"`
}

// serverError is the error object of an error event; EventID names the client event that
// caused it.
type serverError struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param"`
	EventID string `json:"event_id"`
}
