package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/backchannel-io/backchannel/internal/g711"
)

// TestAppendEventIsTheJSONEvent: the hand-encoded input_audio_buffer.append is byte for byte
// what encoding/json makes of the event, for every chunk length a caller sends.
func TestAppendEventIsTheJSONEvent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 2*g711.SamplesPer20ms+1; n++ {
		chunk := make([]byte, n)
		for i := range chunk {
			chunk[i] = byte(r.UintN(256))
		}
		want, err := json.Marshal(audioAppend{Type: evAudioAppend, Audio: base64.StdEncoding.EncodeToString(chunk)})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendEvent(chunk); !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: %s, want %s", n, got, want)
		}
	}
}

// BenchmarkCallerAudioEvent encodes input_audio_buffer.append of 20 ms of caller audio, as
// CallerAudio does 50 times a second per session.
func BenchmarkCallerAudioEvent(b *testing.B) {
	chunk := g711.Tone(300, 20, 0.5)
	b.ReportAllocs()
	for b.Loop() {
		_ = appendEvent(chunk)
	}
}

// audioDeltaJSON is a response.output_audio.delta of 20 ms.
func audioDeltaJSON(chunk []byte) []byte {
	raw, _ := json.Marshal(map[string]any{"type": evAudioDelta, "event_id": "event_123456789", "response_id": "resp_0123456789abcdef",
		"item_id": "item_0123456789abcdef", "output_index": 0, "content_index": 1, "delta": base64.StdEncoding.EncodeToString(chunk)})
	return raw
}

// TestDecodeAudioDelta: the audio delta decoder reads what the general one does, and leaves
// every other event (and a malformed delta) to it.
func TestDecodeAudioDelta(t *testing.T) {
	chunk := g711.Tone(440, 20, 0.3)
	raw := audioDeltaJSON(chunk)
	ev, ok := decodeAudioDelta(raw)
	var gen serverEvent
	if err := json.Unmarshal(raw, &gen); err != nil {
		t.Fatal(err)
	}
	if !ok || !bytes.Equal(ev.Delta, chunk) || ev.ResponseID != gen.ResponseID || ev.ItemID != gen.ItemID || ev.ContentIndex != 1 {
		t.Errorf("decoded %+v, %v", ev, ok)
	}
	for _, other := range []string{
		`{"type":"response.output_audio_transcript.delta","response_id":"r","item_id":"response.output_audio.delta","delta":"aGk="}`,
		`{"type":"response.output_audio.delta","response_id":"r","delta":"not base64!"}`,
		`{"type":"response.output_audio.done","response_id":"r"}`,
	} {
		if _, ok := decodeAudioDelta([]byte(other)); ok {
			t.Errorf("decoded %s as an audio delta", other)
		}
	}
}

// BenchmarkAudioDeltaDecode decodes a response.output_audio.delta of 20 ms, as the reader
// does for every audio delta.
func BenchmarkAudioDeltaDecode(b *testing.B) {
	raw := audioDeltaJSON(g711.Tone(440, 20, 0.3))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := decodeAudioDelta(raw); !ok {
			b.Fatal("not decoded")
		}
	}
}
