package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProcessBenchVoice runs `backchannel bench voice` end to end with two real WebRTC callers
// (pion, in the bench process) against a real serve child, for each model — the scripted one,
// and the OpenAI adapter against a simulate-realtime child — and checks what cannot vary:
// every caller connected, the broker's histograms and counters are there and counted the
// audio, nothing was lost either way, and the voice model called the host's tool, which was
// deferred and its milestone queued for narration. No figure is asserted.
func TestProcessBenchVoice(t *testing.T) {
	t.Parallel()
	for _, m := range []string{"scripted", "openai"} {
		t.Run(m, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "voice.json")
			p := startProc(t, "bench-voice-"+m, "bench", "voice", "-model", m, "-callers", "2", "-duration", "7s",
				"-call-every", "2s", "-json", out)
			select { // the bench ends by itself: setup, 7 s, teardown
			case <-p.exited:
			case <-time.After(60 * time.Second):
				t.Fatalf("bench voice still runs after 60s")
			}
			if p.waitErr != nil {
				t.Fatalf("bench voice: %v; stderr:\n%s\nstdout:\n%s", p.waitErr, p.stderrText(), strings.Join(p.lines(), "\n"))
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var rs []voiceResult
			if err := json.Unmarshal(b, &rs); err != nil || len(rs) != 1 {
				t.Fatalf("results %s: %v", b, err)
			}
			r := rs[0]
			if r.Model != m || r.Callers != 2 || r.Connected != 2 {
				t.Errorf("model %q, %d of %d callers connected; want %s, 2 of 2", r.Model, r.Connected, r.Callers, m)
			}
			if r.InObserved == 0 || r.InPackets == 0 || r.OutObserved == 0 || r.OutPackets == 0 {
				t.Errorf("broker metrics: in-delay %d observations, %d packets; out-delay %d observations, %d packets; want all > 0",
					r.InObserved, r.InPackets, r.OutObserved, r.OutPackets)
			}
			if r.InSent == 0 || r.InLost != 0 || r.InSent != r.InPackets {
				t.Errorf("caller audio: %d packets sent, %d counted by the broker (lost %d); want all counted", r.InSent, r.InPackets, r.InLost)
			}
			if r.OutReceived == 0 || r.OutSeqGaps != 0 || r.OutDropped != 0 {
				t.Errorf("agent audio: %d packets received, %d sequence gaps, %d dropped by the broker; want some, no gaps, none dropped",
					r.OutReceived, r.OutSeqGaps, r.OutDropped)
			}
			if r.ToolCalls == 0 || r.Defers == 0 || r.Narrations["milestone queued"] == 0 || r.Transcripts == 0 || r.ErrorFrames != 0 {
				t.Errorf("tool calls %d, defers accepted %d, narrations %v, agent transcripts %d, error frames %d; want a deferred call "+
					"with its milestone queued, the agent speaking, no error frame", r.ToolCalls, r.Defers, r.Narrations, r.Transcripts, r.ErrorFrames)
			}
		})
	}
}
