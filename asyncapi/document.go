package asyncapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	reflector "github.com/swaggest/go-asyncapi/reflector/asyncapi-2.4.0"
	"github.com/swaggest/go-asyncapi/spec-2.4.0"
)

// document is the built document, made once per process.
var document = sync.OnceValues(func() ([]byte, error) { return build(frameSources) })

// Document returns the AsyncAPI 2.4.0 document of the Backchannel protocol as indented JSON:
// every frame of package frames as a message, on the channels of the roles that send and
// receive it. The bytes are the same on every call and in every process (docs/asyncapi.json
// is a copy); the document is built on the first call and each call returns a fresh copy. The
// broker serves it at /asyncapi.json.
func Document() ([]byte, error) {
	b, err := document()
	if err != nil {
		return nil, err
	}
	return bytes.Clone(b), nil
}

// build builds the document from the Go types of package frames and the texts of src.
func build(src sources) ([]byte, error) {
	r := reflector.Reflector{Schema: &spec.AsyncAPI{
		ID:                 documentID,
		Info:               info(),
		Servers:            servers(),
		DefaultContentType: "application/json",
		Tags:               roleTags(src),
	}}
	set, err := reflectSchemas(&r.Reflector, src)
	if err != nil {
		return nil, err
	}
	comps := r.SchemaEns().ComponentsEns()
	comps.Schemas = map[string]map[string]any{}
	for name, s := range set.defs {
		m, err := toMap(s)
		if err != nil {
			return nil, fmt.Errorf("asyncapi: schema %s: %w", name, err)
		}
		comps.Schemas[name] = m
	}
	comps.Messages = map[string]spec.Message{}
	for _, c := range channels() {
		for _, typ := range slices.Concat(c.sends, c.receives) {
			key := messageKey(c.name, typ)
			m, err := message(key, typ, set.refs[typ], src)
			if err != nil {
				return nil, fmt.Errorf("asyncapi: channel %s: %w", c.name, err)
			}
			comps.Messages[key] = m
		}
		r.SchemaEns().WithChannelsItem(c.name, channelItem(c))
	}
	b, err := json.MarshalIndent(r.SchemaEns(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("asyncapi: encode the document: %w", err)
	}
	return append(b, '\n'), nil
}

// toMap converts v to the generic JSON object the document's schema map holds.
func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}
