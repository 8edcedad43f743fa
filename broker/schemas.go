package broker

import (
	"encoding/json"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The parameters schemas of tool declarations (SPEC 2, 4): the bounds a schema is checked
// against before it is compiled. docs/broker.md ("Tool schemas") has the rules,
// docs/BENCHMARKS.md the figures.

// The bounds of one tool's parameters, checked on its text before anything is compiled.
const (
	// maxSchemaBytes bounds the raw parameters bytes, as sent (SPEC 2).
	maxSchemaBytes = 64 << 10
	// maxSchemaDepth bounds the nesting of JSON objects and arrays in parameters, the
	// parameters object itself being level 1 (SPEC 2).
	maxSchemaDepth = 32
	// maxSchemaNodes bounds the schemas the compiler may have to build: every JSON object and
	// every true or false in parameters, wherever it is, counts one. Compiling costs about
	// 10–20 µs per schema (docs/BENCHMARKS.md), so this keeps one compilation to a few
	// milliseconds.
	maxSchemaNodes = 256
	// metaRefNodes is what a $ref, $dynamicRef or $recursiveRef into json-schema.org counts
	// towards maxSchemaNodes: it compiles one of the JSON Schema meta-schemas (up to 1.2 ms).
	metaRefNodes = 64
	// maxSchemaRegexp bounds the regular expressions of parameters (every "pattern" value and
	// every key of a "patternProperties" object) together, in the instructions Go's regexp
	// compiles them to (estimated by regexpInsts). Per expression it also bounds what a
	// "format": "regex" argument may compile to.
	maxSchemaRegexp = 4096
)

// schemaShape is what checkSchema measured of a parameters value.
type schemaShape struct {
	depth    int // the deepest nesting of objects and arrays
	nodes    int // objects and booleans, plus metaRefNodes per reference to a meta-schema
	metaRefs int // references to a meta-schema
	insts    int // the regular expressions' estimated instructions
}

// checkSchema checks a tool's parameters against the bounds above before it is compiled. The
// problem, when there is one, is the rest of a bad_frame message after the tool ("field
// parameters ...").
func checkSchema(raw []byte) (schemaShape, string) {
	if len(raw) > maxSchemaBytes {
		return schemaShape{}, fmt.Sprintf("field parameters is %d bytes, over the limit of %d bytes", len(raw), maxSchemaBytes)
	}
	sc := &schemaScan{data: raw}
	sc.value(1, roleNone)
	if sc.problem == "" {
		sc.space()
		if sc.i != len(sc.data) {
			sc.fail("is not valid JSON")
		}
	}
	if sc.problem != "" {
		return schemaShape{}, "field parameters " + sc.problem
	}
	return sc.shape, ""
}

// schemaScan reads a parameters value once, measuring it (checkSchema).
type schemaScan struct {
	data    []byte
	i       int
	shape   schemaShape
	problem string
}

// What a value is to the scan: a keyword's value that needs looking at, or anything else.
const (
	roleNone              = iota
	rolePattern           // the value of "pattern": a regular expression
	rolePatternProperties // the value of "patternProperties": its keys are regular expressions
	roleRef               // the value of $ref, $dynamicRef or $recursiveRef
	roleID                // the value of $id (or draft-04's id): a base URI
)

func keyRole(key string) int {
	switch key {
	case "pattern":
		return rolePattern
	case "patternProperties":
		return rolePatternProperties
	case "$ref", "$dynamicRef", "$recursiveRef":
		return roleRef
	case "$id", "id":
		return roleID
	}
	return roleNone
}

func (sc *schemaScan) fail(problem string) {
	if sc.problem == "" {
		sc.problem = problem
	}
}

func (sc *schemaScan) space() {
	for sc.i < len(sc.data) {
		switch sc.data[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// node counts one schema the compiler may build.
func (sc *schemaScan) node(n int) {
	sc.shape.nodes += n
	if sc.shape.nodes > maxSchemaNodes {
		sc.fail(fmt.Sprintf("has more than %d schemas (JSON objects and booleans; a reference to a JSON Schema meta-schema counts %d)", maxSchemaNodes, metaRefNodes))
	}
}

// value reads one JSON value at nesting level depth (what it is at if it is an object or array).
func (sc *schemaScan) value(depth, role int) {
	sc.space()
	if sc.i >= len(sc.data) {
		sc.fail("is not valid JSON")
		return
	}
	switch c := sc.data[sc.i]; {
	case c == '{' || c == '[':
		if depth > maxSchemaDepth {
			sc.fail(fmt.Sprintf("nests deeper than %d levels", maxSchemaDepth))
			return
		}
		if depth > sc.shape.depth {
			sc.shape.depth = depth
		}
		if c == '{' {
			sc.node(1)
			sc.object(depth, role == rolePatternProperties)
		} else {
			sc.array(depth)
		}
	case c == '"':
		s, ok := sc.str(role != roleNone)
		if !ok {
			return
		}
		switch role {
		case rolePattern:
			sc.regexp(s)
		case roleRef:
			if metaURL(s) {
				sc.shape.metaRefs++
				sc.node(metaRefNodes)
			}
		case roleID:
			if metaURL(s) {
				sc.fail(fmt.Sprintf("may not use %q as a base URI: json-schema.org is the meta-schemas'", s))
			}
		}
	case c == 't':
		sc.literal("true")
		sc.node(1)
	case c == 'f':
		sc.literal("false")
		sc.node(1)
	case c == 'n':
		sc.literal("null")
	default:
		start := sc.i
		for sc.i < len(sc.data) && numberByte(sc.data[sc.i]) {
			sc.i++
		}
		if sc.i == start {
			sc.fail("is not valid JSON")
		}
	}
}

func numberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func (sc *schemaScan) object(depth int, patternKeys bool) {
	sc.i++ // {
	sc.space()
	if sc.i < len(sc.data) && sc.data[sc.i] == '}' {
		sc.i++
		return
	}
	for sc.problem == "" {
		sc.space()
		if sc.i >= len(sc.data) || sc.data[sc.i] != '"' {
			sc.fail("is not valid JSON")
			return
		}
		key, ok := sc.str(true)
		if !ok {
			return
		}
		role := keyRole(key)
		if patternKeys {
			sc.regexp(key)
			role = roleNone // a schema
		}
		sc.space()
		if sc.i >= len(sc.data) || sc.data[sc.i] != ':' {
			sc.fail("is not valid JSON")
			return
		}
		sc.i++
		sc.value(depth+1, role)
		sc.space()
		if sc.i < len(sc.data) && sc.data[sc.i] == ',' {
			sc.i++
			continue
		}
		if sc.i < len(sc.data) && sc.data[sc.i] == '}' {
			sc.i++
			return
		}
		sc.fail("is not valid JSON")
	}
}

func (sc *schemaScan) array(depth int) {
	sc.i++ // [
	sc.space()
	if sc.i < len(sc.data) && sc.data[sc.i] == ']' {
		sc.i++
		return
	}
	for sc.problem == "" {
		sc.value(depth+1, roleNone)
		sc.space()
		if sc.i < len(sc.data) && sc.data[sc.i] == ',' {
			sc.i++
			continue
		}
		if sc.i < len(sc.data) && sc.data[sc.i] == ']' {
			sc.i++
			return
		}
		sc.fail("is not valid JSON")
	}
}

// str reads a string; decode: return its value (else only skip it).
func (sc *schemaScan) str(decode bool) (string, bool) {
	start := sc.i
	sc.i++ // "
	escaped := false
	for sc.i < len(sc.data) {
		switch sc.data[sc.i] {
		case '\\':
			escaped = true
			sc.i += 2
			continue
		case '"':
			sc.i++
			if !decode {
				return "", true
			}
			if !escaped {
				return string(sc.data[start+1 : sc.i-1]), true
			}
			s, err := unquoteJSON(sc.data[start:sc.i])
			if err != nil {
				sc.fail("is not valid JSON")
				return "", false
			}
			return s, true
		}
		sc.i++
	}
	sc.fail("is not valid JSON")
	return "", false
}

// unquoteJSON decodes a JSON string with escapes.
func unquoteJSON(quoted []byte) (string, error) {
	var s string
	err := json.Unmarshal(quoted, &s)
	return s, err
}

func (sc *schemaScan) literal(word string) {
	if !strings.HasPrefix(string(sc.data[sc.i:min(sc.i+len(word), len(sc.data))]), word) {
		sc.fail("is not valid JSON")
		return
	}
	sc.i += len(word)
}

// regexp counts a regular expression of the schema.
func (sc *schemaScan) regexp(pattern string) {
	sc.shape.insts += regexpInsts(pattern)
	if sc.shape.insts > maxSchemaRegexp {
		sc.fail(fmt.Sprintf("has regular expressions too large: over %d instructions together (x{n} counts n times x)", maxSchemaRegexp))
	}
}

// metaURL reports a URL of the JSON Schema meta-schemas.
func metaURL(s string) bool { return strings.Contains(strings.ToLower(s), "json-schema.org") }

// regexpInsts estimates how many instructions Go's regexp compiles pattern to, from above, a
// character class counting its ranges (a compiled expression keeps them per instruction): a
// literal counts a rune each; a character class its ranges ([a-z] 1, \w 4, \pL over 600);
// any-character and assertions 1; x*, x+ and x?
// count x plus 1; x{n,m} counts n times x plus m-n times (x plus 1), x{n,} n+1 times x plus 1;
// an alternation counts its branches plus one per branch; a capturing group its contents plus
// 2; and 2 for the expression.
// A pattern that does not parse counts 0 (the compiler rejects it).
func regexpInsts(pattern string) int {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0
	}
	return progSize(re) + 2
}

// progSize is regexpInsts' estimate of one node, at most maxSchemaRegexp+1.
func progSize(re *syntax.Regexp) int {
	const limit = maxSchemaRegexp + 1
	subs := func() int {
		n := 0
		for _, s := range re.Sub {
			n = min(n+progSize(s), limit)
		}
		return n
	}
	n := 1
	switch re.Op {
	case syntax.OpCharClass:
		n = max(len(re.Rune)/2, 1)
	case syntax.OpLiteral:
		n = max(len(re.Rune), 1)
	case syntax.OpCapture:
		n = subs() + 2
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		n = subs() + 1
	case syntax.OpRepeat:
		sub := subs()
		if re.Max < 0 {
			n = re.Min*sub + sub + 1
		} else {
			n = re.Min*sub + (re.Max-re.Min)*(sub+1)
		}
		n = max(n, 1)
	case syntax.OpConcat:
		n = max(subs(), 1)
	case syntax.OpAlternate:
		n = subs() + len(re.Sub)
	}
	return min(n, limit)
}

// boundedRegexp is the schema compiler's regular-expression engine: Go's regexp (linear in the
// text it matches), for expressions of at most maxSchemaRegexp estimated instructions.
func boundedRegexp(pattern string) (jsonschema.Regexp, error) {
	if n := regexpInsts(pattern); n > maxSchemaRegexp {
		return nil, fmt.Errorf("regular expression of about %d instructions is over the limit of %d", n, maxSchemaRegexp)
	}
	return regexp.Compile(pattern)
}

// schemaCompiles counts schema compilations (tests read it).
var schemaCompiles atomic.Int64

// compileHook, when set, runs before every schema compilation (SetCompileHook).
var compileHook atomic.Pointer[func(schema []byte)]

// SetCompileHook makes fn run before every compilation of a tool's parameters schema, on the
// goroutine that compiles it, with the schema's compact text; nil removes it. It is for tests
// (broker/wiretest), which hold a compilation with it to watch what the session does meanwhile.
func SetCompileHook(fn func(schema []byte)) {
	if fn == nil {
		compileHook.Store(nil)
		return
	}
	compileHook.Store(&fn)
}

// toolNamesExcept is the set of tool names the session's slots other than slotID declare.
func (s *Session) toolNamesExcept(slotID string) map[string]bool {
	names := map[string]bool{}
	for id, sl := range s.slots {
		if id == slotID {
			continue
		}
		for n := range sl.tools {
			names[n] = true
		}
	}
	return names
}
