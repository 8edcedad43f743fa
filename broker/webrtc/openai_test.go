package webrtc

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/openai"
	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
	"github.com/backchannel-io/backchannel/internal/brokertest"
	"github.com/backchannel-io/backchannel/internal/g711"
)

// appendedAudio is the audio of every input_audio_buffer.append the simulator received in
// session index, in order, and how many appends there were.
func appendedAudio(t *testing.T, srv *sim.Server, index int) ([]byte, int) {
	t.Helper()
	var audio []byte
	n := 0
	for _, ev := range srv.Events() {
		if ev.Session != index || ev.Dir != sim.ClientToServer || ev.Type != "input_audio_buffer.append" {
			continue
		}
		var a struct {
			Audio string `json:"audio"`
		}
		if err := json.Unmarshal(ev.Raw, &a); err != nil {
			t.Fatalf("input_audio_buffer.append: %v", err)
		}
		b, err := base64.StdEncoding.DecodeString(a.Audio)
		if err != nil {
			t.Fatalf("input_audio_buffer.append: audio is not base64: %v", err)
		}
		audio = append(audio, b...)
		n++
	}
	return audio, n
}

// TestPCMUPassThroughOpenAI: µ-law from a WebRTC caller reaches the OpenAI Realtime adapter
// without transcoding. A pion caller sends known PCMU payloads as RTP; the Realtime simulator
// (session input format audio/pcmu) receives exactly those bytes, in order, in its
// input_audio_buffer.append events.
func TestPCMUPassThroughOpenAI(t *testing.T) {
	t.Parallel()
	const key = "test"
	srv := sim.New(sim.Options{APIKey: key})
	t.Cleanup(srv.Close) // after the broker's shutdown (cleanups run last-in first-out)
	newModel := openai.New(openai.Options{URL: srv.URL(), APIKey: key, Logger: slog.New(slog.DiscardHandler)})
	e := start(t, Options{}, broker.Config{DefaultModel: "openai", Models: map[string]model.Factory{"openai": newModel}})
	id, jt := createSession(t, e, brokertest.KeyA)
	c := dial(t, e, "caller", id, jt)
	c.join(jt)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ss, err := srv.Session(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for ss.Config().Updates == 0 {
		if ctx.Err() != nil {
			t.Fatal("the adapter sent no session.update")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f := ss.Config().InputFormat; f != sim.FormatPCMU {
		t.Fatalf("the session's input audio format is %q, want %q", f, sim.FormatPCMU)
	}

	// Lead-in: 20 ms packets of silence until the first reaches the simulator, so that the
	// whole path is live (audio that arrives before the hello is attached is dropped, by design).
	for n := 0; ; n++ {
		if _, appends := appendedAudio(t, srv, 0); appends > 0 {
			break
		}
		if n == 250 {
			t.Fatal("no caller audio reached the simulator within 5 s of silence")
		}
		c.speak(g711.Silence(20))
	}

	// The payloads: 2 s of noise, 100 packets of 160 bytes, each of its own.
	rng := rand.New(rand.NewPCG(17, 2024))
	sent := make([]byte, 100*160)
	for i := range sent {
		sent[i] = byte(rng.UintN(256))
	}
	c.speak(sent)
	// The received audio ends with the payloads once they all arrived.
	deadline := time.Now().Add(timeout)
	got, _ := appendedAudio(t, srv, 0)
	for !bytes.HasSuffix(got, sent) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		got, _ = appendedAudio(t, srv, 0)
	}
	time.Sleep(200 * time.Millisecond) // nothing more comes
	got, appends := appendedAudio(t, srv, 0)
	if len(got) < len(sent) {
		t.Fatalf("the simulator received %d bytes of caller audio, want at least %d", len(got), len(sent))
	}
	// What came before the payloads is silence only (the lead-in); the rest is the payloads,
	// byte for byte.
	prefix, rest := got[:len(got)-len(sent)], got[len(got)-len(sent):]
	if len(bytes.Trim(prefix, "\xff")) != 0 {
		t.Errorf("the %d bytes before the payloads are not only µ-law silence (0xFF)", len(prefix))
	}
	if !bytes.Equal(rest, sent) {
		i := 0
		for i < len(rest) && rest[i] == sent[i] {
			i++
		}
		t.Fatalf("the last %d bytes of caller audio the simulator received (of %d, in %d appends) differ from the RTP payloads sent from byte %d (packet %d)",
			len(sent), len(got), appends, i, i/160)
	}
	if f := ss.Config().InputFormat; f != sim.FormatPCMU {
		t.Fatalf("the session's input audio format became %q", f)
	}
}
