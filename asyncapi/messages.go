package asyncapi

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/swaggest/go-asyncapi/spec-2.4.0"
)

// messagesPrefix is where messages live in the document.
const messagesPrefix = "#/components/messages/"

// messageKey names the message of frame type typ on channel ch: "CHANNEL.TYPE", also its
// messageId. A frame type that travels on several channels has one message on each, all with
// the same payload schema and texts: the AsyncAPI parser rejects a messageId used by two
// operations (asyncapi/parser-js#793, asyncapi/spec#946) and warns about a message without one,
// so a message cannot be shared between operations.
func messageKey(ch, typ string) string { return ch + "." + typ }

// messageRef returns the reference of the message named key.
func messageRef(key string) string { return messagesPrefix + key }

// message builds the message of frame type typ named key: its payload schema is payloadRef, its
// description the doc comment of the frame's Go type (led by the type string instead of the Go
// name), and its example the one of frames/testdata/examples.json. Its name is the frame type;
// the extension x-direction says who sends it: "client" or "broker" (frames.DirectionOf).
func message(key, typ, payloadRef string, src sources) (spec.Message, error) {
	f, ok := frames.New(typ)
	if !ok {
		return spec.Message{}, fmt.Errorf("asyncapi: unknown frame type %s", typ)
	}
	dir, _ := frames.DirectionOf(typ)
	goName := reflect.TypeOf(f).Elem().Name()
	doc, ok := src.Types[goName]
	if !ok {
		return spec.Message{}, fmt.Errorf("asyncapi: frames.%s (frame %s) has no doc comment", goName, typ)
	}
	example, ok := src.Examples[typ]
	if !ok {
		return spec.Message{}, fmt.Errorf("asyncapi: frames/testdata/examples.json has no example of %s", typ)
	}
	var payload any = json.RawMessage(example)
	desc := withWireName(doc, goName, typ)
	entity := spec.MessageEntity{
		MessageID:   key,
		Name:        typ,
		Summary:     firstSentence(desc),
		Description: desc,
		Payload:     map[string]any{"$ref": payloadRef},
		Examples: []spec.MessageOneOf1OneOf1ExamplesItems{
			{Name: typ, Summary: "An example " + typ + " frame.", Payload: &payload},
		},
		MapOfAnything: map[string]any{"x-direction": string(dir)},
	}
	var m spec.Message
	m.OneOf1Ens().WithMessageEntity(entity)
	return m, nil
}
