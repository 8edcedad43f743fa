package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
)

// The published Realtime event schemas (testdata/openai-realtime/events.schema.json: see the
// README beside it for its source and licence): every event the adapter sends must validate
// against #/$defs/RealtimeClientEvent, every event the simulator sends against
// #/$defs/RealtimeServerEvent — and each against the schema of its own type.

// schemaFile is the schema, relative to this package's directory (where go test runs).
const schemaFile = "testdata/openai-realtime/events.schema.json"

// eventSchemas are the compiled schemas.
type eventSchemas struct {
	path   string
	client *jsonschema.Schema
	server *jsonschema.Schema
	byType map[string]*jsonschema.Schema // "client:TYPE" / "server:TYPE" → the event's own schema
	doc    map[string]any
}

var (
	schemasOnce sync.Once
	schemas     *eventSchemas
	schemasErr  error
)

// loadSchemas compiles the schemas once, or fails the test.
func loadSchemas(t testing.TB) *eventSchemas {
	t.Helper()
	schemasOnce.Do(func() { schemas, schemasErr = compileSchemas() })
	if schemasErr != nil {
		t.Fatalf("the OpenAI Realtime event schema %s: %v", schemaFile, schemasErr)
	}
	return schemas
}

func compileSchemas() (*eventSchemas, error) {
	p := schemaFile
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	const url = "https://backchannel.invalid/events.schema.json"
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	s := &eventSchemas{path: p, byType: make(map[string]*jsonschema.Schema), doc: doc.(map[string]any)}
	if s.client, err = c.Compile(url + "#/$defs/RealtimeClientEvent"); err != nil {
		return nil, err
	}
	if s.server, err = c.Compile(url + "#/$defs/RealtimeServerEvent"); err != nil {
		return nil, err
	}
	for name, def := range s.defs() {
		side := ""
		switch {
		case strings.HasPrefix(name, "RealtimeClientEvent") && name != "RealtimeClientEvent":
			side = "client:"
		case strings.HasPrefix(name, "RealtimeServerEvent") && name != "RealtimeServerEvent":
			side = "server:"
		default:
			continue
		}
		typ := eventTypeOf(def)
		if typ == "" {
			continue
		}
		sch, err := c.Compile(url + "#/$defs/" + name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		s.byType[side+typ] = sch
	}
	return s, nil
}

func (s *eventSchemas) defs() map[string]any {
	defs, _ := s.doc["$defs"].(map[string]any)
	return defs
}

// eventTypeOf is the type an event schema fixes (its properties.type.enum[0]).
func eventTypeOf(def any) string {
	d, _ := def.(map[string]any)
	props, _ := d["properties"].(map[string]any)
	typ, _ := props["type"].(map[string]any)
	enum, _ := typ["enum"].([]any)
	if len(enum) != 1 {
		return ""
	}
	s, _ := enum[0].(string)
	return s
}

// validate checks one event against the union of its side and the schema of its own type.
func (s *eventSchemas) validate(dir sim.Direction, raw []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &head)
	union, side := s.server, "server:"
	if dir == sim.ClientToServer {
		union, side = s.client, "client:"
	}
	own := s.byType[side+head.Type]
	if own == nil {
		return fmt.Errorf("%q is not a %s event of the schema", head.Type, strings.TrimSuffix(side, ":"))
	}
	if err := own.Validate(v); err != nil {
		return err
	}
	return union.Validate(v)
}

// checkEvents validates every event the simulator saw, both ways.
func checkEvents(t testing.TB, events []sim.Event) {
	t.Helper()
	s := loadSchemas(t)
	for i, e := range events {
		if err := s.validate(e.Dir, e.Raw); err != nil {
			t.Errorf("event %d (%s %s) does not conform to %s: %v\n%s", i, e.Dir, e.Type, s.path, err, clipForLog(e.Raw))
		}
	}
}

func clipForLog(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}
