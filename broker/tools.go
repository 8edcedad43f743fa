package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/backchannel-io/backchannel/jobs"
)

// Tool is a validated tool declaration (SPEC 4) with its compiled parameters schema.
type Tool struct {
	Decl   frames.ToolDecl
	Job    jobs.Tool // the clocks and flags a job of this tool runs with
	schema *jsonschema.Schema
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// reservedNames are the built-in tools (SPEC 4, 11, 13).
var reservedNames = map[string]bool{"wait": true, "cancel": true, "status": true, "cancel_job": true}

// declError is a rejected declaration: bad_frame naming the tool and field, or limit_exceeded.
func declError(code frames.Code, format string, args ...any) *frames.Error {
	return frames.Errorf(code, format, args...)
}

// compileTools validates a declaration and compiles every tool (SPEC 4). Nothing of a
// rejected declaration is applied.
func compileTools(decls []frames.ToolDecl) (map[string]*Tool, []string, *frames.Error) {
	out := make(map[string]*Tool, len(decls))
	names := make([]string, 0, len(decls))
	for i, d := range decls {
		if !toolName.MatchString(d.Name) {
			return nil, nil, declError(frames.CodeBadFrame, "tools[%d]: field name must match ^[a-zA-Z0-9_-]{1,64}$", i)
		}
		where := fmt.Sprintf("tools[%d] (tool %q)", i, d.Name)
		if reservedNames[d.Name] {
			return nil, nil, declError(frames.CodeBadFrame, "%s: field name %q is reserved for a built-in tool", where, d.Name)
		}
		if _, dup := out[d.Name]; dup {
			return nil, nil, declError(frames.CodeBadFrame, "%s: field name %q is declared twice", where, d.Name)
		}
		t, err := compileTool(d)
		if err != "" {
			return nil, nil, declError(frames.CodeBadFrame, "%s: %s", where, err)
		}
		out[d.Name] = t
		names = append(names, d.Name)
	}
	return out, names, nil
}

func compileTool(d frames.ToolDecl) (*Tool, string) {
	timeout := d.Timeout.Std()
	if timeout > jobs.MaxTimeout {
		return nil, "field timeout must be at most 120s"
	}
	dt := d.DeferredTimeout.Std()
	if dt > jobs.MaxDeferredTimeout {
		return nil, "field deferred_timeout must be at most 24h"
	}
	if d.DeferredTimeout != 0 && !d.Deferred {
		return nil, "field deferred_timeout needs deferred: true"
	}
	schema, err := compileSchema(d.Parameters)
	if err != nil {
		return nil, "field parameters is not a valid JSON Schema: " + oneLine(err.Error())
	}
	if timeout == 0 {
		timeout = jobs.DefaultTimeout
	}
	if dt == 0 {
		dt = jobs.DefaultDeferredTimeout
	}
	return &Tool{Decl: d, schema: schema, Job: jobs.Tool{
		Name: d.Name, Timeout: timeout, Deferred: d.Deferred, DeferredTimeout: dt,
		RequiresPermission: d.RequiresPermission, NotifyOnComplete: d.NotifiesOnComplete(),
		ExpectedDuration: string(d.ExpectedDuration),
	}}, ""
}

// schemaCache shares compiled parameter schemas between the sessions that declare the same
// tools (a compiled schema is immutable and safe for concurrent validation).
var schemaCache sync.Map // compact schema text → *jsonschema.Schema

// maxCachedSchemas bounds the cache; past it schemas are compiled per declaration.
const maxCachedSchemas = 4096

var cachedSchemas atomic.Int64

func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	var key bytes.Buffer
	if err := json.Compact(&key, raw); err == nil {
		if s, ok := schemaCache.Load(key.String()); ok {
			return s.(*jsonschema.Schema), nil
		}
	}
	s, err := compileSchemaText(raw)
	if err == nil && key.Len() > 0 && cachedSchemas.Load() < maxCachedSchemas {
		if _, loaded := schemaCache.LoadOrStore(key.String(), s); !loaded {
			cachedSchemas.Add(1)
		}
	}
	return s, err
}

func compileSchemaText(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(selfContained{})
	if err := c.AddResource("parameters.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("parameters.json")
}

// selfContained is the schema loader of tool parameters: it refuses every reference outside
// the declaration (the draft meta-schemas are built in). A declaration must never make the
// broker read a local file or fetch a URL — the default loader reads file: URLs, and a client
// could name /dev/zero or a secret.
type selfContained struct{}

// Load refuses url.
func (selfContained) Load(url string) (any, error) {
	return nil, fmt.Errorf("only references within parameters itself are allowed, not %s", url)
}

// checkArguments validates arguments against the tool's parameters. The message names the
// failing field, for the agent's error result (SPEC 4).
func (t *Tool) checkArguments(args json.RawMessage) string {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Sprintf("Invalid arguments for %s: not valid JSON", t.Decl.Name)
	}
	if err := t.schema.Validate(v); err != nil {
		return fmt.Sprintf("Invalid arguments for %s: %s", t.Decl.Name, describeValidation(err))
	}
	return ""
}

// describeValidation renders a schema validation error on one line, naming each failing
// field by its JSON pointer.
func describeValidation(err error) string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return oneLine(err.Error())
	}
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			parts = append(parts, fmt.Sprintf("at %s: %s", loc, oneLine(e.ErrorKind.LocalizedString(englishPrinter))))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(parts, "; ")
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// timeoutMS is the ordinary timeout a tool_call announces.
func (t *Tool) timeoutMS() int64 { return t.Job.Timeout.Milliseconds() }

var englishPrinter = message.NewPrinter(language.English)
