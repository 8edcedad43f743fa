package asyncapi

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// This file checks the message schemas against the examples of frames/testdata/examples.json
// with an independent JSON Schema validator.

// componentsURL is the resource the components of the document are compiled as.
const componentsURL = "urn:backchannel:asyncapi"

// payloadSchemas compiles the payload schema of every message of the document, keyed by message
// name (frame type) and then by message key.
func payloadSchemas(t *testing.T) map[string]map[string]*jsonschema.Schema {
	t.Helper()
	b, err := Document()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	comps := doc.(map[string]any)["components"].(map[string]any)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	if err := c.AddResource(componentsURL, map[string]any{"components": comps}); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]*jsonschema.Schema{}
	msgs := comps["messages"].(map[string]any)
	for _, key := range slices.Sorted(maps.Keys(msgs)) {
		name, _ := msgs[key].(map[string]any)["name"].(string)
		sch, err := c.Compile(componentsURL + "#/components/messages/" + key + "/payload")
		if err != nil {
			t.Fatalf("message %s: compile its payload schema: %v", key, err)
		}
		if out[name] == nil {
			out[name] = map[string]*jsonschema.Schema{}
		}
		out[name][key] = sch
	}
	return out
}

// frameExamples reads frames/testdata/examples.json.
func frameExamples(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(framesDir, "testdata", "examples.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ex map[string]json.RawMessage
	if err := json.Unmarshal(b, &ex); err != nil {
		t.Fatal(err)
	}
	return ex
}

// decodeAny decodes JSON as the validator expects it.
func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestExamplesValidate checks every example frame against the payload schema of each message
// of its type, and that package frames decodes it.
func TestExamplesValidate(t *testing.T) {
	schemas := payloadSchemas(t)
	examples := frameExamples(t)
	for _, typ := range frames.Types() {
		ex, ok := examples[typ]
		if !ok {
			t.Errorf("frames/testdata/examples.json has no example of %s", typ)
			continue
		}
		if len(schemas[typ]) == 0 {
			t.Errorf("no message of frame type %s", typ)
		}
		if _, err := frames.Decode(ex); err != nil {
			t.Errorf("frames.Decode rejects the example of %s: %v", typ, err)
		}
		for key, sch := range schemas[typ] {
			if err := sch.Validate(decodeAny(t, ex)); err != nil {
				t.Errorf("the example of %s does not validate against the payload of message %s: %v", typ, key, err)
			}
		}
	}
	for typ := range examples {
		if _, ok := frames.New(typ); !ok {
			t.Errorf("frames/testdata/examples.json has an example of unknown frame type %s", typ)
		}
	}
}

// TestSchemasRejectWhatDecodeRejects removes each required member from each example, and
// changes its type: the payload schema must reject the result, as frames.Decode does.
func TestSchemasRejectWhatDecodeRejects(t *testing.T) {
	schemas := payloadSchemas(t)
	doc := parsedDocument(t)
	defs := object(t, doc, "components/schemas")
	for typ, ex := range frameExamples(t) {
		for key, sch := range schemas[typ] {
			payload := object(t, doc, "components/messages/"+key+"/payload")
			ref, _ := payload["$ref"].(string)
			def := defs[ref[len(schemasPrefix):]].(jsonObject)
			required, _ := def["required"].([]any)
			if len(required) == 0 || required[0] != "type" {
				t.Errorf("message %s: type is not the first required member: %v", key, required)
			}
			for _, r := range required {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(ex, &m); err != nil {
					t.Fatal(err)
				}
				delete(m, r.(string))
				b, _ := json.Marshal(m)
				if err := sch.Validate(decodeAny(t, b)); err == nil {
					t.Errorf("message %s: the example without required %s validates", key, r)
				}
				if _, err := frames.Decode(b); err == nil {
					t.Errorf("frames.Decode accepts the example of %s without %s, which the schema requires", typ, r)
				}
			}
			var m map[string]any
			if err := json.Unmarshal(ex, &m); err != nil {
				t.Fatal(err)
			}
			m["type"] = "not_" + typ
			b, _ := json.Marshal(m)
			if err := sch.Validate(decodeAny(t, b)); err == nil {
				t.Errorf("message %s: the example with type %q validates", key, m["type"])
			}
		}
	}
}
