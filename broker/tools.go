package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

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

// compileTools validates a declaration and compiles every tool (SPEC 4), for a tool set that
// was accepted before (a parked session's, park.go): no tool count, and the schemas are shared
// through the cache at once. Nothing of a rejected declaration is applied.
func compileTools(decls []frames.ToolDecl) (map[string]*Tool, []string, *frames.Error) {
	p := prepareTools(decls, nil, 0)
	if p.err != nil {
		return nil, nil, p.err
	}
	p.publish()
	return p.tools, p.names, nil
}

// preparedTools is a declaration validated and compiled, not yet applied (declare applies
// it). A declaration that failed carries its error and nothing else.
type preparedTools struct {
	decls []frames.ToolDecl // the declaration it was made for (recognized by identity)
	tools map[string]*Tool
	names []string
	err   *frames.Error
	fresh []freshSchema // the schemas compiled for it, shared once it is applied
}

// freshSchema is a schema compiled for a declaration that the cache did not have.
type freshSchema struct {
	tool *Tool
	key  string // its compact text
	cost int64  // its estimated memory (schemaShape.cost)
}

// prepareTools validates and compiles a declaration (SPEC 2, 4) in three steps, so that the
// cheap checks come before the expensive ones: every tool's name, flags and parameters bounds;
// then the session's tool count, the names others declare plus this declaration's, against
// limit (0: not counted); only then the schemas, from the cache or compiled. The first failure
// is the declaration's error.
func prepareTools(decls []frames.ToolDecl, others map[string]bool, limit int) *preparedTools {
	p := &preparedTools{decls: decls, tools: make(map[string]*Tool, len(decls)), names: make([]string, 0, len(decls))}
	fail := func(e *frames.Error) *preparedTools { return &preparedTools{decls: decls, err: e} }
	shapes := make([]schemaShape, len(decls))
	for i, d := range decls {
		if !toolName.MatchString(d.Name) {
			return fail(declError(frames.CodeBadFrame, "tools[%d]: field name must match ^[a-zA-Z0-9_-]{1,64}$", i))
		}
		where := fmt.Sprintf("tools[%d] (tool %q)", i, d.Name)
		if reservedNames[d.Name] {
			return fail(declError(frames.CodeBadFrame, "%s: field name %q is reserved for a built-in tool", where, d.Name))
		}
		if _, dup := p.tools[d.Name]; dup {
			return fail(declError(frames.CodeBadFrame, "%s: field name %q is declared twice", where, d.Name))
		}
		t, problem := newTool(d)
		if problem == "" {
			shapes[i], problem = checkSchema(d.Parameters)
		}
		if problem != "" {
			return fail(declError(frames.CodeBadFrame, "%s: %s", where, problem))
		}
		p.tools[d.Name] = t
		p.names = append(p.names, d.Name)
	}
	if limit > 0 {
		n := len(others)
		for _, name := range p.names {
			if !others[name] {
				n++
			}
		}
		if n > limit {
			return fail(tooManyTools(n, limit))
		}
	}
	for i, d := range decls {
		t := p.tools[d.Name]
		key := compactSchema(d.Parameters)
		if s := schemas.lookup(key); s != nil {
			t.schema = s
			continue
		}
		s, err := compileSchemaText(key)
		if err != nil {
			return fail(declError(frames.CodeBadFrame, "tools[%d] (tool %q): field parameters is not a valid JSON Schema: %s", i, d.Name, oneLine(err.Error())))
		}
		t.schema = s
		p.fresh = append(p.fresh, freshSchema{tool: t, key: key, cost: shapes[i].cost(len(key))})
	}
	return p
}

// publish shares the schemas compiled for an applied declaration through the cache: a schema
// another declaration put there meanwhile replaces its own copy.
func (p *preparedTools) publish() {
	for _, f := range p.fresh {
		f.tool.schema = schemas.publish(f.key, f.tool.schema, f.cost)
	}
	p.fresh = nil
}

// tooManyTools is the limit_exceeded of more than limit distinct tool names in a session (SPEC 4).
func tooManyTools(n, limit int) *frames.Error {
	return frames.Errorf(frames.CodeLimitExceeded, "%d tools in this session is over the limit of %d", n, limit)
}

// newTool checks a declaration's flags and makes its Tool, without its schema.
func newTool(d frames.ToolDecl) (*Tool, string) {
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
	if timeout == 0 {
		timeout = jobs.DefaultTimeout
	}
	if dt == 0 {
		dt = jobs.DefaultDeferredTimeout
	}
	return &Tool{Decl: d, Job: jobs.Tool{
		Name: d.Name, Timeout: timeout, Deferred: d.Deferred, DeferredTimeout: dt,
		RequiresPermission: d.RequiresPermission, NotifyOnComplete: d.NotifiesOnComplete(),
		ExpectedDuration: string(d.ExpectedDuration),
	}}, ""
}

// compactSchema is a parameters value without its insignificant whitespace: the schema's key
// in the cache, and the text that is compiled.
func compactSchema(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw) // not JSON: compiling it says so
	}
	return b.String()
}

// compileSchemaText compiles a parameters schema (checkSchema bounded it first). Every call is
// counted (schemaCompiles) and runs the test hook, if one is set.
func compileSchemaText(text string) (*jsonschema.Schema, error) {
	schemaCompiles.Add(1)
	if h := compileHook.Load(); h != nil {
		(*h)([]byte(text))
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(selfContained{})
	c.UseRegexpEngine(boundedRegexp)
	if err := c.AddResource(parametersURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(parametersURL)
}

// parametersURL names a declaration's schema while it compiles: an absolute URL of no real
// place, so that no error text names a path of the broker's machine (a relative name resolves
// against the working directory: file:///…/parameters.json).
const parametersURL = "https://backchannel.invalid/parameters.json"

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
