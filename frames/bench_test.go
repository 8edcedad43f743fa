package frames

import (
	"encoding/json"
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
