package frames

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

var benchResult = []byte(`{"type":"tool_result","id":"res-5","call_id":"call_k3v7qmx2d5rwpa4ntf6h","output":{"confirmation":"CN-20931","time":"20:15","party_size":4}}`)

func BenchmarkDecodeToolResult(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchResult)))
	for b.Loop() {
		if _, err := Decode(benchResult); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalToolResult is the floor: encoding/json alone into the struct, with none of
// Decode's checks.
func BenchmarkUnmarshalToolResult(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchResult)))
	for b.Loop() {
		var f ToolResult
		if err := json.Unmarshal(benchResult, &f); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeHello(b *testing.B) {
	raw := loadExamples(b)["hello"]
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeToolCall(b *testing.B) {
	f := &ToolCall{
		Reply:     Reply{Seq: 2},
		CallID:    "call_k3v7qmx2d5rwpa4ntf6h",
		Name:      "book_table",
		Arguments: json.RawMessage(`{"restaurant":"Chez Nous","party_size":4,"time":"2026-01-01T19:30:00+01:00"}`),
		Deferred:  true,
		TimeoutMS: 15000,
		SessionID: "sess_q6ipqkdftm0jl42ow4b5",
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(f); err != nil {
			b.Fatal(err)
		}
	}
}

// benchLarge is an agent.tool_call with about 64 KiB of arguments, text in several scripts.
var benchLarge = func() []byte {
	var b strings.Builder
	b.WriteString(`{"type":"agent.tool_call","id":"tc-9","call_id":"c9","conversation_id":"root","name":"summarize","arguments":{"items":[`)
	for i := 0; b.Len() < 64<<10; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"n":%d,"title":"Item %d: caf\u00e9 — naïve Grüße, 東京 😀","tags":["a","b\"c"],"score":%d.5e-1}`, i, i, i)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}()

func BenchmarkDecodeLargeToolCall(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchLarge)))
	for b.Loop() {
		if _, err := Decode(benchLarge); err != nil {
			b.Fatal(err)
		}
	}
}

// benchNonASCII is a tool_progress whose note is 100 KiB of two-byte UTF-8.
var benchNonASCII = []byte(`{"type":"tool_progress","id":"p-1","handle":"cap-handle","note":"note 001:` + strings.Repeat("ü", 50<<10) + `"}`)

func BenchmarkDecodeNonASCII(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchNonASCII)))
	for b.Loop() {
		if _, err := Decode(benchNonASCII); err != nil {
			b.Fatal(err)
		}
	}
}
