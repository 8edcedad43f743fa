package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
)

// The published Realtime event schemas (../shared/data/openai-realtime/events.schema.json,
// found through BACKCHANNEL_OPENAI_SCHEMA): every event the adapter sends must validate
// against #/$defs/RealtimeClientEvent, every event the simulator sends against
// #/$defs/RealtimeServerEvent — and each against the schema of its own type.

// schemaEnv names the schema file.
const schemaEnv = "BACKCHANNEL_OPENAI_SCHEMA"

// schemaRelative is where the schema lives relative to the repository root.
const schemaRelative = "../shared/data/openai-realtime/events.schema.json"

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

// loadSchemas compiles the schemas once, or fails the test saying how to provide them.
func loadSchemas(t testing.TB) *eventSchemas {
	t.Helper()
	schemasOnce.Do(func() { schemas, schemasErr = compileSchemas() })
	if schemasErr != nil {
		t.Fatalf("the OpenAI Realtime event schema is needed: %v", schemasErr)
	}
	return schemas
}

// schemaPath is BACKCHANNEL_OPENAI_SCHEMA — a relative value is taken relative to the working
// directory, then to the repository root (where .ci/run sets it) — or, when it is unset,
// ../shared/… relative to the repository root.
func schemaPath() (string, error) {
	root, rootErr := repoRoot()
	if p := os.Getenv(schemaEnv); p != "" {
		tried := []string{p}
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		if !filepath.IsAbs(p) && rootErr == nil {
			q := filepath.Join(root, p)
			if _, err := os.Stat(q); err == nil {
				return q, nil
			}
			tried = append(tried, q)
		}
		return "", fmt.Errorf("%s=%s, but no file is at %s", schemaEnv, p, strings.Join(tried, " or "))
	}
	if rootErr != nil {
		return "", fmt.Errorf("%s is not set and %v", schemaEnv, rootErr)
	}
	p := filepath.Join(root, schemaRelative)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is not set and %s (%s relative to the repository root) cannot be read: %v; set %s to the path of events.schema.json",
			schemaEnv, p, schemaRelative, err, schemaEnv)
	}
	return p, nil
}

// repoRoot is the nearest directory above the working directory with a go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("there is no go.mod above the working directory; set %s to the path of events.schema.json", schemaEnv)
		}
		dir = parent
	}
}

func compileSchemas() (*eventSchemas, error) {
	p, err := schemaPath()
	if err != nil {
		return nil, err
	}
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
