package openai

import (
	"log/slog"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/openai/sim"
	"github.com/backchannel-io/backchannel/broker/wiretest"
	"github.com/backchannel-io/backchannel/internal/brokertest"
	"github.com/backchannel-io/backchannel/internal/g711"
)

// TestVoiceSpokenPermission runs a real broker with the adapter as its model and answers a
// spoken-permission ask (SPEC 12) by voice: the caller's µ-law audio goes to the Realtime
// server, whose transcription of the turn comes back as the caller's final transcript. The
// broker echoes it to the caller, judges it as the reply to the ask, and dispatches the call.
// (The other voice scenarios type their turns with caller.text; this is the path of a real
// caller.)
func TestVoiceSpokenPermission(t *testing.T) {
	srv := sim.New(sim.Options{APIKey: testKey})
	t.Cleanup(func() {
		srv.Close()
		checkEvents(t, srv.Events())
	})
	newModel := New(Options{URL: srv.URL(), APIKey: testKey, Logger: slog.New(slog.DiscardHandler)})
	b := brokertest.Start(t, brokertest.Options{Config: broker.Config{
		Models: map[string]model.Factory{"openai": newModel}, DefaultModel: "openai"}})

	host, caller, sid := voiceSession(t, b, []map[string]any{{"name": "pay", "description": "Pays an amount.",
		"requires_permission": true, "parameters": map[string]any{"type": "object"}}})

	caller.Send(map[string]any{"type": "caller.text", "text": `call pay {"amount":5}`})
	ask := caller.ExpectWithin(frameWait, agentSaid(""))
	if want := `Shall I run pay with {"amount":5}? Please say yes or no.`; ask.Str("text") != want {
		t.Errorf("the ask said %q, want %q", ask.Str("text"), want)
	}
	for _, f := range host.History() {
		if f.Type == "tool_call" {
			t.Fatalf("SPEC 12: the host got the call before the caller's answer: %s", f)
		}
	}

	// Once the ask has been heard to its end (its transcript is final before its audio has
	// played out), the caller answers by voice: 400 ms of speech, then silence until the
	// server's VAD ends the turn and transcribes it.
	caller.AudioQuiet(300 * time.Millisecond)
	srv.Transcribe("yes")
	talk(t, caller, g711.Tone(300, 20, 0.5), 20)
	talk(t, caller, g711.Silence(20), 60)

	echo := caller.ExpectWithin(frameWait, wiretest.TypeWith("transcript", "role", "caller", "text", "yes"))
	if !echo.Bool("final") {
		t.Errorf("the caller's transcript %s, want it final", echo)
	}
	host.ExpectWithin(frameWait, wiretest.TypeWith("tool_call", "name", "pay"))
	var verdict, reply string
	deadline := time.Now().Add(waitFor)
	for verdict == "" && time.Now().Before(deadline) {
		for _, e := range timeline(t, b, sid) {
			if e.Kind == "permission" {
				verdict, _ = e.Detail["verdict"].(string)
				reply, _ = e.Detail["transcript"].(string)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if verdict != "approve" || reply != "yes" {
		t.Errorf("timeline permission %q on %q, want approve on the spoken yes", verdict, reply)
	}
	host.Send(map[string]any{"type": "session.end"})
	host.ExpectWithin(frameWait, "session.ended")
}

// talk sends frame n times as the caller's audio, one binary message every 20 ms (real time,
// as a phone does).
func talk(t *testing.T, c *wiretest.Conn, frame []byte, n int) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for range n {
		if err := c.SendBinary(frame); err != nil {
			t.Fatal(err)
		}
		<-tick.C
	}
}
