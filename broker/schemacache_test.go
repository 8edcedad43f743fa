package broker

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// retainedBy measures, with runtime.MemStats, the heap that stays allocated after making n of
// what make makes, per one.
func retainedBy(n int, mk func() any) int64 {
	keep := make([]any, n)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range keep {
		keep[i] = mk()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(n)
}

// TestSchemaCostEstimate: what a compiled schema keeps in memory, measured with
// runtime.MemStats, is within its estimate (schemaShape.cost, which the cache's byte bound
// counts) for every adversarial schema, and not far below it.
func TestSchemaCostEstimate(t *testing.T) {
	for name, s := range adversarial {
		shape, _ := checkSchema([]byte(s))
		est := shape.cost(len(s))
		kept := retainedBy(8, func() any {
			sch, err := compileSchemaText(s)
			if err != nil {
				t.Fatal(err)
			}
			return struct {
				*jsonschema.Schema
				string
			}{sch, strings.Clone(s)} // the schema and its key, as the cache keeps them
		})
		t.Logf("%-17s kept %7d bytes, estimated %7d (%.1fx)", name, kept, est, float64(est)/float64(max(kept, 1)))
		if kept > est {
			t.Errorf("%s keeps %d bytes, over its estimate of %d", name, kept, est)
		}
	}
}

// TestRejectedDeclarationLeavesNothing (issue 15.2): the schemas of a declaration that is
// refused — over the tool limit, or with a bad schema after good ones — are not in the cache,
// those of an applied one are, and declaring them again compiles nothing.
func TestRejectedDeclarationLeavesNothing(t *testing.T) {
	n := testNode(t, Config{})
	inCache := func(tool map[string]any) bool {
		return schemas.lookup(compactSchema(mustJSON(tool["parameters"]))) != nil
	}
	tc, _ := connect(t, n, map[string]any{"api_key": testKey})
	schema := func(tag string) func(int) map[string]any {
		return func(i int) map[string]any { return bigSchema(fmt.Sprintf("%s-%d", tag, i)) }
	}
	over := tools("o", 65, schema("over"))
	wantError(t, tc.declare(over), "limit_exceeded")
	badLast := tools("b", 3, schema("bad-last"))
	badLast[2]["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": 17}}}
	wantError(t, tc.declare(badLast), "bad_frame", `tools[2] (tool "b2"): field parameters`)
	for _, tool := range append(over, badLast...) {
		if inCache(tool) {
			t.Fatalf("a rejected declaration left %s's schema in the cache", tool["name"])
		}
	}
	good := tools("g", 5, schema("good"))
	if d := tc.declare(good); d["type"] != "tools.declared" {
		t.Fatal(d)
	}
	for _, tool := range good {
		if !inCache(tool) {
			t.Fatalf("the applied declaration's schema of %s is not in the cache", tool["name"])
		}
	}
	before := schemaCompiles.Load()
	h2, _ := connect(t, n, map[string]any{"session_id": tc.c.SessionID(), "api_key": testKey})
	if d := h2.declare(tools("h", 5, schema("good"))); d["type"] != "tools.declared" {
		t.Fatal(d)
	}
	if got := schemaCompiles.Load() - before; got != 0 {
		t.Errorf("the same schemas declared again: %d compilations", got)
	}
}

// sixtyKiB is a distinct schema of about 60 KiB within the bounds: 200 properties with long
// descriptions.
func sixtyKiB(tag string) map[string]any {
	props := map[string]any{}
	for i := range 200 {
		props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string", "description": tag + strings.Repeat(" word", 55)}
	}
	return map[string]any{"type": "object", "properties": props, "required": []string{"p0"}}
}

// heap is the live heap after a full collection.
func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// cacheAfterGC collects until the cache's freed entries are gone (their cleanups run on their
// own goroutine after a collection), at most 100 collections; it returns the cache's stats.
func cacheAfterGC(want int) (int, int64) {
	entries, bytes := schemas.stats()
	for i := 0; i < 100 && entries > want; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		entries, bytes = schemas.stats()
	}
	return entries, bytes
}

// TestSchemaCacheFreedWithSessions (issue 15.2): the schemas of N sessions, each declaring a
// distinct 60 KiB schema, are freed with the sessions — the cache's entries and bytes go back to
// what they were and the heap after a collection goes back to about what it was — and so is a
// schema a declaration replaced; a schema two sessions declare is compiled once.
func TestSchemaCacheFreedWithSessions(t *testing.T) {
	n := testNode(t, Config{})
	entries0, bytes0 := cacheAfterGC(0)
	heap0 := heap()
	const N = 40
	var conns []*testConn
	for i := range N {
		tc, _ := connect(t, n, map[string]any{"api_key": testKey})
		decl := []map[string]any{{"name": "big", "description": "d", "parameters": sixtyKiB(fmt.Sprint("session ", i))}}
		if raw, _ := json.Marshal(decl[0]["parameters"]); len(raw) < 55<<10 || len(raw) > 64<<10 {
			t.Fatalf("the test schema is %d bytes", len(raw))
		}
		if d := tc.declare(decl); d["type"] != "tools.declared" {
			t.Fatalf("declaration: %v", d)
		}
		conns = append(conns, tc)
	}
	entries, bytes := schemas.stats()
	heapUp := heap()
	t.Logf("%d sessions: %d entries, %d estimated bytes, heap +%d KiB (%d KiB a session)", N, entries-entries0, bytes-bytes0,
		(heapUp-heap0)>>10, (heapUp-heap0)/N>>10)
	if entries-entries0 != N {
		t.Fatalf("%d distinct schemas declared, %d cache entries", N, entries-entries0)
	}

	// A second session declaring the first one's schema shares it: no compilation.
	before := schemaCompiles.Load()
	twin, _ := connect(t, n, map[string]any{"api_key": testKey})
	if d := twin.declare([]map[string]any{{"name": "big", "description": "d", "parameters": sixtyKiB("session 0")}}); d["type"] != "tools.declared" {
		t.Fatal(d)
	}
	if got := schemaCompiles.Load() - before; got != 0 {
		t.Errorf("a schema another session declared was compiled again (%d)", got)
	}

	// A declaration that replaces the tool set frees its schema (session 1's), the end of the
	// sessions frees the others; session 0's stays while the twin uses it.
	if d := conns[1].declare([]map[string]any{}); d["type"] != "tools.declared" {
		t.Fatal(d)
	}
	if e, _ := cacheAfterGC(entries0 + N - 1); e != entries0+N-1 {
		t.Errorf("after a declaration replaced a schema: %d entries, want %d", e-entries0, N-1)
	}
	for _, tc := range conns {
		tc.send(map[string]any{"type": "session.end"})
		for f := tc.next(); f["type"] != "session.ended"; f = tc.next() {
		}
	}
	conns = nil
	entries, _ = cacheAfterGC(entries0 + 1)
	if entries != entries0+1 {
		t.Errorf("after the sessions ended the cache has %d entries, want 1 (the twin's)", entries-entries0)
	}
	twin.send(map[string]any{"type": "session.end"})
	for f := twin.next(); f["type"] != "session.ended"; f = twin.next() {
	}
	twin = nil
	entries, bytes = cacheAfterGC(entries0)
	if entries != entries0 || bytes != bytes0 {
		t.Errorf("after every session ended the cache has %d entries and %d bytes more than before", entries-entries0, bytes-bytes0)
	}
	heap1 := heap()
	t.Logf("heap: before %d KiB, with the sessions %d KiB, after %d KiB", heap0>>10, heapUp>>10, heap1>>10)
	if grown, held := heap1-heap0, heapUp-heap0; grown > held/4 {
		t.Errorf("the heap kept %d KiB of the %d KiB the sessions' schemas took", grown>>10, held>>10)
	}
}

// TestSchemaCacheByteBound: the cache's estimated bytes never exceed its bound; past it a
// schema is compiled and used unshared, and a freed entry makes room again.
func TestSchemaCacheByteBound(t *testing.T) {
	saved := schemas
	t.Cleanup(func() { schemas = saved })
	shape, _ := checkSchema(mustJSON(sixtyKiB("probe")))
	one := shape.cost(len(mustJSON(sixtyKiB("probe"))))
	schemas = newSchemaCache(3*one + one/2) // room for three
	n := testNode(t, Config{})
	var conns []*testConn
	for i := range 6 {
		tc, _ := connect(t, n, map[string]any{"api_key": testKey})
		if d := tc.declare([]map[string]any{{"name": "big", "description": "d", "parameters": sixtyKiB(fmt.Sprint("bound ", i))}}); d["type"] != "tools.declared" {
			t.Fatalf("declaration %d: %v", i, d)
		}
		entries, bytes := schemas.stats()
		if bytes > schemas.max {
			t.Fatalf("the cache holds %d estimated bytes, over its bound of %d", bytes, schemas.max)
		}
		if want := min(i+1, 3); entries != want {
			t.Errorf("after %d declarations: %d entries, want %d", i+1, entries, want)
		}
		conns = append(conns, tc)
	}
	// The unshared ones work: arguments are checked against them.
	sl := conns[5].c.slot
	done := make(chan string, 1)
	conns[5].c.session.post(func() { done <- sl.tools["big"].checkArguments(json.RawMessage(`{}`)) })
	if msg := <-done; !strings.Contains(msg, "p0") {
		t.Errorf("arguments without the required p0: %q", msg)
	}
	// Ending the first session frees room for a new schema.
	conns[0].send(map[string]any{"type": "session.end"})
	for f := conns[0].next(); f["type"] != "session.ended"; f = conns[0].next() {
	}
	conns[0] = nil
	if e, _ := cacheAfterGC(2); e != 2 {
		t.Fatalf("after a session ended: %d entries, want 2", e)
	}
	tc, _ := connect(t, n, map[string]any{"api_key": testKey})
	if d := tc.declare([]map[string]any{{"name": "big", "description": "d", "parameters": sixtyKiB("bound new")}}); d["type"] != "tools.declared" {
		t.Fatal(d)
	}
	if e, bytes := schemas.stats(); e != 3 || bytes > schemas.max {
		t.Errorf("a new schema after room was freed: %d entries, %d bytes (bound %d)", e, bytes, schemas.max)
	}
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}
