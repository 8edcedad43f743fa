package broker

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// repeat joins n copies of item, with %d in it replaced by the copy's index.
func repeat(item string, n int, sep string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strings.ReplaceAll(item, "%d", fmt.Sprint(i))
	}
	return strings.Join(parts, sep)
}

// nested is depth levels of open … close around inner.
func nested(depth int, open, close, inner string) string {
	return strings.Repeat(open, depth) + inner + strings.Repeat(close, depth)
}

// padTo pads a schema object to exactly n bytes with a description.
func padTo(schema string, n int) string {
	const pad = `,"description":""}`
	fill := n - len(schema) - len(pad) + 1
	if fill < 0 {
		panic("schema already too long")
	}
	return schema[:len(schema)-1] + `,"description":"` + strings.Repeat("d", fill) + `"}`
}

// adversarial are schemas built to be expensive to compile, each as large as the bounds allow
// (TestAdversarialWithinBounds checks that they are within them, BenchmarkSchemaCompile
// measures them: docs/BENCHMARKS.md).
var adversarial = map[string]string{
	// 255 empty subschemas: the compiler's cost is per schema object.
	"anyOf-empty": `{"anyOf":[` + repeat(`{}`, maxSchemaNodes-1, ",") + `]}`,
	// the same with booleans, which are schemas too.
	"anyOf-true": `{"anyOf":[` + repeat(`true`, maxSchemaNodes-1, ",") + `]}`,
	// references back to the root.
	"ref-root": `{"anyOf":[` + repeat(`{"$ref":"#"}`, maxSchemaNodes-1, ",") + `]}`,
	// dynamic references, resolved through the dynamic scope.
	"dynamicRef": `{"$dynamicAnchor":"r","anyOf":[` + repeat(`{"$dynamicRef":"#r"}`, maxSchemaNodes-1, ",") + `]}`,
	// a chain of $refs through $defs.
	"ref-chain": refChain(maxSchemaNodes - 2),
	// a resource with its own $id per subschema.
	"ids": `{"anyOf":[` + repeat(`{"$ref":"http://x.example/a%d"}`, (maxSchemaNodes-2)/2, ",") + `],"$defs":{` + repeat(`"a%d":{"$id":"http://x.example/a%d"}`, (maxSchemaNodes-2)/2, ",") + `}}`,
	// 255 subschemas with many keywords each.
	"keywords": `{"anyOf":[` + repeat(`{"type":"string","minLength":1,"maxLength":50,"format":"email","const":"a","enum":["a","b"],"contentEncoding":"base64","deprecated":true}`, (maxSchemaNodes-1)/2, ",") + `]}`,
	// deep nesting: allOf 14 times in allOf (an object and an array each), 31 levels, over and over.
	"deep-wide": `{"anyOf":[` + repeat(nested(14, `{"allOf":[`, `]}`, `{}`), (maxSchemaNodes-1)/15, ",") + `]}`,
	// every JSON Schema meta-schema referenced (each is compiled).
	"meta-refs": `{"anyOf":[{"$ref":"https://json-schema.org/draft/2020-12/schema"},{"$ref":"https://json-schema.org/draft/2019-09/schema"},{"$ref":"http://json-schema.org/draft-07/schema#"},` + repeat(`{}`, maxSchemaNodes-4-3*metaRefNodes, ",") + `]}`,
	// regular expressions up to the instruction bound.
	"patterns":          `{"anyOf":[` + repeat(`{"pattern":"^[a-z]{1000}$"}`, 4, ",") + `]}`,
	"patternProperties": `{"patternProperties":{` + repeat(`"^p%d[\\w\\-]{80}$":{}`, 10, ",") + `}}`,
	// the largest character classes, which Go's regexp keeps per instruction.
	"classes": `{"properties":{` + repeat(`"c%d":{"pattern":"^[\\pL\\pN]+$"}`, 5, ",") + `}}`,
	// as much data as fits in 64 KiB: enums, required, examples.
	"data": padTo(`{"enum":[`+repeat(`%d`, 8000, ",")+`],"required":[`+repeat(`"r%d"`, 3000, ",")+`]}`, maxSchemaBytes),
	// many typed properties with long descriptions: an ordinary schema at the bounds.
	"properties": `{"type":"object","properties":{` + repeat(`"p%d":{"type":"string","description":"`+strings.Repeat("x", 200)+`"}`, maxSchemaNodes-2, ",") + `}}`,
}

// refChain is a chain of n $refs through $defs.
func refChain(n int) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/a0","$defs":{`)
	for i := 0; i < n-1; i++ {
		fmt.Fprintf(&b, `"a%d":{"$ref":"#/$defs/a%d"},`, i, i+1)
	}
	fmt.Fprintf(&b, `"a%d":{"type":"object"}}}`, n-1)
	return b.String()
}

// TestAdversarialWithinBounds: every adversarial schema passes the bounds and compiles; one
// more schema object or instruction does not pass.
func TestAdversarialWithinBounds(t *testing.T) {
	for name, s := range adversarial {
		shape, problem := checkSchema([]byte(s))
		if problem != "" {
			t.Errorf("%s: %s", name, problem)
			continue
		}
		if _, err := compileSchemaText(s); err != nil {
			t.Errorf("%s does not compile: %v", name, err)
		}
		t.Logf("%-17s %6d bytes, depth %2d, %3d schemas, %4d regexp instructions", name, len(s), shape.depth, shape.nodes, shape.insts)
	}
	if _, problem := checkSchema([]byte(`{"anyOf":[` + repeat(`{}`, maxSchemaNodes, ",") + `]}`)); !strings.Contains(problem, "schemas") {
		t.Errorf("257 schema objects: %q", problem)
	}
	if _, problem := checkSchema([]byte(`{"anyOf":[` + repeat(`{"pattern":"^[a-z]{1000}$"}`, 5, ",") + `]}`)); !strings.Contains(problem, "regular expressions") {
		t.Errorf("five 1000-instruction patterns: %q", problem)
	}
}

// TestSchemaBounds covers the rules of checkSchema: size and depth (SPEC 2), schema objects,
// meta-schema references and regular expressions, read through JSON escapes.
func TestSchemaBounds(t *testing.T) {
	deep := func(levels int) string { return nested(levels-1, `{"items":`, `}`, `{}`) }
	for _, c := range []struct {
		name, schema string
		problem      string // "" when accepted
	}{
		{"32 levels", deep(32), ""},
		{"33 levels", deep(33), "nests deeper than 32 levels"},
		{"32 levels of arrays", `{"enum":` + nested(31, `[`, `]`, `1`) + `}`, ""},
		{"33 levels of arrays", `{"enum":` + nested(32, `[`, `]`, `1`) + `}`, "nests deeper than 32 levels"},
		{"objects in arrays", `{"allOf":` + nested(15, `[{"allOf":`, `}]`, `[]`) + `}`, ""}, // 1 + 2*15 + 1 = 32
		{"objects in arrays, one deeper", `{"allOf":` + nested(15, `[{"allOf":`, `}]`, `[{}]`) + `}`, "nests deeper"},
		{"deep in a string", `{"description":"` + strings.Repeat("{[", 100) + `"}`, ""},
		{"64 KiB", padTo(`{"type":"object"}`, 64<<10), ""},
		{"64 KiB + 1", padTo(`{"type":"object"}`, 64<<10+1), "65537 bytes, over the limit of 65536 bytes"},
		{"256 schemas", `{"anyOf":[` + repeat(`{}`, 255, ",") + `]}`, ""},
		{"257 schemas", `{"anyOf":[` + repeat(`{}`, 256, ",") + `]}`, "more than 256 schemas"},
		{"257 booleans and objects", `{"anyOf":[` + repeat(`true`, 200, ",") + `,` + repeat(`{}`, 56, ",") + `]}`, "more than 256 schemas"},
		{"objects in data count", `{"enum":[` + repeat(`{"a":1}`, 256, ",") + `]}`, "more than 256 schemas"},
		{"scalars do not", `{"enum":[` + repeat(`%d`, 5000, ",") + `,null,"x"]}`, ""},
		{"three meta-schema refs", `{"anyOf":[` + repeat(`{"$ref":"https://json-schema.org/draft/2020-12/schema"}`, 3, ",") + `]}`, ""},
		{"four meta-schema refs", `{"anyOf":[` + repeat(`{"$ref":"https://JSON-Schema.org/draft/2020-12/schema"}`, 4, ",") + `]}`, "more than 256 schemas"},
		{"escaped meta-schema refs", `{"anyOf":[` + repeat(`{"\u0024ref":"https://json\u002dschema.org/draft/2020-12/schema"}`, 4, ",") + `]}`, "more than 256 schemas"},
		{"$schema is free", `{"$schema":"https://json-schema.org/draft/2020-12/schema","anyOf":[` + repeat(`{}`, 254, ",") + `]}`, ""},
		{"meta-schema $id", `{"$id":"https://json-schema.org/draft/2020-12/x","$ref":"meta/core"}`, "json-schema.org"},
		{"draft-04 meta-schema id", `{"$defs":{"x":{"id":"http://json-schema.org/x"}}}`, "json-schema.org"},
		{"regexp at the bound", `{"pattern":"^[a-z]{1000}[a-z]{1000}[a-z]{1000}[a-z]{1000}[a-z]{92}$"}`, ""}, // 4096
		{"regexp one over", `{"pattern":"^[a-z]{1000}[a-z]{1000}[a-z]{1000}[a-z]{1000}[a-z]{93}$"}`, "regular expressions too large"},
		{"patterns together", `{"properties":{"a":{"pattern":"x{1000}y{1000}"},"b":{"pattern":"x{1000}y{1000}"},"c":{"pattern":"z{100}"}}}`, "regular expressions too large"},
		{"patternProperties keys", `{"patternProperties":{"a{1000}":{},"b{1000}":{},"c{1000}":{},"d{1000}":{},"e{1000}":{}}}`, "regular expressions too large"},
		{"escaped pattern key", `{"patt\u0065rn":"a{1000}b{1000}c{1000}d{1000}e{1000}"}`, "regular expressions too large"},
		{"a property named pattern", `{"properties":{"pattern":{"type":"string"}}}`, ""},
	} {
		_, problem := checkSchema([]byte(c.schema))
		switch {
		case c.problem == "" && problem != "":
			t.Errorf("%s: rejected: %s", c.name, problem)
		case c.problem != "" && !strings.Contains(problem, c.problem):
			t.Errorf("%s: %q, want a problem with %q", c.name, problem, c.problem)
		case c.problem != "" && !strings.HasPrefix(problem, "field parameters "):
			t.Errorf("%s: %q does not name the field", c.name, problem)
		}
	}
}

// TestRegexpInstsEstimate: the estimate is never below what Go compiles a pattern to.
func TestRegexpInstsEstimate(t *testing.T) {
	for _, p := range []string{`^[a-zA-Z0-9_-]{1,64}$`, `^\d{4}-\d{2}-\d{2}$`, `[a-z0-9]{1000}`, `(?:a|b|c|d)*x{500}`,
		`^(?:a?){500}a{500}$`, `\pL{1000}`, `(?:(?:(?:a{10}){10}){10})`, `^.{0,1000}$`, `(a)(b)(c)|d+|e*?`, `(?i)hello world`,
		`^$`, ``, `a{2,}`, `(?:ab){3,}c?`, `[^x]`, `\b\w+\b`, `(?s).*`} {
		re, err := syntax.Parse(p, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := syntax.Compile(re.Simplify())
		if err != nil {
			t.Fatal(err)
		}
		if est := regexpInsts(p); est < len(prog.Inst) && est <= maxSchemaRegexp {
			t.Errorf("%s: estimated %d, compiles to %d instructions", p, est, len(prog.Inst))
		}
	}
}

// cpuTime is the CPU time the process used so far (user and system, every thread: the
// collector's work included), which a loaded machine inflates less than the time a benchmark
// took.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSchemaCompile checks and compiles each adversarial schema (docs/BENCHMARKS.md,
// "Tool schemas"); cpu-ns/op is the process's CPU time per compilation.
func BenchmarkSchemaCompile(b *testing.B) {
	names := make([]string, 0, len(adversarial))
	for name := range adversarial {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := adversarial[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if _, problem := checkSchema([]byte(s)); problem != "" {
					b.Fatal(problem)
				}
				if _, err := compileSchemaText(s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkCheckSchema measures the checks alone: the 64 KiB schema of data, and the probe's
// schema of 2,000 levels (issue 15.1: 31 s of compiling before), refused at level 33.
func BenchmarkCheckSchema(b *testing.B) {
	for name, s := range map[string]string{
		"data":        adversarial["data"],
		"2000-levels": nested(1999, `{"items":`, `}`, `{}`),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				checkSchema([]byte(s))
			}
		})
	}
}
