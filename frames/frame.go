package frames

import (
	"encoding/json"
	"reflect"
)

// Frame is one message of the Backchannel protocol: a JSON object whose "type" member is
// FrameType(). Every frame type of this package implements Frame on its value type, so both
// T and *T are Frames.
type Frame interface {
	// FrameType returns the wire type string, for example "tool_call".
	FrameType() string
}

// Validator is implemented by the frame types (and nested types) that have rules beyond field
// types and required fields: exactly-one-of pairs and enum values of client frames. Decode calls
// Validate after the fields are decoded, and Encode before rendering; the error is a *Error
// with code bad_frame naming the fields.
type Validator interface {
	// Validate returns a bad_frame *Error naming the fields when a rule is broken, else nil.
	Validate() error
}

// Direction tells who sends a frame type.
type Direction string

// Directions of a frame type.
const (
	// ClientToBroker frames are sent by hosts, callers and text agents.
	ClientToBroker Direction = "client"
	// BrokerToClient frames are sent by the broker.
	BrokerToClient Direction = "broker"
)

// MaxIDLen is the longest id, in bytes, a client frame may carry (SPEC 2).
const MaxIDLen = 64

// Request is embedded in every client → broker frame: the optional id that every broker frame
// answering it echoes as ref (SPEC 2).
type Request struct {
	// ID is the client's id for this frame, at most 64 bytes; answers carry it as ref.
	ID string `json:"id,omitempty"`
}

// RequestID returns the frame's id ("" when it has none), for the ref of its answer.
func (r Request) RequestID() string { return r.ID }

// Reply is embedded in every broker → client frame (SPEC 2).
type Reply struct {
	// Ref is the id of the client frame this frame answers, if it answers one.
	Ref string `json:"ref,omitempty"`
	// Seq numbers the frames sent to one connection slot, from 1, one by one; a reconnecting
	// client sends the last one it saw as last_seq. Every broker frame except welcome has one.
	Seq int64 `json:"seq,omitempty"`
}

// Sequenced reports whether broker frames of type typ carry seq (SPEC 2: every broker frame
// except welcome, which starts the connection).
func Sequenced(typ string) bool { return typ != "welcome" }

// registration is one entry of the frame registry.
type registration struct {
	typ    string
	dir    Direction
	goType reflect.Type
	info   *structInfo
	prefix []byte // `{"type":"TYPE"`, the start of every encoding
}

// registry lists every frame type: client → broker first, then broker → client, each in the
// order docs/spec.md introduces them. Types() returns this order.
var registry = func() []*registration {
	client := []Frame{
		Hello{}, ToolsDeclare{}, ToolDeferred{}, ToolProgress{}, ToolPartialResult{}, ToolResult{},
		JobCancel{}, ToolInteractionUpdate{}, Inject{}, SessionEnd{}, CallerText{},
		AgentToolCall{}, AgentTurnStart{}, AgentTurnEnd{}, AgentMessage{}, AgentLocalResult{},
		AgentInteractionAnswer{}, AgentFinal{}, ConversationCreate{}, ConversationCancel{},
	}
	broker := []Frame{
		Welcome{}, Error{}, ToolsDeclared{}, ToolCall{}, ToolDeferredAck{}, JobCancelResult{},
		ToolCancel{}, ToolJobNarration{}, ToolJobDeliveryFailed{}, ToolInteractionAnswer{},
		ToolInteractionUpdateAck{}, ToolDeferredResume{}, SessionEnded{}, Transcript{},
		AgentToolResult{}, AgentPrompt{}, AgentMessageCommitted{}, AgentLocalCancel{},
		ConversationCreated{},
	}
	var out []*registration
	add := func(dir Direction, fs []Frame) {
		for _, f := range fs {
			t := reflect.TypeOf(f)
			name, _ := json.Marshal(f.FrameType())
			out = append(out, &registration{
				typ:    f.FrameType(),
				dir:    dir,
				goType: t,
				info:   infoFor(t),
				prefix: append([]byte(`{"type":`), name...),
			})
		}
	}
	add(ClientToBroker, client)
	add(BrokerToClient, broker)
	return out
}()

// byType indexes registry by type string.
var byType = func() map[string]*registration {
	m := make(map[string]*registration, len(registry))
	for _, r := range registry {
		if m[r.typ] != nil {
			panic("frames: type registered twice: " + r.typ)
		}
		m[r.typ] = r
	}
	return m
}()

// Types lists every frame type string the package knows, client → broker types first, in a
// stable order. The slice is a fresh copy.
func Types() []string {
	out := make([]string, len(registry))
	for i, r := range registry {
		out[i] = r.typ
	}
	return out
}

// DirectionOf tells who sends frames of type typ; ok is false for an unknown type.
func DirectionOf(typ string) (d Direction, ok bool) {
	r := byType[typ]
	if r == nil {
		return "", false
	}
	return r.dir, true
}

// New returns a pointer to a new zero frame of type typ (for example *ToolCall for
// "tool_call"); ok is false for an unknown type.
func New(typ string) (f Frame, ok bool) {
	r := byType[typ]
	if r == nil {
		return nil, false
	}
	return reflect.New(r.goType).Interface().(Frame), true
}
